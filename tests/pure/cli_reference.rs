//! docs/cli.md is the command line's own help (`uevrec::cli::docs::reference_markdown`),
//! so that the reference never drifts from the code: `UEVREC_BLESS=1 cargo test --test
//! pure cli_reference` writes it again after a change to the flags.

use std::path::Path;

#[test]
fn docs_cli_md_is_the_command_lines_help() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/cli.md");
    let want = uevrec::cli::docs::reference_markdown();
    if std::env::var_os("UEVREC_BLESS").is_some() {
        std::fs::write(&path, &want).unwrap();
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    if have != want {
        let at = have
            .lines()
            .zip(want.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(have.lines().count().min(want.lines().count()));
        panic!(
            "docs/cli.md differs from the command line's help from line {}: write it again \
             with `UEVREC_BLESS=1 cargo test --test pure cli_reference`\n  file: {:?}\n  help: {:?}",
            at + 1,
            have.lines().nth(at),
            want.lines().nth(at)
        );
    }
}
