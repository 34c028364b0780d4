use super::*;

fn line(t: &ContextTracker, tid: u32, time: Option<u64>, cgroup: Option<u64>) -> String {
    let mut out = Vec::new();
    t.write(&mut out, tid, tid, time, cgroup);
    String::from_utf8(out).unwrap()
}

/// Thread `tid` is called `comm` from `time` on.
fn name(t: &mut ContextTracker, time: Option<u64>, tid: u32, comm: &[u8]) {
    t.apply(time, ContextUpdate::Comm { tid, comm });
}

#[test]
fn unknown_threads_and_cgroups_write_nothing() {
    let t = ContextTracker::new();
    assert_eq!(line(&t, 7, Some(1), Some(9)), "");
}

#[test]
fn renames_apply_from_their_time_on() {
    let mut t = ContextTracker::new();
    t.apply(
        None,
        ContextUpdate::Comm {
            tid: 7,
            comm: b"sh\0\0\0",
        },
    );
    t.apply(
        Some(100),
        ContextUpdate::Comm {
            tid: 7,
            comm: b"renamed",
        },
    );
    assert_eq!(line(&t, 7, Some(150), None), ",\"comm\":\"renamed\"");
    // A record written before the rename but staged after it (another CPU's ring).
    assert_eq!(line(&t, 7, Some(99), None), ",\"comm\":\"sh\"");
    // Without a time the current name.
    assert_eq!(line(&t, 7, None, None), ",\"comm\":\"renamed\"");
    // The same name again keeps the history.
    t.apply(
        Some(200),
        ContextUpdate::Comm {
            tid: 7,
            comm: b"renamed",
        },
    );
    assert_eq!(line(&t, 7, Some(99), None), ",\"comm\":\"sh\"");
}

#[test]
fn forks_inherit_name_and_cgroup() {
    let mut t = ContextTracker::new();
    t.apply(
        None,
        ContextUpdate::Cgroup {
            id: 5,
            path: b"/system.slice/cron.service",
        },
    );
    t.apply(
        None,
        ContextUpdate::Comm {
            tid: 1,
            comm: b"cron",
        },
    );
    t.apply(None, ContextUpdate::ThreadCgroup { tid: 1, id: 5 });
    t.apply(
        Some(3),
        ContextUpdate::Fork {
            tid: 2,
            parent_tid: 1,
        },
    );
    let want =
        ",\"comm\":\"cron\",\"cgroup\":\"/system.slice/cron.service\",\"unit\":\"cron.service\"";
    assert_eq!(line(&t, 2, Some(4), None), want);
    // The record's own cgroup id wins over the thread's.
    t.apply(None, ContextUpdate::Cgroup { id: 6, path: b"/" });
    assert_eq!(
        line(&t, 2, Some(4), Some(6)),
        ",\"comm\":\"cron\",\"cgroup\":\"/\""
    );
    // A fork from an unknown parent forgets what the id was before.
    t.apply(
        Some(5),
        ContextUpdate::Fork {
            tid: 2,
            parent_tid: 99,
        },
    );
    assert_eq!(line(&t, 2, Some(6), None), "");
}

#[test]
fn exited_threads_are_kept_for_a_while_then_dropped() {
    let mut t = ContextTracker::new();
    let n = MAX_EXITED as u32 + 10;
    for tid in 1..=n {
        t.apply(None, ContextUpdate::Comm { tid, comm: b"w" });
        t.apply(None, ContextUpdate::Exit { tid });
        // Exiting twice queues it once.
        t.apply(None, ContextUpdate::Exit { tid });
    }
    assert_eq!(t.threads(), MAX_EXITED);
    // The newest exited still resolve, the oldest are gone.
    assert_eq!(line(&t, n, None, None), ",\"comm\":\"w\"");
    assert_eq!(line(&t, 1, None, None), "");
    // A new thread reusing an exited id is not dropped when the old one's turn comes.
    t.apply(
        None,
        ContextUpdate::Fork {
            tid: 11,
            parent_tid: n,
        },
    );
    for tid in n + 1..n + 1 + MAX_EXITED as u32 {
        t.apply(None, ContextUpdate::Comm { tid, comm: b"x" });
        t.apply(None, ContextUpdate::Exit { tid });
    }
    assert_eq!(line(&t, 11, None, None), ",\"comm\":\"w\"");
    assert_eq!(t.threads(), MAX_EXITED + 1);
}

#[test]
fn cgroups_are_bounded() {
    let mut t = ContextTracker::new();
    for id in 0..MAX_CGROUPS as u64 + 5 {
        t.apply(None, ContextUpdate::Cgroup { id, path: b"/a" });
    }
    assert_eq!(t.cgroups(), MAX_CGROUPS);
    // The newest is kept.
    t.apply(None, ContextUpdate::Comm { tid: 1, comm: b"c" });
    assert_eq!(
        line(&t, 1, None, Some(MAX_CGROUPS as u64 + 4)),
        ",\"comm\":\"c\",\"cgroup\":\"/a\""
    );
}

#[test]
fn a_process_move_covers_threads_forked_before_it_was_staged() {
    let mut t = ContextTracker::new();
    t.apply(None, ContextUpdate::Cgroup { id: 1, path: b"/" });
    t.apply(
        None,
        ContextUpdate::Cgroup {
            id: 2,
            path: b"/app.scope",
        },
    );
    t.apply(
        None,
        ContextUpdate::Comm {
            tid: 10,
            comm: b"app",
        },
    );
    t.apply(None, ContextUpdate::ThreadCgroup { tid: 10, id: 1 });
    // The new thread's fork is staged before the process's move (another CPU's ring).
    t.apply(
        Some(5),
        ContextUpdate::Fork {
            tid: 11,
            parent_tid: 10,
        },
    );
    t.apply(Some(4), ContextUpdate::ThreadCgroup { tid: 10, id: 2 });
    let mut out = Vec::new();
    t.write(&mut out, 10, 11, Some(6), None);
    assert_eq!(
        String::from_utf8(out).unwrap(),
        ",\"comm\":\"app\",\"cgroup\":\"/app.scope\",\"unit\":\"app.scope\""
    );
}

#[test]
fn a_fork_staged_after_the_childs_exec_keeps_the_exec_name() {
    let mut t = ContextTracker::new();
    t.apply(
        None,
        ContextUpdate::Comm {
            tid: 1,
            comm: b"bash",
        },
    );
    // The child's exec (time 20) read from one CPU's ring before its fork (time 10)
    // from another's.
    t.apply(
        Some(20),
        ContextUpdate::Comm {
            tid: 2,
            comm: b"true",
        },
    );
    t.apply(
        Some(10),
        ContextUpdate::Fork {
            tid: 2,
            parent_tid: 1,
        },
    );
    assert_eq!(line(&t, 2, Some(30), None), ",\"comm\":\"true\"");
    // Between the fork and the exec: the parent's name then.
    assert_eq!(line(&t, 2, Some(15), None), ",\"comm\":\"bash\"");
    // A fork newer than the name (the id reused by a new thread) replaces it.
    t.apply(
        Some(40),
        ContextUpdate::Fork {
            tid: 2,
            parent_tid: 1,
        },
    );
    assert_eq!(line(&t, 2, Some(50), None), ",\"comm\":\"bash\"");
}

#[test]
fn several_renames_in_one_read_each_apply_from_their_time_on() {
    let mut t = ContextTracker::new();
    name(&mut t, None, 1, b"bash");
    // Fork, exec taskset, exec perl, two renames: all taken before any record is.
    t.apply(
        Some(10),
        ContextUpdate::Fork {
            tid: 2,
            parent_tid: 1,
        },
    );
    for (time, comm) in [
        (20, &b"taskset"[..]),
        (30, b"perl"),
        (40, b"ctx-a"),
        (50, b"ctx-b"),
    ] {
        name(&mut t, Some(time), 2, comm);
    }
    for (time, want) in [
        (15, "bash"),
        (20, "taskset"),
        (25, "taskset"),
        (35, "perl"),
        (45, "ctx-a"),
        (55, "ctx-b"),
    ] {
        assert_eq!(
            line(&t, 2, Some(time), None),
            format!(",\"comm\":\"{want}\""),
            "at {time}"
        );
    }
    // A rename read late (another CPU's ring) goes in its place.
    name(&mut t, Some(32), 2, b"late");
    assert_eq!(line(&t, 2, Some(31), None), ",\"comm\":\"perl\"");
    assert_eq!(line(&t, 2, Some(33), None), ",\"comm\":\"late\"");
    assert_eq!(line(&t, 2, Some(41), None), ",\"comm\":\"ctx-a\"");
}

#[test]
fn names_older_than_those_kept_are_not_guessed() {
    let mut t = ContextTracker::new();
    name(&mut t, None, 3, b"n0");
    let n = MAX_NAMES as u64 + 2;
    for i in 1..=n {
        let text = format!("n{i}");
        name(&mut t, Some(i * 10), 3, text.as_bytes());
    }
    // The newest MAX_NAMES earlier names and the current one are known.
    assert_eq!(
        line(&t, 3, Some(n * 10 + 5), None),
        format!(",\"comm\":\"n{n}\"")
    );
    let oldest_kept = n - MAX_NAMES as u64;
    assert_eq!(
        line(&t, 3, Some(oldest_kept * 10 + 5), None),
        format!(",\"comm\":\"n{oldest_kept}\"")
    );
    // Before them: not known, nothing written.
    assert_eq!(line(&t, 3, Some(5), None), "");
}
