//! `uevrec flamegraph [FILE…]`: JSON lines with call stacks (`record -g`, `tail -g`), or
//! perf.data and trace.dat files (decoded as `uevrec decode` does) → an interactive SVG
//! flame graph drawn by inferno, or `--folded` stacks for other tools
//! (docs/flamegraph.md). The folding and decoding are [`crate::offline::flamegraph`]'s.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::Args;
use inferno::flamegraph::color::{MultiPalette, Palette};
use inferno::flamegraph::{Direction, Options, from_lines};

use super::{EXIT_ERROR, EXIT_OK, EXIT_OUTPUT_CLOSED};
use crate::messages;
use crate::offline::flamegraph::{FoldOptions, Folder, Root, recorded_format};

/// `uevrec flamegraph`'s flags.
#[derive(Debug, Args)]
pub struct FlamegraphArgs {
    /// JSON-lines files as `record -g` and `tail -g` write them, or perf.data and
    /// trace.dat files (`record -g --raw`, `perf record -g`), told by their first bytes and
    /// decoded as `uevrec decode FILE` does; several are added together. Standard input
    /// when none or `-` (a perf.data or trace.dat there: redirected from a file, not piped).
    #[arg(value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Write the graph to FILE (default: standard output).
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Folded stacks (`frame;frame;… count` a line, outermost frame first) instead of
    /// an SVG: the input of flamegraph.pl, inferno-flamegraph, speedscope and others.
    #[arg(long)]
    pub folded: bool,
    /// The root frame of every stack: the event (one tower per event), the process
    /// name (comm), or none.
    #[arg(long, value_enum, value_name = "ROOT", default_value = "event")]
    pub by: Root,
    /// User frames only (kernel frames, `_[k]`, left out).
    #[arg(long)]
    pub user_only: bool,
    /// The graph's title (default: the events and the number of records).
    #[arg(long, value_name = "TEXT")]
    pub title: Option<String>,
    /// An icicle graph: roots at the top.
    #[arg(long)]
    pub inverted: bool,
    /// The SVG's width in pixels (default: as wide as the window showing it).
    #[arg(long, value_name = "PIXELS")]
    pub width: Option<usize>,
    /// perf.data and trace.dat: user frames as `module+0xOFFSET`, not named from this
    /// machine's files (as `decode --no-symbolize`; JSON lines keep their names).
    #[arg(long)]
    pub no_symbolize: bool,
}

/// Run `uevrec flamegraph`.
pub fn flamegraph(args: &FlamegraphArgs) -> i32 {
    let mut folder = Folder::new(FoldOptions {
        root: args.by,
        user_only: args.user_only,
    });
    let stdin = [PathBuf::from("-")];
    let files = if args.files.is_empty() {
        &stdin[..]
    } else {
        &args.files[..]
    };
    for path in files {
        folder.next_input();
        if let Err(e) = fold_file(&mut folder, path, args.no_symbolize) {
            messages::error(&e);
            return EXIT_ERROR;
        }
    }
    for said in folder.left_out() {
        messages::print(format_args!("uevrec flamegraph: {said}\n"));
    }
    if folder.records == 0 {
        messages::error(&format_args!(
            "no record with a stack in the input{}: record with -g (`uevrec record -g …`)",
            match folder.without_stack {
                0 => String::new(),
                n => format!(" ({n} records without one)"),
            }
        ));
        return EXIT_ERROR;
    }
    let written = match &args.output {
        Some(path) => File::create(path)
            .map_err(|e| format!("cannot create {}: {e}", path.display()))
            .and_then(|f| {
                let mut out = io::BufWriter::new(f);
                draw(args, &folder, &mut out)
                    .and_then(|()| out.flush())
                    .map_err(|e| format!("writing {}: {e}", path.display()))
            }),
        None => {
            let mut out = io::BufWriter::new(io::stdout().lock());
            match draw(args, &folder, &mut out).and_then(|()| out.flush()) {
                Err(e) if e.kind() == io::ErrorKind::BrokenPipe => return EXIT_OUTPUT_CLOSED,
                r => r.map_err(|e| format!("writing to standard output: {e}")),
            }
        }
    };
    match written {
        Ok(()) => EXIT_OK,
        Err(e) => {
            messages::error(&e);
            EXIT_ERROR
        }
    }
}

/// The folded lines, or the SVG of them.
fn draw(args: &FlamegraphArgs, folder: &Folder, out: &mut impl Write) -> io::Result<()> {
    if args.folded {
        return out.write_all(folder.folded_text().as_bytes());
    }
    let mut options = Options::default();
    options.title = args.title.clone().unwrap_or_else(|| folder.title());
    let left_out = folder.left_out();
    if !left_out.is_empty() {
        options.subtitle = Some(left_out.join("; "));
    }
    options.count_name = "records".into();
    // Kernel (`_[k]`), inlined (`_[i]`) and JIT (`_[j]`) frames in their own colours.
    options.colors = Palette::Multi(MultiPalette::Java);
    options.hash = true;
    options.image_width = args.width;
    if args.inverted {
        options.direction = Direction::Inverted;
    }
    let lines: Vec<String> = folder
        .folded()
        .into_iter()
        .map(|(stack, n)| format!("{stack} {n}"))
        .collect();
    from_lines(&mut options, lines.iter().map(String::as_str), out)
}

/// Fold `path` (`-`: standard input): a perf.data or trace.dat decoded, else every
/// line; errors name the file (and line).
fn fold_file(folder: &mut Folder, path: &Path, no_symbolize: bool) -> Result<(), String> {
    let stdin = path == Path::new("-");
    let (name, input): (String, Box<dyn Read>) = if stdin {
        ("standard input".into(), Box::new(io::stdin().lock()))
    } else {
        let file = File::open(path).map_err(|e| format!("cannot open {}: {e}", path.display()))?;
        (path.display().to_string(), Box::new(file))
    };
    let mut input = BufReader::with_capacity(1 << 20, input);
    let start = input
        .fill_buf()
        .map_err(|e| format!("reading {name}: {e}"))?;
    if let Some(format) = recorded_format(start) {
        drop(input);
        return fold_recorded(
            folder,
            (!stdin).then_some(path),
            &name,
            format,
            no_symbolize,
        );
    }
    let mut line = Vec::new();
    let mut number = 0u64;
    loop {
        line.clear();
        let n = input
            .read_until(b'\n', &mut line)
            .map_err(|e| format!("reading {name}: {e}"))?;
        if n == 0 {
            return Ok(());
        }
        number += 1;
        folder
            .add_line(&line)
            .map_err(|e| format!("{name}, line {number}: {e}"))?;
    }
}

/// Fold a perf.data or trace.dat (`None`: on standard input, which must be a file: its
/// first bytes were read to tell its format, and a pipe cannot give them back). Decoding's
/// notes go to standard error as `decode` says them (no summary); a file with errors is
/// not drawn (a graph of part of it would look whole), a truncated one is, and says so.
fn fold_recorded(
    folder: &mut Folder,
    path: Option<&Path>,
    name: &str,
    format: &str,
    no_symbolize: bool,
) -> Result<(), String> {
    if path.is_none() && !stdin_is_a_file() {
        return Err(format!(
            "standard input is a piped {format}: name the file (`uevrec flamegraph FILE`), \
             or decode the stream first (`… | uevrec decode | uevrec flamegraph`)"
        ));
    }
    let threads = crate::recorder::default_threads();
    let started = Instant::now();
    let mut outcome = folder
        .add_recorded(path, !no_symbolize, threads)
        .map_err(|e| format!("{name}: {e}"))?;
    // A graph has no times: decode's note on null `time` keys would say nothing here.
    outcome.stats.time_unknown = 0;
    if super::decode::report(name, &outcome, true, started) == EXIT_ERROR {
        return Err(format!(
            "{name}: not drawn: decoding it met the errors above (`uevrec decode {name} | \
             uevrec flamegraph` draws the records it could decode)"
        ));
    }
    Ok(())
}

/// Whether standard input is a regular file (`< FILE`), which `decode` maps whole.
fn stdin_is_a_file() -> bool {
    io::stdin()
        .as_fd()
        .try_clone_to_owned()
        .map(File::from)
        .and_then(|f| f.metadata())
        .is_ok_and(|m| m.is_file())
}
