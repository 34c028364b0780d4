//! `record --flight SIZE`: the flight recorder's flags (crate::outputs::flight) → [`FlightOptions`].

use clap::Args;

use super::values;
use crate::capture::selector::Selector;
use crate::outputs::flight::FlightOptions;

/// The flight recorder's options of `uevrec record` (docs/flight-recorder.md).
#[derive(Debug, Args)]
pub struct FlightArgs {
    /// Flight recorder: keep the newest SIZE of records in memory only (e.g. 64M; SIZE
    /// counts each record's raw trace entry plus 32 bytes, not JSON), and write them to a
    /// new file FILE.TIME (-o FILE; TIME the UTC time) on SIGUSR1, on a --trigger record, and with
    /// --flight-on-exit at the end. A dump empties the memory.
    #[arg(long, value_name = "SIZE", requires = "output",
          conflicts_with_all = ["raw", "rotate_size"], value_parser = values::parse_positive_size)]
    pub flight: Option<u64>,
    /// With --flight: each record of these events (SYSTEM:EVENT with globs, repeatable)
    /// is recorded and then dumps the memory (it is the dump's last record).
    #[arg(long, value_name = "SELECTOR", requires = "flight")]
    pub trigger: Vec<Selector>,
    /// Kernel filter of the trigger events (ftrace syntax, e.g. 'pid == 42'), instead
    /// of --filter, which applies to the other events only.
    #[arg(long, value_name = "EXPR", requires = "trigger")]
    pub trigger_filter: Option<String>,
    /// With --flight: also dump when the recording ends (SIGINT, --duration, --count).
    #[arg(long, requires = "flight")]
    pub flight_on_exit: bool,
}

impl FlightArgs {
    /// The flight recorder's options for `--flight size`; `output` is `-o`'s file.
    pub fn options(
        &self,
        size: u64,
        output: Option<&std::path::Path>,
        file_mode: u32,
        quiet: bool,
    ) -> Result<FlightOptions, String> {
        let output = output
            .ok_or("--flight needs -o FILE (the dumps are FILE.<time>), not standard output")?;
        let dir = match output.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => std::path::Path::new("."),
        };
        if !dir.is_dir() {
            return Err(format!(
                "--flight: the directory of -o {} does not exist (the dumps are created there)",
                output.display()
            ));
        }
        let size = usize::try_from(size)
            .map_err(|_| format!("--flight {size}: too large for this machine"))?;
        Ok(FlightOptions {
            size,
            triggers: self.trigger.clone(),
            on_exit: self.flight_on_exit,
            output: output.to_path_buf(),
            file_mode,
            format: Default::default(),
            line_options: Default::default(),
            quiet,
            session: None,
            context: false,
            stacks: None,
            filter: None,
        })
    }
}
