//! The output options `record` and `decode` share (`-o`, rotation, file mode, links),
//! and `--format` (record, tail, decode).

use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};
use uevrec_parsers::OutputFormat;

use super::values;
use crate::outputs::sink::file::{FileOptions, RotatingFile, Rotation};
use crate::outputs::sink::stdout::StdoutSink;
use crate::outputs::sink::{Sink, SinkError};

/// Where the lines go: `record`'s output options.
#[derive(Debug, Args)]
pub struct OutputArgs {
    /// Output file; standard output if absent or "-". `record` appends to an existing
    /// file (a log file, never truncated: a restarted service goes on where it stopped);
    /// `decode` replaces it, as perf's -o does, unless --append.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Rotate the output file before it would grow past SIZE (e.g. 100M); needs -o.
    #[arg(long, value_name = "SIZE", requires = "output", value_parser = values::parse_positive_size)]
    pub rotate_size: Option<u64>,
    /// Rotated files kept: FILE.1 (newest) … FILE.N; the oldest is removed. 0 keeps none.
    #[arg(long, value_name = "N", default_value_t = 5, requires = "rotate_size")]
    pub rotate_keep: u32,
    /// Permission bits (octal) for newly created output files.
    #[arg(long, value_name = "MODE", default_value = "640", value_parser = values::parse_mode)]
    pub file_mode: u32,
    /// Write through a symbolic link at the output path (refused by default).
    #[arg(long)]
    pub follow_symlinks: bool,
}

impl OutputArgs {
    /// The output file, when there is one (`-o FILE`, not `-o -`).
    pub fn file(&self) -> Option<&Path> {
        self.output.as_deref().filter(|p| *p != Path::new("-"))
    }

    /// The sink: the rotating file of `-o` (emptied first when `replace`, else appended
    /// to; each new file starting with the stack lines written so far when
    /// `stack_lines`: `--stack-ids`), else standard output.
    pub fn open(
        &self,
        replace: bool,
        stack_lines: bool,
    ) -> Result<Box<dyn Sink + Send>, SinkError> {
        match self.file() {
            Some(path) => {
                let opts = FileOptions {
                    mode: self.file_mode,
                    follow_symlinks: self.follow_symlinks,
                    rotation: self.rotate_size.map(|max_bytes| Rotation {
                        max_bytes,
                        keep: self.rotate_keep,
                    }),
                    replace,
                    stack_lines,
                };
                Ok(Box::new(RotatingFile::open(path, opts)?))
            }
            None => Ok(Box::new(StdoutSink::new(false))),
        }
    }
}

/// `--format`: what the lines are.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// uevrec's JSON lines, one per record (docs/json-lines.md).
    #[default]
    Json,
    /// OTLP/JSON export requests, one per line, records batched: OpenTelemetry logs,
    /// spans and metrics for the Collector's otlpjsonfile receiver (docs/otlp.md).
    Otlp,
    /// One readable line per record, as perf script and journalctl print them: time,
    /// `comm[pid]`, cpu, event, `field=value …`; strings quoted and escaped (a payload
    /// cannot forge a line), colors on a terminal unless NO_COLOR is set.
    Text,
}

impl Format {
    /// The writer's format; `to_terminal`: the lines go to a terminal (text in colors
    /// there, unless [`colors_off`]).
    pub fn output_format(self, to_terminal: bool) -> OutputFormat {
        match self {
            Format::Json => OutputFormat::JsonLines,
            Format::Otlp => OutputFormat::Otlp,
            Format::Text => OutputFormat::Text {
                color: to_terminal && !colors_off(),
            },
        }
    }
}

/// Whether the user turned colors off: `NO_COLOR` set and not empty (no-color.org), or
/// `TERM=dumb`.
pub fn colors_off() -> bool {
    std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty())
        || std::env::var_os("TERM").is_some_and(|t| t == "dumb")
}

/// Whether standard output is a terminal.
pub fn stdout_is_terminal() -> bool {
    std::io::IsTerminal::is_terminal(&std::io::stdout())
}
