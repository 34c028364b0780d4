//! The container image (contrib/container/): built with podman from this build's binary,
//! run privileged with the host's tracefs, it records a host tracepoint to standard
//! output; in a second run it exports to a receiver on 127.0.0.1 (the host's network)
//! with `/healthz` answering. Needs podman (scripts/test-all.sh installs it).

use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::export::http_get;
use crate::common::otlp_receiver::{Kind, Receiver};
use crate::common::{KillOnDrop, PATIENCE, bin, wait_for};

/// Whether podman runs here; when not, the test is skipped (or fails, host tier required).
fn podman_here() -> bool {
    let ok = Command::new("podman")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        crate::common::tier::skip(
            crate::common::tier::Tier::Host,
            "podman is not installed (apt-get install podman)",
        );
    }
    ok
}

/// podman's options for machines like the CI's: runc when installed (crun refuses a host
/// whose cgroups are in hybrid mode, as this project's VMs' are).
fn machine_options() -> Vec<String> {
    let runc = Command::new("runc").arg("--version").output().is_ok();
    if runc {
        vec!["--runtime".into(), "runc".into()]
    } else {
        Vec::new()
    }
}

/// Resource limits the container may have without CAP_SYS_RESOURCE (podman's defaults
/// are above this machine's hard limits): the descriptors' hard limit, 4096 processes.
fn limits() -> Vec<String> {
    let mut fds = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the one struct it is given.
    unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut fds) };
    let n = fds.rlim_max.min(1 << 20);
    vec![
        "--ulimit".into(),
        format!("nofile={n}:{n}"),
        "--ulimit".into(),
        "nproc=4096:4096".into(),
    ]
}

/// The image built by contrib/container/build.sh from the test build's binary; removed
/// when dropped.
struct Image(String);

impl Image {
    fn build() -> Image {
        let name = format!("localhost/uevrec:test-{}", std::process::id());
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let out = Command::new(root.join("contrib/container/build.sh"))
            .arg(&name)
            .env("UEVREC_BIN", bin())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        eprintln!("image: {}", text.trim());
        Image(name)
    }

    /// `podman run --rm --privileged --pid=host` with tracefs, and `extra` podman options,
    /// of `args`.
    fn run(&self, extra: &[&str], args: &[&str]) -> KillOnDrop {
        Command::new("podman")
            .args(machine_options())
            .args(["run", "--rm", "--privileged", "--pid=host"])
            .args(limits())
            .args(["-v", "/sys/kernel/tracing:/sys/kernel/tracing"])
            .args(extra)
            .arg(&self.0)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map(KillOnDrop)
            .expect("podman run")
    }
}

impl Drop for Image {
    fn drop(&mut self) {
        let _ = Command::new("podman").args(["rmi", "-f", &self.0]).output();
    }
}

/// Runs /bin/true every 100 ms until `child` exits (its output is small: a few dozen
/// exec lines fit the pipes); its exit status, standard output and standard error.
fn exec_until_exit(mut child: KillOnDrop) -> (std::process::ExitStatus, String, String) {
    use std::io::Read;
    let t0 = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.0.try_wait().unwrap() {
            break status;
        }
        assert!(t0.elapsed() < PATIENCE, "the container did not stop");
        Command::new("/bin/true").status().unwrap();
        std::thread::sleep(Duration::from_millis(100));
    };
    let (mut out, mut err) = (String::new(), String::new());
    child
        .0
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    child
        .0
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    (status, out, err)
}

#[test]
fn the_image_records_a_host_tracepoint_and_exports_it() {
    if !crate::common::raw_syscalls_here() || !podman_here() {
        return;
    }
    let image = Image::build();

    let rec = image.run(
        &[],
        &[
            "record",
            "-e",
            "sched:sched_process_exec",
            "--duration",
            "5s",
            "--format",
            "json",
        ],
    );
    let (status, stdout, stderr) = exec_until_exit(rec);
    assert!(status.success(), "{stdout}{stderr}");
    assert!(
        stdout.contains("\"system\":\"sched\",\"event\":\"sched_process_exec\""),
        "{stdout}"
    );

    let rx = Receiver::start(Kind::Grpc);
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let metrics = format!("127.0.0.1:{port}");
    let rec = image.run(
        &["--network", "host"],
        &[
            "record",
            "--otlp-endpoint",
            &rx.endpoint(),
            "--otlp-protocol",
            "grpc",
            "--metrics-listen",
            &metrics,
            "-e",
            "sched:sched_process_exec",
            "--duration",
            "8s",
        ],
    );
    wait_for("/healthz 200", PATIENCE, || {
        http_get(&metrics, "/healthz").is_some_and(|(code, _)| code == 200)
    });
    let (status, _, stderr) = exec_until_exit(rec);
    assert!(status.success(), "{stderr}");
    let logs = format!("{:?}", rx.logs());
    assert!(
        logs.contains("sched:sched_process_exec"),
        "nothing exported: {logs}"
    );
}
