//! Tier 3 (the user_events VM, scripts/vm-test.sh): context on user_events records, on
//! both backends. A `rate` producer registers its event and waits; uevrec attaches; the
//! test then creates a cgroup named like a podman container scope (after uevrec started,
//! so its path comes from the kernel), moves the producer into it and lets it start: it
//! renames itself (`rate --rename`, `prctl(PR_SET_NAME)`'s effect) and writes. Every
//! record must carry the new name, the cgroup's path and the container id; the records
//! come from a writer thread the producer creates after the rename (its name comes from
//! the fork tracking).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::KillOnDrop;
use crate::common::vm::PATIENCE;
use crate::common::vm::{
    backend, each_backend, interrupt_and_wait, kill_if_running, output_lines, spawn_rate, tmp_dir,
    user_events_here,
};

const ID: &str = "feedbeef00000000feedbeef00000000feedbeef00000000feedbeef00000000";
const RECORDS: u64 = 200;

fn wait(what: &str, mut done: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !done() {
        assert!(t0.elapsed() < PATIENCE, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The cgroup v2 root; the VM's kernel has cgroups but nothing mounts them: mounted here
/// on /run (a fresh tmpfs in the guest) when no cgroup2 is mounted yet.
///
/// The perf_event controller is enabled implicitly in every cgroup v2 cgroup, but the
/// kernel works out the root's implicit controllers only when the root's controllers
/// change; on a boot where nothing did (no systemd, no cgroup v1 mount: this VM), child
/// cgroups get no perf_event state, so `PERF_SAMPLE_CGROUP` names the root for every
/// task (and `perf stat -G child` fails with ENOENT). Mounting and unmounting a cgroup v1
/// perf_event hierarchy moves the controller away and back, which applies it to the v2
/// tree: done here once, as systemd's start-up does on other machines
/// (docs/json-lines.md, "Context"); uevrec's notice about it is checked before and after.
fn cgroup2_root() -> PathBuf {
    static ACTIVE: std::sync::Once = std::sync::Once::new();
    let root = mounted_cgroup2();
    ACTIVE.call_once(|| {
        // Before: uevrec's perf backend sees it and says why `cgroup` will be `/`.
        let probe = root.join("uevrec-vm-probe");
        fs::create_dir_all(&probe).unwrap();
        let before = perf_context_notices();
        assert!(
            before.contains("not active below the cgroup v2 root"),
            "a fresh boot with a hand-mounted cgroup2: {before}"
        );
        let v1 = Path::new("/run/uevrec-perf-event-v1");
        fs::create_dir_all(v1).unwrap();
        let mount = Command::new("mount")
            .args(["-t", "cgroup", "-o", "perf_event", "none"])
            .arg(v1)
            .status()
            .unwrap();
        // Refused when a v1 perf_event hierarchy exists already: then the controller
        // has been moved before, which is all this is for.
        if mount.success() {
            let st = Command::new("umount").arg(v1).status().unwrap();
            assert!(st.success(), "umount {}: {st}", v1.display());
        }
        let after = perf_context_notices();
        assert!(!after.contains("not active"), "after the v1 mount: {after}");
        let _ = fs::remove_dir(&probe);
    });
    root
}

/// The `context` notices of a short perf-backend recording.
fn perf_context_notices() -> String {
    let out = Command::new(crate::common::bin())
        .args(["record", "--backend", "perf", "--duration", "200ms"])
        .args(["-e", "sched:sched_process_exec"])
        .stderr(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains(r#""what":"context""#))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The cgroup v2 mount, made on /run when there is none.
fn mounted_cgroup2() -> PathBuf {
    if let Some(root) = uevrec::capture::context::cgroup_root() {
        return root;
    }
    let dir = Path::new("/run/uevrec-cgroup2");
    fs::create_dir_all(dir).unwrap();
    let st = Command::new("mount")
        .args(["-t", "cgroup2", "none"])
        .arg(dir)
        .status()
        .unwrap();
    // A test running beside this one may have mounted it first (mount then fails).
    assert!(
        st.success() || dir.join("cgroup.controllers").exists(),
        "mount -t cgroup2: {st}"
    );
    dir.to_path_buf()
}

#[test]
fn renamed_producer_in_a_created_container_cgroup() {
    if !user_events_here() {
        return;
    }
    let root = cgroup2_root();
    each_backend(|| {
        let dir = tmp_dir("context");
        let (out, err, start) = (dir.join("out.json"), dir.join("err"), dir.join("start"));
        let name = format!("uevrs_ctx_{}", backend());
        let (mut producer, reports) = spawn_rate(
            &name,
            RECORDS,
            &start,
            &["--threads", "1", "--rename", "ctx-renamed"],
        );
        let mut rec = KillOnDrop(
            Command::new(crate::common::bin())
                .args(["record", "--quiet", "--backend", backend()])
                .args(["-e", &format!("user_events:{name}"), "-o"])
                .arg(&out)
                .stderr(Stdio::from(fs::File::create(&err).unwrap()))
                .spawn()
                .unwrap(),
        );
        wait("uevrec's attached notice", || {
            fs::read_to_string(&out).is_ok_and(|t| t.contains("\"attached\""))
        });
        let parent = root.join(format!("uevrec-vm-ctx-{}", backend()));
        let scope = parent.join(format!("libpod-{ID}.scope"));
        fs::create_dir_all(&scope).unwrap();
        let pid = producer.id();
        fs::write(scope.join("cgroup.procs"), pid.to_string()).unwrap();
        fs::write(&start, "").unwrap();
        wait("the producer's done line", || {
            reports
                .lock()
                .unwrap()
                .iter()
                .any(|v| v.get("done").is_some())
        });
        let done = reports
            .lock()
            .unwrap()
            .iter()
            .find(|v| v.get("done").is_some())
            .cloned()
            .unwrap();
        assert_eq!(done["written"], RECORDS, "{done}");
        std::thread::sleep(Duration::from_millis(300));
        interrupt_and_wait(&mut rec, PATIENCE, &err);
        kill_if_running(&mut producer);
        let lines = output_lines(&out);
        let records: Vec<_> = lines
            .iter()
            .filter(|v| v["event"] == name.as_str())
            .collect();
        assert_eq!(records.len() as u64, RECORDS, "{}: {lines:#?}", backend());
        let path = format!("/uevrec-vm-ctx-{}/libpod-{ID}.scope", backend());
        // Both backends read their trackers first and merge them by time across CPUs:
        // every record has its context.
        for v in &records {
            assert_eq!(v["pid"], pid, "{v}");
            assert_eq!(v["comm"], "ctx-renamed", "{v}");
            // perf: what PERF_SAMPLE_CGROUP says, the task's own now that the perf_event
            // controller is active below the root (`cgroup2_root`); ftrace: the tracking
            // instance's moves.
            assert_eq!(v["cgroup"], path.as_str(), "{v}");
            assert_eq!(v["container"], ID, "{v}");
        }
        // The writer is a thread created after the rename (not the main thread).
        assert!(records.iter().all(|v| v["tid"] != pid), "{records:#?}");
        let _ = fs::remove_dir(&scope);
        let _ = fs::remove_dir(&parent);
    });
}

/// Kubernetes identity on user_events records: a fake kubelet log tree (a pod and its
/// container's link) and a cgroup laid out as a pod's container (perf backend: systemd
/// driver and containerd; ftrace: cgroupfs driver and CRI-O), created after uevrec
/// started; the `rate` producer moved into it writes; every record carries the pod's
/// UID, class, namespace, name and the container's name (docs/json-lines.md,
/// "Kubernetes"); a second uevrec beside it writes OTLP, whose records of the event all
/// carry the same as resource attributes (docs/otlp.md, "Kubernetes identity").
#[test]
fn producer_in_a_pod_container_cgroup() {
    if !user_events_here() {
        return;
    }
    let root = cgroup2_root();
    each_backend(|| {
        let dir = tmp_dir("k8s");
        let (out, err, start) = (dir.join("out.json"), dir.join("err"), dir.join("start"));
        let (uid, cid) = ("0a0b0c0d-1111-4222-8333-444455556666", ID);
        let (pods, containers) = (dir.join("pods"), dir.join("containers"));
        let logs = pods.join(format!("vm-ns_ue-0_{uid}/producer"));
        fs::create_dir_all(&logs).unwrap();
        fs::create_dir_all(&containers).unwrap();
        std::os::unix::fs::symlink(
            logs.join("0.log"),
            containers.join(format!("ue-0_vm-ns_producer-{cid}.log")),
        )
        .unwrap();
        let name = format!("uevrs_k8s_{}", backend());
        let (mut producer, reports) = spawn_rate(&name, RECORDS, &start, &["--threads", "1"]);
        // JSON lines and, beside them, OTLP (the identity as resource attributes).
        let (otlp, otlp_err) = (dir.join("out.otlp"), dir.join("err.otlp"));
        let recorder = |out: &Path, err: &Path, format: &str| {
            let rec = KillOnDrop(
                Command::new(assert_cmd::cargo::cargo_bin("uevrec"))
                    .args(["record", "--quiet", "--backend", backend()])
                    .args(["--format", format])
                    .args(["-e", &format!("user_events:{name}")])
                    .arg("--k8s-pod-logs")
                    .arg(&pods)
                    .arg("--k8s-container-logs")
                    .arg(&containers)
                    .arg("-o")
                    .arg(out)
                    .stderr(Stdio::from(fs::File::create(err).unwrap()))
                    .spawn()
                    .unwrap(),
            );
            wait("uevrec's attached notice", || {
                fs::read_to_string(out).is_ok_and(|t| t.contains("\"attached\""))
            });
            rec
        };
        let mut rec = recorder(&out, &err, "json");
        let mut rec_otlp = recorder(&otlp, &otlp_err, "otlp");
        let parent = root.join(format!("uevrec-vm-k8s-{}", backend()));
        let (scope, qos) = if backend() == "perf" {
            let pod = format!(
                "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{}.slice",
                uid.replace('-', "_")
            );
            (
                parent.join(pod).join(format!("cri-containerd-{cid}.scope")),
                "Burstable",
            )
        } else {
            (
                parent.join(format!("kubepods/besteffort/pod{uid}/crio-{cid}")),
                "BestEffort",
            )
        };
        fs::create_dir_all(&scope).unwrap();
        fs::write(scope.join("cgroup.procs"), producer.id().to_string()).unwrap();
        fs::write(&start, "").unwrap();
        wait("the producer's done line", || {
            reports
                .lock()
                .unwrap()
                .iter()
                .any(|v| v.get("done").is_some())
        });
        std::thread::sleep(Duration::from_millis(300));
        interrupt_and_wait(&mut rec, PATIENCE, &err);
        interrupt_and_wait(&mut rec_otlp, PATIENCE, &otlp_err);
        kill_if_running(&mut producer);
        let lines = output_lines(&out);
        let records: Vec<_> = lines
            .iter()
            .filter(|v| v["event"] == name.as_str())
            .collect();
        assert_eq!(records.len() as u64, RECORDS, "{}: {lines:#?}", backend());
        for v in &records {
            assert_eq!(v["container"], cid, "{v}");
            assert_eq!(v["k8s_pod_uid"], uid, "{v}");
            assert_eq!(v["k8s_qos"], qos, "{v}");
            assert_eq!(v["k8s_namespace"], "vm-ns", "{v}");
            assert_eq!(v["k8s_pod"], "ue-0", "{v}");
            assert_eq!(v["k8s_container"], "producer", "{v}");
        }
        // OTLP: every record of the event under a resource naming the pod.
        let want = [
            ("container.id", cid),
            ("k8s.pod.uid", uid),
            ("k8s.namespace.name", "vm-ns"),
            ("k8s.pod.name", "ue-0"),
            ("k8s.container.name", "producer"),
        ];
        let mut n = 0;
        for line in output_lines(&otlp) {
            for rl in line["resourceLogs"].as_array().into_iter().flatten() {
                let sl = &rl["scopeLogs"][0];
                if sl["scope"]["name"] != "user_events" {
                    continue;
                }
                let attrs = &rl["resource"]["attributes"];
                for (k, v) in want {
                    let got = attrs
                        .as_array()
                        .unwrap()
                        .iter()
                        .find(|a| a["key"] == k)
                        .map(|a| &a["value"]["stringValue"]);
                    assert_eq!(got, Some(&serde_json::Value::from(v)), "{k}: {rl}");
                }
                n += sl["logRecords"].as_array().unwrap().len() as u64;
            }
        }
        assert_eq!(n, RECORDS, "{}: OTLP records of the pod", backend());
        let mut dirs: Vec<PathBuf> = vec![scope.clone()];
        dirs.extend(
            scope
                .ancestors()
                .skip(1)
                .take_while(|d| d.starts_with(&parent))
                .map(Path::to_path_buf),
        );
        for d in dirs {
            let _ = fs::remove_dir(&d);
        }
    });
}
