//! The spool's tests: order, durability across reopen, ids, full policies, torn and
//! corrupt files, a model-based property test and an any-bytes reader test.

use super::*;
use proptest::prelude::*;
use std::sync::atomic::AtomicBool;
use std::thread;

/// Property tests fsync a lot: on tmpfs when there is one (fsync is free there).
fn tmp() -> tempfile::TempDir {
    tempfile::tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .expect("a temporary directory")
}

fn cfg(dir: &Path, max_bytes: u64, full: FullPolicy) -> SpoolConfig {
    SpoolConfig {
        dir: dir.to_path_buf(),
        max_bytes,
        full,
    }
}

fn open(dir: &Path) -> (Spool, Recovered) {
    Spool::open(cfg(dir, 64 << 20, FullPolicy::Block)).expect("open")
}

/// A body that says which batch it is.
fn body(i: u64, len: usize) -> Vec<u8> {
    (0..len).map(|k| (i as usize * 31 + k) as u8).collect()
}

static GO: AtomicBool = AtomicBool::new(false);

fn ids(s: &Spool) -> Vec<u64> {
    std::iter::from_fn(|| s.next(Duration::ZERO))
        .map(|e| e.id)
        .collect()
}

/// The segment logs in `dir`, oldest first.
fn logs(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    v.sort();
    v
}

#[test]
fn append_next_ack_in_order() {
    let d = tmp();
    let (s, rec) = open(d.path());
    assert_eq!(rec.batches, 0);
    let mut given = Vec::new();
    for i in 0..5 {
        let o = s
            .append(i + 1, b"meta", &body(i, 100 + i as usize), &GO)
            .unwrap();
        given.push(o.id);
    }
    assert!(given.windows(2).all(|w| w[0] < w[1]), "{given:?}");
    for (i, &id) in given.iter().enumerate() {
        let e = s.next(Duration::ZERO).unwrap();
        assert_eq!(e.id, id);
        assert_eq!(e.records, i as u64 + 1);
        assert_eq!(e.meta, b"meta");
        assert_eq!(e.body, body(i as u64, 100 + i));
    }
    assert!(s.next(Duration::from_millis(10)).is_none());
    let st = s.stats();
    assert_eq!((st.batches, st.records, st.handed_out), (5, 15, 5));
    for &id in &given {
        s.ack(id).unwrap();
    }
    assert!(matches!(s.ack(given[0]), Err(SpoolError::UnknownId(_))));
    let st = s.stats();
    assert_eq!(
        (st.batches, st.records, st.acked_batches, st.acked_records),
        (0, 0, 5, 15)
    );
    assert_eq!(st.appended_batches, 5);
}

#[test]
fn next_waits_for_an_append() {
    let d = tmp();
    let (s, _) = open(d.path());
    thread::scope(|t| {
        let waiter = t.spawn(|| s.next(Duration::from_secs(10)));
        thread::sleep(Duration::from_millis(50));
        let o = s.append(1, b"", b"late", &GO).unwrap();
        assert_eq!(waiter.join().unwrap().map(|e| e.id), Some(o.id));
    });
}

#[test]
fn reopen_redelivers_what_was_not_acked() {
    let d = tmp();
    let mut appended = Vec::new();
    {
        let (s, _) = open(d.path());
        for i in 0..4 {
            appended.push(s.append(2, b"m", &body(i, 300), &GO).unwrap().id);
        }
        let a = s.next(Duration::ZERO).unwrap();
        let _b = s.next(Duration::ZERO).unwrap(); // handed out, never acked
        s.ack(a.id).unwrap();
    }
    let (s, rec) = open(d.path());
    assert_eq!((rec.batches, rec.records, rec.corrupt_batches), (3, 6, 0));
    assert_eq!(ids(&s), appended[1..]);
    assert_eq!(s.next(Duration::ZERO), None);
    // Released batches come back, oldest first.
    assert_eq!(s.release(appended[2]), Released::Requeued);
    assert_eq!(s.release(appended[2]), Released::Unknown);
    assert_eq!(ids(&s), [appended[2]]);
}

#[test]
fn ids_stay_monotonic_across_restarts() {
    let d = tmp();
    let mut last = 0;
    for round in 0..4 {
        let (s, rec) = open(d.path());
        assert!(
            rec.next_id > last,
            "round {round}: {} after {last}",
            rec.next_id
        );
        for _ in 0..3 {
            let id = s.append(1, b"", b"x", &GO).unwrap().id;
            assert!(id > last);
            last = id;
        }
        // Everything acknowledged: the segments go, the id must not restart.
        while let Some(e) = s.next(Duration::ZERO) {
            s.ack(e.id).unwrap();
        }
        assert_eq!(s.stats().batches, 0);
    }
}

#[test]
fn a_second_spool_on_the_same_directory_is_refused() {
    let d = tmp();
    let (_s, _) = open(d.path());
    match Spool::open(cfg(d.path(), 1 << 20, FullPolicy::Block)) {
        Err(e @ SpoolError::Locked { pid: Some(p), .. }) => {
            assert_eq!(p, std::process::id());
            assert!(e.to_string().contains("its own --spool"), "{e}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn too_large_and_too_small() {
    let d = tmp();
    assert!(matches!(
        Spool::open(cfg(d.path(), 100, FullPolicy::Block)),
        Err(SpoolError::TooSmall { max: 100 })
    ));
    let (s, _) = Spool::open(cfg(d.path(), 8192, FullPolicy::Block)).unwrap();
    let e = s.append(1, b"", &[0; 8192], &GO).unwrap_err();
    assert!(matches!(e, SpoolError::TooLarge { max: 8192, .. }), "{e}");
    assert_eq!(s.stats().batches, 0);
}

#[test]
fn block_waits_for_an_ack_then_proceeds() {
    let d = tmp();
    let max = 16 * 1024;
    let (s, _) = Spool::open(cfg(d.path(), max, FullPolicy::Block)).unwrap();
    // 3 KiB frames, 4 KiB segments: one frame per segment, five fill the spool.
    let mut n = 0;
    while s.stats().bytes + 3000 + HEADER_LEN as u64 <= max {
        s.append(1, b"", &body(n, 3000), &GO).unwrap();
        n += 1;
    }
    let before = s.stats();
    assert!(before.bytes <= max);
    thread::scope(|t| {
        let blocked = t.spawn(|| s.append(1, b"", &body(99, 3000), &GO));
        thread::sleep(Duration::from_millis(200));
        assert!(!blocked.is_finished(), "append did not wait");
        assert_eq!(s.stats().blocked_appends, 1);
        assert_eq!(s.stats().appended_batches, n);
        let e = s.next(Duration::ZERO).unwrap();
        s.ack(e.id).unwrap();
        let o = blocked.join().unwrap().unwrap();
        assert_eq!(o.evicted_batches, 0);
    });
    let st = s.stats();
    assert_eq!((st.batches, st.appended_batches), (n, n + 1));
    assert!(st.bytes <= max, "{} > {max}", st.bytes);
    // And a stop ends a wait with Stopped.
    let stop = AtomicBool::new(false);
    thread::scope(|t| {
        let blocked = t.spawn(|| s.append(1, b"", &body(7, 3000), &stop));
        thread::sleep(Duration::from_millis(100));
        stop.store(true, Ordering::Relaxed);
        assert!(matches!(blocked.join().unwrap(), Err(SpoolError::Stopped)));
    });
}

#[test]
fn drop_oldest_evicts_and_counts() {
    let d = tmp();
    let max = 32 * 1024;
    let (s, _) = Spool::open(cfg(d.path(), max, FullPolicy::DropOldest)).unwrap();
    let (mut evicted_b, mut evicted_r, mut given) = (0, 0, Vec::new());
    for i in 0..40 {
        let o = s.append(3, b"", &body(i, 1000), &GO).unwrap();
        evicted_b += o.evicted_batches;
        evicted_r += o.evicted_records;
        given.push(o.id);
        assert!(s.stats().bytes <= max, "{} > {max}", s.stats().bytes);
    }
    let st = s.stats();
    assert!(evicted_b > 0);
    assert_eq!(evicted_r, 3 * evicted_b);
    assert_eq!(st.dropped_oldest_batches, evicted_b);
    assert_eq!(st.dropped_oldest_records, evicted_r);
    assert_eq!(st.batches + evicted_b, 40);
    // What is left is the newest, in order.
    assert_eq!(ids(&s), given[evicted_b as usize..]);
}

#[test]
fn drop_oldest_keeps_handed_out_batches_with_the_sender() {
    let d = tmp();
    let max = 32 * 1024;
    let (s, _) = Spool::open(cfg(d.path(), max, FullPolicy::DropOldest)).unwrap();
    let a = s.append(5, b"", &body(1, 1000), &GO).unwrap().id;
    let b = s.append(7, b"", &body(2, 1000), &GO).unwrap().id;
    assert_eq!(s.next(Duration::ZERO).unwrap().id, a);
    assert_eq!(s.next(Duration::ZERO).unwrap().id, b);
    let mut evicted = 0;
    for i in 0..60 {
        evicted += s
            .append(1, b"", &body(i, 1000), &GO)
            .unwrap()
            .evicted_batches;
    }
    // a and b's segment went, but they were handed out: not counted yet.
    assert_eq!(s.stats().dropped_oldest_batches, evicted);
    assert_eq!(s.stats().handed_out, 2);
    s.ack(a).unwrap();
    assert_eq!(s.stats().acked_records, 5);
    assert_eq!(s.release(b), Released::Dropped { records: 7 });
    let st = s.stats();
    assert_eq!(st.dropped_oldest_batches, evicted + 1);
    assert_eq!(st.handed_out, 0);
    assert_eq!(
        st.appended_batches,
        st.batches + st.acked_batches + st.dropped_oldest_batches
    );
}

/// Copy the spool's segment files from `from` into a fresh directory.
fn copy_spool(from: &Path) -> tempfile::TempDir {
    let to = tmp();
    for e in fs::read_dir(from).unwrap() {
        let p = e.unwrap().path();
        if p.file_name().unwrap() != "LOCK" {
            fs::copy(&p, to.path().join(p.file_name().unwrap())).unwrap();
        }
    }
    to
}

/// A closed spool holding batches 1..=n (bodies of `len` bytes); its log's frame offsets.
fn spool_of(n: u64, len: usize) -> (tempfile::TempDir, PathBuf, Vec<u64>) {
    let d = tmp();
    let (s, _) = open(d.path());
    let mut offsets = vec![0];
    for i in 1..=n {
        s.append(i, b"mm", &body(i, len), &GO).unwrap();
        offsets.push(offsets.last().unwrap() + (HEADER_LEN + 2 + len) as u64);
    }
    drop(s);
    let log = logs(d.path())
        .into_iter()
        .find(|p| fs::metadata(p).unwrap().len() > 0)
        .unwrap();
    assert_eq!(fs::metadata(&log).unwrap().len(), *offsets.last().unwrap());
    (d, log, offsets)
}

#[test]
fn a_torn_last_frame_at_every_offset_is_truncated_and_reported() {
    let (d, log, offsets) = spool_of(3, 60);
    let (start, end) = (offsets[2], offsets[3]);
    for cut in start + 1..end {
        let c = copy_spool(d.path());
        let copy = c.path().join(log.file_name().unwrap());
        OpenOptions::new()
            .write(true)
            .open(&copy)
            .unwrap()
            .set_len(cut)
            .unwrap();
        let (s, rec) = open(c.path());
        assert_eq!((rec.batches, rec.records), (2, 3), "cut at {cut}");
        assert_eq!(
            (rec.corrupt_batches, rec.truncated_bytes),
            (1, cut - start),
            "cut at {cut}"
        );
        let known = cut - start >= HEADER_LEN as u64;
        assert_eq!(rec.corrupt[0].records, known.then_some(3), "cut at {cut}");
        assert_eq!(rec.corrupt_records, if known { 3 } else { 0 });
        assert!(rec.corrupt[0].truncated);
        assert_eq!(fs::metadata(&copy).unwrap().len(), start, "not truncated");
        assert_eq!(ids(&s), [1, 2]);
        drop(s);
        // Truncated for good: the next open finds nothing damaged.
        let (_s, rec) = open(c.path());
        assert_eq!((rec.batches, rec.corrupt_batches), (2, 0));
    }
}

#[test]
fn a_flipped_byte_in_the_middle_costs_that_batch_only() {
    let (d, log, offsets) = spool_of(5, 200);
    // In batch 3's body (header intact: its records are known), then in its header.
    for (at, records) in [(offsets[2] + 100, Some(3)), (offsets[2] + 20, None)] {
        let c = copy_spool(d.path());
        let copy = c.path().join(log.file_name().unwrap());
        let mut bytes = fs::read(&copy).unwrap();
        bytes[at as usize] ^= 0x40;
        fs::write(&copy, &bytes).unwrap();
        let (s, rec) = open(c.path());
        assert_eq!((rec.batches, rec.corrupt_batches), (4, 1), "flip at {at}");
        assert_eq!(rec.corrupt[0].records, records);
        assert_eq!(rec.corrupt[0].offset, offsets[2]);
        assert_eq!(rec.corrupt[0].bytes, offsets[3] - offsets[2]);
        assert!(!rec.corrupt[0].truncated);
        assert_eq!(
            fs::metadata(&copy).unwrap().len(),
            offsets[5],
            "a middle is not cut"
        );
        let got = ids(&s);
        assert_eq!(got, [1, 2, 4, 5]);
        for id in got {
            s.ack(id).unwrap();
        }
        drop(s);
        // Everything intact acknowledged: the segment went, nothing comes back.
        let (s, rec) = open(c.path());
        assert_eq!((rec.batches, rec.corrupt_batches), (0, 0));
        assert_eq!(s.next(Duration::ZERO), None);
    }
}

#[test]
fn a_byte_flipped_after_open_is_never_sent() {
    let (d, log, offsets) = spool_of(3, 200);
    let (s, _) = open(d.path());
    let f = OpenOptions::new().write(true).open(&log).unwrap();
    f.write_all_at(&[0xff], offsets[1] + 150).unwrap();
    assert_eq!(ids(&s), [1, 3]);
    let st = s.stats();
    assert_eq!(
        (st.corrupt_batches, st.corrupt_records, st.batches),
        (1, 2, 2)
    );
    drop(s);
    // Recorded in the ack file: the next open does not count it again.
    let (s, rec) = open(d.path());
    assert_eq!(
        (rec.batches, rec.corrupt_batches, rec.damaged_acked),
        (2, 0, 1)
    );
    assert_eq!(ids(&s), [1, 3]);
}

#[test]
fn a_torn_ack_record_resends_only_its_batch() {
    let d = tmp();
    {
        let (s, _) = open(d.path());
        for i in 0..3 {
            s.append(1, b"", &body(i, 50), &GO).unwrap();
        }
        let (a, b) = (
            s.next(Duration::ZERO).unwrap(),
            s.next(Duration::ZERO).unwrap(),
        );
        s.ack(a.id).unwrap();
        s.ack(b.id).unwrap();
    }
    let ack = logs(d.path())[0].with_extension("ack");
    let len = fs::metadata(&ack).unwrap().len();
    assert_eq!(len, 2 * ACK_LEN as u64);
    OpenOptions::new()
        .write(true)
        .open(&ack)
        .unwrap()
        .set_len(len - 5)
        .unwrap();
    let (s, rec) = open(d.path());
    assert_eq!(rec.batches, 2);
    assert_eq!(ids(&s), [2, 3]);
    assert_eq!(fs::metadata(&ack).unwrap().len(), ACK_LEN as u64);
}

#[test]
fn an_ack_that_cannot_be_written_still_frees_its_segment() {
    let d = tmp();
    // Segments of 4 KiB (a sixteenth of the size, at least 4 KiB): batches of 3 KiB go
    // one per segment.
    let (s, _) = Spool::open(cfg(d.path(), 64 << 10, FullPolicy::Block)).expect("open");
    let a = s.append(1, b"m", &body(0, 3000), &GO).unwrap().id;
    let b = s.append(1, b"m", &body(1, 3000), &GO).unwrap().id;
    let first = logs(d.path())[0].clone();
    // The first segment's ack file, as a descriptor that cannot write (EBADF).
    {
        let mut st = lock(&s.state);
        let seg = st.segments.values_mut().next().unwrap();
        seg.ack_file = Some(Arc::new(File::open(&seg.ack_path).unwrap()));
    }
    assert_eq!(s.next(Duration::ZERO).unwrap().id, a);
    let e = s.ack(a).unwrap_err();
    assert!(
        matches!(e, SpoolError::AckNotRecorded { id, .. } if id == a),
        "{e}"
    );
    assert!(
        e.to_string()
            .contains("not sent again by this run, but would be after a crash"),
        "{e}"
    );
    // It left: not handed out again, counted, and its segment is gone.
    let st = s.stats();
    assert_eq!((st.ack_errors, st.batches, st.acked_batches), (1, 1, 1));
    assert!(!first.exists(), "{:?}", logs(d.path()));
    assert_eq!(s.next(Duration::ZERO).unwrap().id, b);
    s.ack(b).unwrap();
    assert!(s.next(Duration::ZERO).is_none());
}

#[test]
fn ack_space_is_reserved_when_the_batch_is_appended() {
    let d = tmp();
    let (s, _) = open(d.path());
    for i in 0..3 {
        s.append(1, b"m", &body(i, 100), &GO).unwrap();
    }
    let ack = d.path().join(format!("seg-{:020}.ack", 1));
    let m = fs::metadata(&ack).unwrap();
    use std::os::unix::fs::MetadataExt;
    // Nothing written yet, but blocks allocated (KEEP_SIZE), where the filesystem can.
    assert_eq!(m.len(), 0);
    if !s.no_fallocate.load(Ordering::Relaxed) {
        assert!(m.blocks() > 0, "{m:?}");
    }
}

#[test]
fn errors_say_what_to_do() {
    let e = SpoolError::Io {
        op: "append to",
        path: "/spool/seg.log".into(),
        source: io::Error::from_raw_os_error(libc::ENOSPC),
    };
    assert!(e.is_no_space());
    let m = e.to_string();
    assert!(
        m.contains("/spool/seg.log") && m.contains("smaller --spool-size"),
        "{m}"
    );
}

#[derive(Debug, Clone)]
enum Op {
    Append(u16),
    Next,
    Ack(usize),
    Release(usize),
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u16..3000).prop_map(Op::Append),
        3 => Just(Op::Next),
        2 => any::<usize>().prop_map(Op::Ack),
        1 => any::<usize>().prop_map(Op::Release),
        1 => Just(Op::Reopen),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Random appends, nexts, acks, releases and reopens against a model: a queue of
    /// pending batches, some handed out.
    #[test]
    fn behaves_like_its_model(ops in prop::collection::vec(op(), 1..60)) {
        let d = tmp();
        let mut s = Some(open(d.path()).0);
        // (id, records, body), oldest first; and which are handed out.
        let mut model: Vec<(u64, u64, Vec<u8>)> = Vec::new();
        let mut out: BTreeSet<u64> = BTreeSet::new();
        let mut last_id = 0;
        for op in ops {
            let sp = s.as_ref().unwrap();
            match op {
                Op::Append(len) => {
                    let b = body(len.into(), len.into());
                    let o = sp.append(len.into(), b"p", &b, &GO).unwrap();
                    prop_assert!(o.id > last_id);
                    last_id = o.id;
                    model.push((o.id, len.into(), b));
                }
                Op::Next => {
                    let want = model.iter().find(|m| !out.contains(&m.0));
                    let got = sp.next(Duration::ZERO);
                    match (want, got) {
                        (None, None) => {}
                        (Some(w), Some(g)) => {
                            prop_assert_eq!((g.id, g.records, &g.body), (w.0, w.1, &w.2));
                            out.insert(g.id);
                        }
                        (w, g) => prop_assert!(false, "want {:?}, got {:?}", w.map(|m| m.0), g.map(|e| e.id)),
                    }
                }
                Op::Ack(k) => {
                    if model.is_empty() {
                        prop_assert!(sp.ack(last_id + 1).is_err());
                    } else {
                        let (id, _, _) = model.remove(k % model.len());
                        out.remove(&id);
                        sp.ack(id).unwrap();
                    }
                }
                Op::Release(k) => {
                    if let Some(&id) = out.iter().nth(k % out.len().max(1)) {
                        prop_assert_eq!(sp.release(id), Released::Requeued);
                        out.remove(&id);
                    }
                }
                Op::Reopen => {
                    drop(s.take());
                    let (sp, rec) = open(d.path());
                    prop_assert_eq!(rec.batches, model.len() as u64);
                    prop_assert_eq!(rec.corrupt_batches, 0);
                    prop_assert!(rec.next_id > last_id);
                    out.clear();
                    s = Some(sp);
                }
            }
            let st = s.as_ref().unwrap().stats();
            prop_assert_eq!(st.batches, model.len() as u64);
            prop_assert_eq!(st.records, model.iter().map(|m| m.1).sum::<u64>());
            prop_assert_eq!(st.handed_out, out.len() as u64);
        }
    }

    /// The reader on any bytes: no panic, and the frames it finds cover the buffer with
    /// the damage, each one intact.
    #[test]
    fn scan_takes_any_bytes(chunks in prop::collection::vec(chunk(), 0..8), flips in prop::collection::vec(any::<(usize, u8)>(), 0..4)) {
        let mut buf: Vec<u8> = chunks.concat();
        for (at, x) in flips {
            if !buf.is_empty() {
                let n = buf.len();
                buf[at % n] ^= x;
            }
        }
        let mut pos = 0u64;
        for item in frame::scan(&buf) {
            match item {
                frame::Item::Frame { offset, header, meta, body } => {
                    prop_assert_eq!(offset, pos);
                    let again = frame::encode(header.id, header.records, meta, body).unwrap();
                    prop_assert_eq!(&buf[offset as usize..][..again.len()], &again[..]);
                    pos += header.frame_len();
                }
                frame::Item::Damage(d) => {
                    prop_assert_eq!(d.offset, pos);
                    prop_assert!(d.bytes > 0);
                    pos += d.bytes;
                    prop_assert_eq!(d.tail, pos == buf.len() as u64);
                }
            }
        }
        prop_assert_eq!(pos, buf.len() as u64);
    }

    /// A spool directory holding any bytes as a segment log and ack file: open does not
    /// panic, and every batch it hands out is a frame with valid checksums in that log.
    #[test]
    fn open_takes_any_bytes(
        chunks in prop::collection::vec(chunk(), 0..6),
        flips in prop::collection::vec(any::<(usize, u8)>(), 0..4),
        acks in prop::collection::vec(any::<u8>(), 0..40),
    ) {
        let d = tmp();
        let mut buf: Vec<u8> = chunks.concat();
        for (at, x) in flips {
            if !buf.is_empty() {
                let n = buf.len();
                buf[at % n] ^= x;
            }
        }
        let (log, ack) = seg_paths(d.path(), 1);
        fs::write(&log, &buf).unwrap();
        fs::write(ack, &acks).unwrap();
        let (s, rec) = open(d.path());
        let mut n = 0;
        while let Some(e) = s.next(Duration::ZERO) {
            let f = frame::encode(e.id, e.records, &e.meta, &e.body).unwrap();
            prop_assert!(buf.windows(f.len()).any(|w| w == &f[..]), "batch {} is not in the log", e.id);
            n += 1;
        }
        prop_assert_eq!(n, rec.batches);
        prop_assert!(s.append(1, b"", b"after", &GO).unwrap().id >= rec.next_id);
    }
}

/// Valid frames (ids 1..) and garbage, for the any-bytes tests.
fn chunk() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        (
            1u64..20,
            any::<u8>(),
            prop::collection::vec(any::<u8>(), 0..100)
        )
            .prop_map(
                |(id, records, body)| frame::encode(id, records.into(), b"x", &body).unwrap()
            ),
        prop::collection::vec(any::<u8>(), 0..60),
        Just(MAGIC.to_vec()),
    ]
}

use frame::MAGIC;

/// Counts and ids a segment's frames claim (checksums intact, not written by uevrec):
/// the totals saturate instead of overflowing, and an id past the last one is an error,
/// never a batch id given twice (issue 43).
#[test]
fn counts_and_ids_near_the_end_of_a_u64_saturate_or_are_errors() {
    let d = tmp();
    let first = u64::MAX - 2;
    let mut log = frame::encode(first, u64::MAX, b"m", b"one").unwrap();
    log.extend(frame::encode(first + 1, u64::MAX, b"m", b"two").unwrap());
    fs::write(seg_paths(d.path(), first).0, &log).unwrap();
    let (s, rec) = open(d.path());
    assert_eq!((rec.batches, rec.records), (2, u64::MAX));
    assert_eq!(rec.next_id, u64::MAX);
    match s.append(1, b"m", b"three", &GO) {
        Err(SpoolError::IdsUsedUp(id)) => assert_eq!(id, u64::MAX),
        other => panic!("{other:?}"),
    }
    assert_eq!(ids(&s), vec![first, first + 1]);
}
