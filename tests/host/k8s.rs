//! Kubernetes identity on every record, end to end through the binary on the host kernel
//! (host tier: root, tracefs, a writable cgroup v2 hierarchy): real cgroups laid out as
//! the kubelet's two cgroup drivers and each runtime name them (containerd, CRI-O and
//! its monitor, Docker; kind's nesting under another slice), created after uevrec
//! started (their paths come from the kernel's records), and a fake `/var/log/pods` +
//! `/var/log/containers` tree in a temp dir as the kubelet lays it out. Each producer,
//! a shell, moves itself into its cgroup, then execs perl to call
//! `syscall(setpgid, 424242, SEQ)` (an `ESRCH` that `syscalls:sys_enter_setpgid`
//! records with `pid == 424242` as the kernel filter, so other processes' calls are not
//! recorded); every record's keys are checked by its SEQ.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::thread::sleep;
use std::time::Duration;

use serde_json::Value;

use std::collections::BTreeMap;

use crate::common::PATIENCE;
use crate::common::cgroups::Cgroups;
use crate::common::export::{Sample, free_port, http_get, parsed, sample_sum, scrape};
use crate::common::otlp_receiver::{Kind, Receiver};
use crate::common::tier::Tier;
use crate::common::{complete_lines, wait_for};

/// setpgid's number (the tracepoint's filter field `pid` is its first argument).
#[cfg(target_arch = "x86_64")]
const NR_SETPGID: u32 = 109;
#[cfg(target_arch = "aarch64")]
const NR_SETPGID: u32 = 154;
const MARK: u32 = 424_242;

/// Runs one test at a time (they share the cgroup tree and the tracepoint).
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The cgroup v2 root, or why the tests cannot run.
fn host() -> Result<PathBuf, String> {
    // SAFETY: geteuid has no side effects.
    if unsafe { libc::geteuid() } != 0 {
        return Err("not root".into());
    }
    let event = Path::new("/sys/kernel/tracing/events/syscalls/sys_enter_setpgid");
    if !event.exists() {
        return Err(format!("no tracepoint {}", event.display()));
    }
    let root = uevrec::capture::context::cgroup_root()
        .ok_or_else(|| "no cgroup2 file system mounted".to_string())?;
    // One name per call: the tests of this file call it at the same time.
    static PROBES: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = PROBES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let probe = root.join(format!("uevrec-k8s-probe-{}-{n}", std::process::id()));
    fs::create_dir(&probe)
        .map_err(|e| format!("cgroup v2 at {} not writable: {e}", root.display()))?;
    let _ = fs::remove_dir(&probe);
    Ok(root)
}

/// The SEQ numbers of this test process (tests of other processes record the same
/// tracepoint at the same time): `seq` of it.
fn ours(seq: u64) -> u64 {
    u64::from(std::process::id()) * 1000 + seq
}

/// The record of SEQ `seq` ([`ours`]) in `out`, if written.
fn record(out: &Path, seq: u64) -> Option<Value> {
    complete_lines(out)
        .into_iter()
        .find(|v| v["fields"]["pgid"] == ours(seq) && v.get("uevrec").is_none())
}

/// A recorder stopped (SIGINT, then waited for) when dropped, also when a test fails.
struct Recorder(Child);

impl Recorder {
    /// Stop it; it must exit cleanly.
    fn stop(mut self) {
        assert!(self.interrupt().success());
    }

    fn interrupt(&mut self) -> std::process::ExitStatus {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.0.id() as i32, libc::SIGINT) };
        self.0.wait().unwrap()
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        if self.0.try_wait().ok().flatten().is_none() {
            self.interrupt();
        }
    }
}

/// A pod UID in the systemd driver's spelling.
fn underscored(uid: &str) -> String {
    uid.replace('-', "_")
}

/// A containerd container of a Burstable pod under the systemd driver's
/// `kubepods.slice` at `sd`.
fn containerd_burstable(sd: &Path, uid: &str, id: &str) -> PathBuf {
    sd.join("kubepods-burstable.slice")
        .join(format!("kubepods-burstable-pod{}.slice", underscored(uid)))
        .join(format!("cri-containerd-{id}.scope"))
}

/// A pod UID (a UUID) from `n`.
fn uid(n: u8) -> String {
    format!("{n:08x}-aaaa-4bbb-8ccc-{n:012x}")
}

/// A 64-digit container id from `n`.
fn cid(n: u8) -> String {
    format!("{n:02x}").repeat(32)
}

/// The kubelet's log tree in a temp dir.
struct Kubelet {
    pods: PathBuf,
    containers: PathBuf,
}

impl Kubelet {
    fn new(dir: &Path) -> Self {
        let k = Kubelet {
            pods: dir.join("pods"),
            containers: dir.join("containers"),
        };
        fs::create_dir_all(&k.pods).unwrap();
        fs::create_dir_all(&k.containers).unwrap();
        k
    }

    /// Pod `ns/pod` (`uid`) with container `name` (`id`), as the kubelet makes them:
    /// `<ns>_<pod>_<uid>/<name>/0.log` and the link to it.
    fn add(&self, ns: &str, pod: &str, uid: &str, name: &str, id: &str) {
        let dir = self.pods.join(format!("{ns}_{pod}_{uid}")).join(name);
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("0.log"), "").unwrap();
        let link = self.containers.join(format!("{pod}_{ns}_{name}-{id}.log"));
        std::os::unix::fs::symlink(dir.join("0.log"), link).unwrap();
    }

    /// The pod and its container links gone (the kubelet's cleanup).
    fn remove(&self, ns: &str, pod: &str, uid: &str) {
        fs::remove_dir_all(self.pods.join(format!("{ns}_{pod}_{uid}"))).unwrap();
        for e in fs::read_dir(&self.containers).unwrap().flatten() {
            if e.file_name()
                .to_string_lossy()
                .starts_with(&format!("{pod}_{ns}_"))
            {
                fs::remove_file(e.path()).unwrap();
            }
        }
    }
}

/// `uevrec ARGS` (`record`, `top` …) of the marked setpgid calls, the kubelet's tree at
/// `k`, names looked for every 100 ms.
fn uevrec_command(k: &Kubelet, args: &[&str]) -> Command {
    uevrec_marked(k, args, MARK)
}

/// [`uevrec_command`] of the setpgid calls marked `mark`.
fn uevrec_marked(k: &Kubelet, args: &[&str], mark: u32) -> Command {
    let mut c = Command::new(crate::common::bin());
    c.args(args)
        .args(["-e", "syscalls:sys_enter_setpgid", "--filter"])
        .arg(format!("pid == {mark}"))
        .args(["--rescan-interval", "100ms", "--k8s-pod-logs"])
        .arg(&k.pods)
        .arg("--k8s-container-logs")
        .arg(&k.containers);
    c
}

/// `uevrec record` of the setpgid calls marked `mark` exporting to `endpoint` over
/// `protocol`, `extra` flags given (the environment's OTLP variables ignored).
fn exporter(k: &Kubelet, mark: u32, endpoint: &str, protocol: &str, extra: &[&str]) -> Recorder {
    let args = ["record", "--quiet", "--otlp-endpoint", endpoint];
    let rec = uevrec_marked(k, &args, mark)
        .args(["--otlp-protocol", protocol])
        .args(extra)
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_PROTOCOL")
        .spawn()
        .unwrap();
    Recorder(rec)
}

/// uevrec recording the marked setpgid calls into `out`, the kubelet's tree at `k`,
/// once attached.
fn recorder(backend: &str, k: &Kubelet, extra: &[&str], out: &Path) -> Recorder {
    let rec = uevrec_command(k, &["record", "--quiet", "--backend", backend])
        .args(extra)
        .arg("-o")
        .arg(out)
        .spawn()
        .unwrap();
    let rec = Recorder(rec);
    crate::common::wait_attached_notices(out, 1);
    rec
}

/// A process moved into the cgroup `dir` (made now) that calls setpgid(MARK, `seq`),
/// run to its end.
fn produce_in(dir: &Path, seq: u64) {
    produce_marked(dir, MARK, seq);
}

/// [`produce_in`] calling setpgid(`mark`, `seq`).
fn produce_marked(dir: &Path, mark: u32, seq: u64) {
    fs::create_dir_all(dir).unwrap();
    let script = format!(
        "echo $$ > {}/cgroup.procs && exec perl -e 'syscall({NR_SETPGID}, {mark}, {})'",
        dir.display(),
        ours(seq)
    );
    let status = Command::new("sh").args(["-c", &script]).status().unwrap();
    assert!(status.success(), "{script}");
}

/// What a record must say: the k8s keys (None: absent) and the container id.
#[derive(Debug)]
struct Want {
    uid: Option<String>,
    qos: Option<&'static str>,
    namespace: Option<&'static str>,
    pod: Option<&'static str>,
    container_name: Option<&'static str>,
    container: Option<String>,
}

impl Want {
    fn check(&self, v: &Value, what: &str) {
        let s = |o: &Option<&'static str>| o.map_or(Value::Null, Value::from);
        let got = |k: &str| v.get(k).cloned().unwrap_or(Value::Null);
        assert_eq!(
            got("k8s_pod_uid"),
            self.uid.clone().map_or(Value::Null, Value::from),
            "{what}: {v}"
        );
        assert_eq!(got("k8s_qos"), s(&self.qos), "{what}: {v}");
        assert_eq!(got("k8s_namespace"), s(&self.namespace), "{what}: {v}");
        assert_eq!(got("k8s_pod"), s(&self.pod), "{what}: {v}");
        assert_eq!(got("k8s_container"), s(&self.container_name), "{what}: {v}");
        assert_eq!(
            got("container"),
            self.container.clone().map_or(Value::Null, Value::from),
            "{what}: {v}"
        );
    }
}

fn want(
    uid: &str,
    qos: &'static str,
    ns: &'static str,
    pod: &'static str,
    name: Option<&'static str>,
    id: Option<&str>,
) -> Want {
    Want {
        uid: Some(uid.into()),
        qos: Some(qos),
        namespace: Some(ns),
        pod: Some(pod),
        container_name: name,
        container: id.map(Into::into),
    }
}

fn every_driver_and_runtime(backend: &str) {
    let root = require!(Tier::Host, host());
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = tempfile::tempdir().unwrap();
    let k = Kubelet::new(tmp.path());
    let out = tmp.path().join("out.json");
    let top = root.join(format!("uevrec-k8s-{}-{backend}", std::process::id()));
    fs::create_dir_all(&top).unwrap();
    let _cg = Cgroups(top.clone());

    let u1 = "11111111-aaaa-4bbb-8ccc-000000000001";
    let u2 = "22222222-aaaa-4bbb-8ccc-000000000002";
    let u3 = "5d8f5e1c2b3a4f6e7d8c9b0a1f2e3d4c"; // a static pod: its manifest's hash
    let u4 = "44444444-aaaa-4bbb-8ccc-000000000004";
    let u5 = "55555555-aaaa-4bbb-8ccc-000000000005";
    let u6 = "66666666-aaaa-4bbb-8ccc-000000000006";
    let (i1, i2, i3, i4, i5, i6) = (cid(1), cid(2), cid(3), cid(4), cid(5), cid(6));
    // Known before uevrec starts: pods 1 to 3 (read at start).
    k.add("shop", "web-0", u1, "nginx", &i1);
    k.add("batch", "job-x", u2, "worker", &i2);
    k.add("kube-system", "etcd-node", u3, "etcd", &i3);
    let rec = recorder(backend, &k, &[], &out);
    // Known after it started: pods 4 to 6 (read at a rescan).
    k.add("default", "api-1", u4, "app", &i4);
    k.add("default", "cron-1", u5, "job", &i5);
    k.add("kind", "nested", u6, "side-car", &i6);

    let sd = top.join("kubepods.slice");
    let fs_ = top.join("kubepods");
    let cases: Vec<(PathBuf, Want)> = vec![
        (
            sd.join("kubepods-burstable.slice")
                .join(format!("kubepods-burstable-pod{}.slice", underscored(u1)))
                .join(format!("cri-containerd-{i1}.scope")),
            want(u1, "Burstable", "shop", "web-0", Some("nginx"), Some(&i1)),
        ),
        (
            sd.join("kubepods-besteffort.slice")
                .join(format!("kubepods-besteffort-pod{}.slice", underscored(u2)))
                .join(format!("crio-{i2}.scope")),
            want(
                u2,
                "BestEffort",
                "batch",
                "job-x",
                Some("worker"),
                Some(&i2),
            ),
        ),
        (
            // CRI-O's monitor: the pod, no container.
            sd.join("kubepods-besteffort.slice")
                .join(format!("kubepods-besteffort-pod{}.slice", underscored(u2)))
                .join(format!("crio-conmon-{i2}.scope")),
            want(u2, "BestEffort", "batch", "job-x", None, None),
        ),
        (
            sd.join(format!("kubepods-pod{u3}.slice"))
                .join(format!("docker-{i3}.scope")),
            want(
                u3,
                "Guaranteed",
                "kube-system",
                "etcd-node",
                Some("etcd"),
                Some(&i3),
            ),
        ),
        (
            fs_.join("burstable").join(format!("pod{u4}")).join(&i4),
            want(u4, "Burstable", "default", "api-1", Some("app"), Some(&i4)),
        ),
        (
            fs_.join("besteffort")
                .join(format!("pod{u5}"))
                .join(format!("crio-{i5}")),
            want(
                u5,
                "BestEffort",
                "default",
                "cron-1",
                Some("job"),
                Some(&i5),
            ),
        ),
        (
            // kind: kubepods under the node container's kubelet.slice.
            top.join("kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-burstable.slice")
                .join(format!(
                    "kubelet-kubepods-burstable-pod{}.slice",
                    underscored(u6)
                ))
                .join(format!("cri-containerd-{i6}.scope")),
            want(
                u6,
                "Burstable",
                "kind",
                "nested",
                Some("side-car"),
                Some(&i6),
            ),
        ),
        (
            // Outside kubepods: no k8s keys.
            top.join("system.slice/uevrec-k8s-test.service"),
            Want {
                uid: None,
                qos: None,
                namespace: None,
                pod: None,
                container_name: None,
                container: None,
            },
        ),
    ];
    // The names of pods 4 to 6 are read at the first rescan after they were made.
    sleep(Duration::from_millis(500));
    for (seq, (dir, _)) in cases.iter().enumerate() {
        produce_in(dir, seq as u64);
    }
    let n = cases.len() as u64;
    wait_for("every case's record", PATIENCE, || {
        (0..n).all(|s| record(&out, s).is_some())
    });
    for (seq, (dir, want)) in cases.iter().enumerate() {
        let v = record(&out, seq as u64).unwrap();
        let what = dir.strip_prefix(&root).unwrap().display().to_string();
        assert_eq!(v["cgroup"], format!("/{what}"), "{v}");
        want.check(&v, &what);
    }

    // Pod web-0 replaced: the old one's logs go, a new one (new UID, new container)
    // starts before the kubelet made its log directory: its record carries the new UID
    // alone, never the old pod's names; once the directory is there, the new names.
    k.remove("shop", "web-0", u1);
    let u7 = "77777777-aaaa-4bbb-8ccc-000000000007";
    let i7 = cid(7);
    let dir7 = containerd_burstable(&sd, u7, &i7);
    produce_in(&dir7, 100);
    wait_for("the new pod's first record", PATIENCE, || {
        record(&out, 100).is_some()
    });
    let mut early = want(u7, "Burstable", "shop", "web-0", None, Some(&i7));
    early.namespace = None;
    early.pod = None;
    early.check(&record(&out, 100).unwrap(), "replaced pod, before its logs");
    k.add("shop", "web-0", u7, "nginx-v2", &i7);
    sleep(Duration::from_millis(600));
    produce_in(&dir7, 101);
    // And the old pod's cgroup (a process left in it) keeps the old UID.
    produce_in(&cases[0].0, 102);
    wait_for("the later records", PATIENCE, || {
        record(&out, 101).is_some() && record(&out, 102).is_some()
    });
    want(
        u7,
        "Burstable",
        "shop",
        "web-0",
        Some("nginx-v2"),
        Some(&i7),
    )
    .check(&record(&out, 101).unwrap(), "replaced pod, after its logs");
    want(u1, "Burstable", "shop", "web-0", Some("nginx"), Some(&i1))
        .check(&record(&out, 102).unwrap(), "the old pod's cgroup");

    rec.stop();
}

#[test]
fn every_driver_and_runtime_perf() {
    every_driver_and_runtime("perf");
}

#[test]
fn every_driver_and_runtime_ftrace() {
    every_driver_and_runtime("ftrace");
}

#[test]
fn no_context_leaves_the_k8s_keys_out() {
    let root = require!(Tier::Host, host());
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = tempfile::tempdir().unwrap();
    let k = Kubelet::new(tmp.path());
    let out = tmp.path().join("out.json");
    let top = root.join(format!("uevrec-k8s-{}-nocontext", std::process::id()));
    let _cg = Cgroups(top.clone());
    let uid = "11111111-aaaa-4bbb-8ccc-000000000001";
    k.add("shop", "web-0", uid, "nginx", &cid(1));
    let rec = recorder("perf", &k, &["--no-context"], &out);
    let dir = top
        .join(format!("kubepods/burstable/pod{uid}"))
        .join(cid(1));
    produce_in(&dir, 7);
    wait_for("the record", PATIENCE, || record(&out, 7).is_some());
    let v = record(&out, 7).unwrap();
    for key in [
        "cgroup",
        "container",
        "k8s_pod_uid",
        "k8s_qos",
        "k8s_namespace",
        "k8s_pod",
        "k8s_container",
    ] {
        assert!(v.get(key).is_none(), "{key} in {v}");
    }
    rec.stop();
}

/// What a test of this file works in: one at a time, a temp dir with the kubelet's
/// tree, and the cgroup `uevrec-k8s-<pid>-<name>` (removed, with what is under it, at
/// the end).
struct Fixture {
    _cgroups: Cgroups,
    kubelet: Kubelet,
    top: PathBuf,
    tmp: tempfile::TempDir,
    _one: std::sync::MutexGuard<'static, ()>,
}

impl Fixture {
    fn new(root: &Path, name: &str) -> Fixture {
        let one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        let tmp = tempfile::tempdir().unwrap();
        let top = root.join(format!("uevrec-k8s-{}-{name}", std::process::id()));
        fs::create_dir_all(&top).unwrap();
        Fixture {
            _cgroups: Cgroups(top.clone()),
            kubelet: Kubelet::new(tmp.path()),
            top,
            tmp,
            _one: one,
        }
    }
}

/// The resource attributes (strings) of the log record of SEQ `seq` ([`ours`]) the
/// receiver got, if it got it.
fn otlp_resource(
    rx: &crate::common::otlp_receiver::Receiver,
    seq: u64,
) -> Option<std::collections::BTreeMap<String, String>> {
    use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
    let want = i64::try_from(ours(seq)).unwrap();
    for req in rx.logs() {
        for rl in &req.resource_logs {
            let ours = rl.scope_logs.iter().flat_map(|s| &s.log_records).any(|r| {
                crate::common::export::attr(r, "pgid")
                    .is_some_and(|v| v.value == Some(Any::IntValue(want)))
            });
            if !ours {
                continue;
            }
            let attrs = rl.resource.as_ref()?.attributes.iter();
            return Some(
                attrs
                    .filter_map(|kv| match kv.value.as_ref()?.value.as_ref()? {
                        Any::StringValue(s) => Some((kv.key.clone(), s.clone())),
                        _ => None,
                    })
                    .collect(),
            );
        }
    }
    None
}

/// The Kubernetes resource attributes a record must carry (the semantic-convention
/// names; absent ones must be absent).
fn k8s_attrs(pairs: &[(&str, &str)]) -> std::collections::BTreeMap<String, String> {
    pairs
        .iter()
        .map(|&(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The Kubernetes part of a record's resource (host.name and the like left out).
fn k8s_part(
    mut attrs: std::collections::BTreeMap<String, String>,
) -> std::collections::BTreeMap<String, String> {
    attrs.retain(|k, _| k.starts_with("k8s.") || k == "container.id");
    attrs
}

/// `record --otlp-endpoint` (gRPC and HTTP/protobuf, to the receivers of
/// tests/common/otlp_receiver.rs): records of pods under both cgroup drivers carry
/// `k8s.pod.uid`, `container.id`, `k8s.namespace.name`, `k8s.pod.name` and
/// `k8s.container.name` as resource attributes; a record outside kubepods none; a pod
/// replaced by another of the same name: the new UID, no name until the kubelet's
/// directory names it, then the new names; with `--no-context` none at all.
fn otlp_export(kind: crate::common::otlp_receiver::Kind, protocol: &str) {
    use crate::common::otlp_receiver::Receiver;
    let root = require!(Tier::Host, host());
    let f = Fixture::new(&root, &format!("otlp-{protocol}"));
    let (k, top) = (&f.kubelet, &f.top);
    let (u1, u2, i1, i2) = (uid(0xa1), uid(0xa2), cid(0xa1), cid(0xa2));
    let (u1, u2) = (u1.as_str(), u2.as_str());
    k.add("shop", "web-0", u1, "nginx", &i1);
    k.add("batch", "job-x", u2, "worker", &i2);
    let export = |extra: &[&str]| {
        let rx = Receiver::start(kind);
        let endpoint = rx.endpoint();
        let rec = exporter(k, MARK, &endpoint, protocol, extra);
        wait_for("the attached notice at the receiver", PATIENCE, || {
            crate::common::export::notices(&rx.logs())
                .iter()
                .any(|w| w == "attached")
        });
        (rx, rec)
    };
    let (rx, rec) = export(&[]);
    let d1 = containerd_burstable(&top.join("kubepods.slice"), u1, &i1);
    let d2 = top
        .join("kubepods/besteffort")
        .join(format!("pod{u2}"))
        .join(&i2);
    let outside = top.join("system.slice/uevrec-k8s-otlp.service");
    produce_in(&d1, 0);
    produce_in(&d2, 1);
    produce_in(&outside, 2);
    wait_for("the three records at the receiver", PATIENCE, || {
        (0..3).all(|s| otlp_resource(&rx, s).is_some())
    });
    let named = |uid: &str, id: &str, ns: &str, pod: &str, name: &str| {
        k8s_attrs(&[
            ("container.id", id),
            ("k8s.pod.uid", uid),
            ("k8s.namespace.name", ns),
            ("k8s.pod.name", pod),
            ("k8s.container.name", name),
        ])
    };
    let got = |s| k8s_part(otlp_resource(&rx, s).unwrap());
    assert_eq!(got(0), named(u1, &i1, "shop", "web-0", "nginx"));
    assert_eq!(got(1), named(u2, &i2, "batch", "job-x", "worker"));
    assert_eq!(got(2), k8s_attrs(&[]));
    assert!(
        otlp_resource(&rx, 0).unwrap().contains_key("host.name"),
        "the host stays in the resource"
    );

    // web-0 replaced: a new UID whose directory the kubelet has not made yet.
    k.remove("shop", "web-0", u1);
    let (u3, i3) = (uid(0xa3), cid(0xa3));
    let u3 = u3.as_str();
    let d3 = containerd_burstable(&top.join("kubepods.slice"), u3, &i3);
    produce_in(&d3, 10);
    wait_for("the new pod's first record", PATIENCE, || {
        otlp_resource(&rx, 10).is_some()
    });
    assert_eq!(
        got(10),
        k8s_attrs(&[("container.id", &i3), ("k8s.pod.uid", u3)]),
        "before its logs: the UID alone, never the old pod's names"
    );
    k.add("shop", "web-0", u3, "nginx-v2", &i3);
    sleep(Duration::from_millis(600));
    produce_in(&d3, 11);
    wait_for("the new pod's later record", PATIENCE, || {
        otlp_resource(&rx, 11).is_some()
    });
    assert_eq!(got(11), named(u3, &i3, "shop", "web-0", "nginx-v2"));
    rec.stop();

    // --no-context: no Kubernetes attributes.
    let (rx, rec) = export(&["--no-context"]);
    produce_in(&d2, 20);
    wait_for("the record without context", PATIENCE, || {
        otlp_resource(&rx, 20).is_some()
    });
    assert_eq!(k8s_part(otlp_resource(&rx, 20).unwrap()), k8s_attrs(&[]));
    rec.stop();
}

#[test]
fn otlp_export_grpc() {
    otlp_export(crate::common::otlp_receiver::Kind::Grpc, "grpc");
}

#[test]
fn otlp_export_http_json() {
    otlp_export(crate::common::otlp_receiver::Kind::Http, "http/json");
}

/// `uevrec top --by pod --plain`: one row per pod, `namespace/pod` for a pod the
/// kubelet's directory names, the UID for one it does not (yet), `-` for records outside
/// pods; each row counts its pod's records exactly (the final lines count every record).
#[test]
fn top_by_pod() {
    let Some(run) = top_by_pod_run("top", &[]) else {
        return;
    };
    let get = |pod: &str| run.rows.iter().find(|(p, _)| p == pod).map(|(_, n)| *n);
    assert_eq!(get("shop/web-0"), Some(3), "{:?}", run.rows);
    assert_eq!(get(&run.unnamed), Some(1), "{:?}", run.rows);
    // Outside pods: ours, and any other process's marked setpgid calls.
    assert!(get("-").is_some_and(|n| n >= 1), "{:?}", run.rows);
}

/// `uevrec top -g --by pod --plain` (issue 38): each pod's row has its own busiest call
/// paths, and they count exactly its records: the three calls of shop/web-0 and the one
/// of the unnamed pod, each made by perl's `syscall` through the C library's `syscall`
/// (the innermost user frame, named whatever the walk finds past it).
#[test]
fn top_g_by_pod_counts_each_pods_call_paths() {
    let Some(run) = top_by_pod_run("top-g", &["-g"]) else {
        return;
    };
    for (pod, calls) in [("shop/web-0", 3), (run.unnamed.as_str(), 1)] {
        let line = run
            .last
            .iter()
            .find(|v| v["pod"] == pod)
            .unwrap_or_else(|| panic!("a final line of {pod} in {:#?}", run.last));
        assert_eq!(line["records"], calls, "{line}");
        let sites = line["call_sites"].as_array().expect("call_sites with -g");
        let counted: u64 = sites.iter().map(|s| s["records"].as_u64().unwrap()).sum();
        assert_eq!(
            counted + line["other_call_sites"].as_u64().unwrap(),
            calls,
            "{line}"
        );
        assert!(
            sites.iter().all(|s| {
                s["frames"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|f| f.as_str().is_some_and(|f| f.starts_with("syscall")))
            }),
            "every path of {pod} passes through syscall: {line}"
        );
    }
}

/// What [`top_by_pod_run`] read: the final count of each row (`pod`, records), the final
/// lines themselves, and the unnamed pod's UID.
struct TopByPod {
    rows: Vec<(String, u64)>,
    last: Vec<Value>,
    unnamed: String,
}

/// `uevrec top --plain --by pod ARGS` while 3 marked calls are made in pod shop/web-0
/// (named by the kubelet's tree), 1 in a pod it does not name and 1 outside pods, until
/// both pods' rows count them; stopped, its final lines. `None`: the host tier is not
/// here (said by `require!`).
fn top_by_pod_run(name: &str, args: &[&str]) -> Option<TopByPod> {
    let root = require!(Tier::Host, host(), None);
    let f = Fixture::new(&root, name);
    let (k, top) = (&f.kubelet, &f.top);
    let (named, unnamed, i1, i2) = (uid(0xb1), uid(0xb2), cid(0xb1), cid(0xb2));
    k.add("shop", "web-0", &named, "nginx", &i1);
    let out = f.tmp.path().join("top.json");
    let mut command = vec!["top", "--plain", "--by", "pod", "--interval", "200ms"];
    command.extend_from_slice(args);
    let rec = uevrec_command(k, &command)
        .stdout(fs::File::create(&out).unwrap())
        .spawn()
        .unwrap();
    let rec = Recorder(rec);
    wait_for("top's attached notice", PATIENCE, || {
        fs::read_to_string(&out).is_ok_and(|t| t.contains("attached"))
    });
    let d1 = containerd_burstable(&top.join("kubepods.slice"), &named, &i1);
    let d2 = top.join(format!("kubepods/pod{unnamed}")).join(&i2);
    let outside = top.join(format!("system.slice/uevrec-k8s-{name}.service"));
    for seq in 0..3 {
        produce_in(&d1, seq);
    }
    produce_in(&d2, 3);
    produce_in(&outside, 4);
    let rows = |all: &[Value], last: bool| -> Vec<(String, u64)> {
        let mut rows: Vec<(String, u64)> = Vec::new();
        for v in all.iter().filter(|v| v["uevrec"] == "top") {
            if last && v.get("final").is_none() {
                continue;
            }
            assert!(v.get("event").is_none(), "{v}");
            let pod = v["pod"].as_str().unwrap().to_string();
            let n = v["records"].as_u64().unwrap();
            match rows.iter_mut().find(|(p, _)| *p == pod) {
                Some(r) => r.1 = n,
                None => rows.push((pod, n)),
            }
        }
        rows
    };
    wait_for("the rows of both pods", PATIENCE, || {
        let r = rows(&complete_lines(&out), false);
        r.iter().any(|(p, n)| p == "shop/web-0" && *n == 3)
            && r.iter().any(|(p, n)| *p == unnamed && *n == 1)
    });
    rec.stop();
    let all = complete_lines(&out);
    Some(TopByPod {
        rows: rows(&all, true),
        last: all
            .into_iter()
            .filter(|v| v["uevrec"] == "top" && v.get("final").is_some())
            .collect(),
        unnamed,
    })
}

// ---------------------------------------------------------------------------------------
// /metrics by pod (export): each pod's records recorded and acknowledged.

/// The mark of the /metrics test's calls: other tests' (and other runs') marked calls
/// are not recorded by its recorder, so every pod series it reads is its own.
const METRICS_MARK: u32 = 424_243;

/// A pod UID unique to this test process.
fn process_uid(n: u8) -> String {
    format!("{:08x}-cccc-4ccc-8ccc-{n:012x}", std::process::id())
}

/// One recording exporting to a test receiver with `/metrics` served, `extra` flags
/// given: 3 calls in pod shop/cart-0, then 2 in web/front-0, then 1 outside pods; the
/// page read by prometheus_client once the receiver acknowledged all 6, and the
/// records per `k8s.pod.name` the receiver got.
fn metrics_by_pod(
    root: &Path,
    run: &str,
    extra: &[&str],
) -> (Vec<Sample>, BTreeMap<String, usize>) {
    let tmp = tempfile::tempdir().unwrap();
    let k = Kubelet::new(tmp.path());
    let (u1, u2, i1, i2) = (process_uid(1), process_uid(2), cid(11), cid(12));
    k.add("shop", "cart-0", &u1, "app", &i1);
    k.add("web", "front-0", &u2, "app", &i2);
    let rx = Receiver::start(Kind::Grpc);
    let addr = format!("127.0.0.1:{}", free_port());
    let endpoint = rx.endpoint();
    let metrics = [&["--metrics-listen", &addr][..], extra].concat();
    let rec = exporter(&k, METRICS_MARK, &endpoint, "grpc", &metrics);
    wait_for("the tracepoint attached", PATIENCE, || {
        http_get(&addr, "/metrics")
            .is_some_and(|(_, body)| body.lines().any(|l| l == "uevrec_attached_events 1"))
    });
    let top = root.join(format!("uevrec-k8s-metrics-{}-{run}", std::process::id()));
    fs::create_dir_all(&top).unwrap();
    let _cg = Cgroups(top.clone());
    let sd = top.join("kubepods.slice");
    for seq in 0..3 {
        produce_marked(&containerd_burstable(&sd, &u1, &i1), METRICS_MARK, seq);
    }
    // The first pod counted before the second calls: `--metrics-max-pods` gives its
    // places in the order the records are read, and live records are in order per CPU,
    // not across CPUs (in CI a second pod's calls on another CPU took the place first).
    let tp = "tracepoint=\"syscalls:sys_enter_setpgid\"";
    wait_for("the first pod's 3 records", PATIENCE, || {
        http_get(&addr, "/metrics")
            .is_some_and(|(_, b)| sample_sum(&b, "uevrec_records_recorded_total", tp) == 3)
    });
    for seq in 3..5 {
        produce_marked(&containerd_burstable(&sd, &u2, &i2), METRICS_MARK, seq);
    }
    produce_marked(&top.join("outside"), METRICS_MARK, 5);
    wait_for("6 records acknowledged", PATIENCE, || {
        http_get(&addr, "/metrics")
            .is_some_and(|(_, b)| sample_sum(&b, "uevrec_records_exported_total", tp) == 6)
    });
    let page = scrape(&addr);
    rec.stop();
    let mut by_pod = BTreeMap::new();
    for rl in rx.logs().iter().flat_map(|r| &r.resource_logs) {
        let pod = rl
            .resource
            .iter()
            .flat_map(|r| &r.attributes)
            .find_map(|kv| (kv.key == "k8s.pod.name").then(|| format!("{:?}", kv.value)));
        let records: usize = rl.scope_logs.iter().map(|s| s.log_records.len()).sum();
        *by_pod.entry(pod.unwrap_or_default()).or_default() += records;
    }
    (page, by_pod)
}

/// `/metrics` read by a real Prometheus text parser (prometheus_client): each pod's
/// records recorded and acknowledged, per tracepoint, exactly (and the collector got
/// as many with that pod's name); with `--metrics-max-pods 1` the second pod's
/// records count under `(other)`; with `--no-context` no series has pod labels.
#[test]
fn metrics_count_each_pods_records() {
    let root = require!(Tier::Host, host());
    require!(Tier::Host, crate::common::prometheus_client_here());
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let tp = ("tracepoint", "syscalls:sys_enter_setpgid");
    let count = |page: &[Sample], name: &str, ns: &str, pod: &str| {
        parsed(page, name, &[tp, ("k8s_namespace", ns), ("k8s_pod", pod)])
    };
    let (page, got) = metrics_by_pod(&root, "all", &[]);
    for (ns, pod, n) in [("shop", "cart-0", 3), ("web", "front-0", 2)] {
        for (metric, want) in [
            ("uevrec_records_recorded_total", n),
            ("uevrec_records_exported_total", n),
            ("uevrec_records_spooled", 0),
        ] {
            let say = format!("{metric} of {ns}/{pod}: {page:?}");
            assert_eq!(count(&page, metric, ns, pod), want, "{say}");
        }
        // The collector got them, with the pod's name.
        let name = got.iter().find(|(k, _)| k.contains(&format!("\"{pod}\"")));
        assert_eq!(name.map(|(_, n)| *n), Some(n as usize), "{got:?}");
    }
    // The record outside pods: in the series without pod labels.
    let outside = page.iter().filter(|s| {
        s.name == "uevrec_records_exported_total"
            && s.labels.get("tracepoint").map(String::as_str) == Some(tp.1)
            && !s.labels.contains_key("k8s_pod")
    });
    assert_eq!(outside.map(|s| s.value as u64).sum::<u64>(), 1, "{page:?}");

    let (page, _) = metrics_by_pod(&root, "cap", &["--metrics-max-pods", "1"]);
    let other = "(other)";
    for (metric, ns, pod, want) in [
        ("uevrec_records_recorded_total", "shop", "cart-0", 3),
        ("uevrec_records_recorded_total", other, other, 2),
        ("uevrec_records_exported_total", other, other, 2),
    ] {
        let say = format!("{metric} of {ns}/{pod}: {page:?}");
        assert_eq!(count(&page, metric, ns, pod), want, "{say}");
    }
    assert!(
        !page
            .iter()
            .any(|s| s.labels.values().any(|v| v == "front-0")),
        "{page:?}"
    );
    assert_eq!(
        parsed(&page, "uevrec_k8s_pods_folded_total", &[]),
        1,
        "{page:?}"
    );

    // --no-context: no pod labels at all.
    let (page, _) = metrics_by_pod(&root, "no-context", &["--no-context"]);
    assert!(
        !page.iter().any(|s| s.labels.contains_key("k8s_pod")),
        "{page:?}"
    );
    let t = [tp];
    assert_eq!(
        parsed(&page, "uevrec_records_exported_total", &t),
        6,
        "{page:?}"
    );
}
