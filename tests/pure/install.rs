//! Pure tier: `scripts/install.sh` into a staging folder (DESTDIR, with the test build's
//! binary as UEVREC_BIN): the stripped binary runs, its debug info is apart, every man
//! page renders with `man -l`, the completion scripts parse in their shells (`bash -n`;
//! `zsh -n` and `fish -n` where installed: scripts/test-all.sh installs them), the units
//! name the installed binary.

use std::path::{Path, PathBuf};
use std::process::Command;

fn install(prefix: &str) -> (tempfile::TempDir, PathBuf) {
    let dest = tempfile::tempdir().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(root.join("scripts/install.sh"))
        .arg(prefix)
        .env("DESTDIR", dest.path())
        .env("UEVREC_BIN", crate::common::bin())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let at = dest.path().join(prefix.trim_start_matches('/'));
    (dest, at)
}

/// Whether `shell` is installed; when not, its check is skipped, said as a skip of the
/// pure tier (a failure when the tier is required: scripts/test-all.sh installs it).
fn have(shell: &str) -> bool {
    let here = Command::new(shell).arg("-c").arg("true").output().is_ok();
    if !here {
        crate::common::tier::skip(
            crate::common::tier::Tier::Pure,
            &format!("{shell} is not installed: its completion script is not parsed"),
        );
    }
    here
}

#[test]
fn install_sh_puts_binary_pages_completions_and_units_in_place() {
    let (_dest, at) = install("/opt/uevrec");
    let bin = at.join("bin/uevrec");
    let v = Command::new(&bin).arg("--version").output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&v.stdout).trim(),
        concat!("uevrec ", env!("CARGO_PKG_VERSION"))
    );
    // Stripped: no DWARF left in the binary; it is in lib/debug.
    let sections = Command::new("objdump")
        .arg("-h")
        .arg(&bin)
        .output()
        .unwrap();
    let sections = String::from_utf8_lossy(&sections.stdout);
    assert!(sections.contains(".gnu_debuglink"), "{sections}");
    assert!(!sections.contains(".debug_info"), "{sections}");
    assert!(at.join("lib/debug/uevrec.debug").exists());

    let man = at.join("share/man/man1");
    let mut pages: Vec<_> = std::fs::read_dir(&man)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    pages.sort();
    let names: Vec<_> = pages
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    for expected in [
        "uevrec.1",
        "uevrec-record.1",
        "uevrec-tail.1",
        "uevrec-decode.1",
        "uevrec-completions.1",
    ] {
        assert!(
            names.iter().any(|n| n == expected),
            "{expected} not in {names:?}"
        );
    }
    for page in &pages {
        let out = Command::new("man")
            .arg("-l")
            .arg(page)
            .env("MANPAGER", "cat")
            .env("MANWIDTH", "80")
            .output()
            .expect("man (man-db) is needed");
        let text = String::from_utf8_lossy(&out.stdout);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && err.trim().is_empty(),
            "{}: {err}",
            page.display()
        );
        assert!(
            text.contains("NAME") && text.contains("SYNOPSIS"),
            "{}: {text}",
            page.display()
        );
    }

    let share = at.join("share");
    let checks = [
        ("bash", share.join("bash-completion/completions/uevrec")),
        ("zsh", share.join("zsh/site-functions/_uevrec")),
        ("fish", share.join("fish/vendor_completions.d/uevrec.fish")),
    ];
    for (shell, script) in checks {
        let text = std::fs::read_to_string(&script).unwrap();
        assert!(
            text.contains("uevrec") && text.contains("--format"),
            "{shell}: {text}"
        );
        if have(shell) {
            let out = Command::new(shell).arg("-n").arg(&script).output().unwrap();
            assert!(
                out.status.success(),
                "{shell} -n {}: {}",
                script.display(),
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }

    for unit in ["uevrec.service", "uevrec-export.service"] {
        let text = std::fs::read_to_string(at.join("lib/systemd/system").join(unit)).unwrap();
        assert!(
            text.contains("ExecStart=/opt/uevrec/bin/uevrec record"),
            "{unit}: {text}"
        );
        assert!(!text.contains("/usr/local/bin"), "{unit}: {text}");
    }
    assert!(at.join("share/doc/uevrec/README.md").exists());
}

#[test]
fn completions_name_every_command() {
    for shell in ["bash", "zsh", "fish"] {
        let out = Command::new(crate::common::bin())
            .args(["completions", shell])
            .output()
            .unwrap();
        assert!(out.status.success());
        let text = String::from_utf8_lossy(&out.stdout);
        for cmd in [
            "record",
            "tail",
            "decode",
            "list",
            "top",
            "completions",
            "man",
        ] {
            assert!(text.contains(cmd), "{shell}: no {cmd}");
        }
    }
}
