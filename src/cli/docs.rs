//! What is generated from the command line's own definition, so that it never drifts
//! from it: shell completions (`uevrec completions SHELL`, clap_complete), man pages
//! (`uevrec man DIR`, clap_mangen: `uevrec.1` and `uevrec-COMMAND.1` for each command) and
//! the reference in docs/cli.md ([`reference_markdown`]; tests/pure/cli_reference.rs
//! checks the file against it).

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::{Args, CommandFactory};

use super::{Cli, EXIT_ERROR, EXIT_OK};
use crate::messages;

/// `uevrec completions`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish or powershell.
    #[arg(value_name = "SHELL")]
    pub shell: clap_complete::Shell,
}

/// `uevrec man`.
#[derive(Debug, Args)]
pub struct ManArgs {
    /// The folder to write the pages into (made if missing), e.g. /usr/local/share/man/man1.
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
}

/// Print the completion script of `args.shell` on standard output.
pub fn completions(args: &CompletionsArgs) -> i32 {
    let mut cmd = Cli::command();
    let mut out = Vec::new();
    clap_complete::generate(args.shell, &mut cmd, "uevrec", &mut out);
    match std::io::stdout().write_all(&out) {
        Ok(()) => EXIT_OK,
        Err(e) => {
            messages::error(&format_args!("writing the completion script: {e}"));
            EXIT_ERROR
        }
    }
}

/// Write the man pages into `args.dir`; their names on standard output.
pub fn man(args: &ManArgs) -> i32 {
    match write_man_pages(&args.dir) {
        Ok(pages) => {
            for p in pages {
                println!("{}", p.display());
            }
            EXIT_OK
        }
        Err(e) => {
            messages::error(&format_args!(
                "writing man pages into {}: {e}",
                args.dir.display()
            ));
            EXIT_ERROR
        }
    }
}

/// `uevrec.1` and one `uevrec-COMMAND.1` per command into `dir`; the paths written.
pub fn write_man_pages(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let cmd = Cli::command();
    let mut written = Vec::new();
    let mut page = |name: String, cmd: clap::Command| -> std::io::Result<()> {
        let mut roff = Vec::new();
        clap_mangen::Man::new(cmd.name(name.clone())).render(&mut roff)?;
        let path = dir.join(format!("{name}.1"));
        std::fs::write(&path, roff)?;
        written.push(path);
        Ok(())
    };
    for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
        page(format!("uevrec-{}", sub.get_name()), sub.clone())?;
    }
    page("uevrec".into(), cmd)?;
    Ok(written)
}

/// `cmd` and its subcommands without the values of their environment variables.
fn hide_env_values(cmd: clap::Command) -> clap::Command {
    cmd.mut_args(|a| a.hide_env_values(true))
        .mut_subcommands(hide_env_values)
}

/// docs/cli.md: for each command its one-line purpose and its `--help` text, in the
/// order `uevrec --help` lists them.
pub fn reference_markdown() -> String {
    // The same text on every machine: a fixed width, no environment values.
    let mut cmd = hide_env_values(Cli::command().term_width(100));
    cmd.build();
    let mut md = String::from(
        "# uevrec command line reference\n\n\
         Generated from the command line's definition (`src/cli/`): do not edit; \
         `UEVREC_BLESS=1 cargo test --test pure cli_reference` writes it again, and that \
         test fails while it differs. The same text is `uevrec COMMAND --help`; `man \
         uevrec-COMMAND` after `scripts/install.sh`.\n\n## uevrec\n\n```text\n",
    );
    md.push_str(&cmd.render_long_help().to_string());
    md.push_str("```\n");
    let subs: Vec<clap::Command> = cmd
        .get_subcommands()
        .filter(|s| s.get_name() != "help")
        .cloned()
        .collect();
    for mut sub in subs {
        let name = sub.get_name().to_string();
        md.push_str(&format!("\n## uevrec {name}\n\n```text\n"));
        md.push_str(&sub.render_long_help().to_string());
        md.push_str("```\n");
    }
    md
}
