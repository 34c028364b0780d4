//! EventHeader events to filter on (`uevrec record --where`): one event name at three
//! levels, with a number, a string and a nested struct, all set from a sequence number.
//!
//! ```text
//! eh_filter [--name PROVIDER] [--count N] [START OPTIONS]
//! ```
//! Writes N events `Req` (seq 0..N) through `eventheader_dynamic`, event `seq` at level
//! `LEVELS[seq % 3]` (error, warning, informational: tracepoints `<PROVIDER>_L2K1`,
//! `_L3K1`, `_L4K1`), with the fields `seq` (u32), `color` (`COLORS[seq % 5]`) and the
//! struct `http` { `status` (u16, `STATUSES[seq % 4]`), `path` (`/item/<seq>`) }.
//! Report lines as the other EventHeader producers (`{"registered":..}`, one line per
//! event with the keys and `fields` uevrec must print, `{"done":..}`).

use clap::Parser;
use eventheader_dynamic::{EventBuilder, FieldFormat, Level, Provider};
use serde_json::json;
use uevrec_samples::eh::{Written, tracepoint_name};
use uevrec_samples::{StartArgs, fail, report};

#[derive(Parser)]
#[command(
    about = "Write EventHeader events with a level, a string and a nested struct to filter on"
)]
struct Args {
    /// Provider name.
    #[arg(long, default_value = "UevrecEhFilter")]
    name: String,
    /// Events to write.
    #[arg(long, default_value_t = 30)]
    count: u32,
    #[command(flatten)]
    start: StartArgs,
}

/// The level of event `seq` is `LEVELS[seq % 3]`.
const LEVELS: [Level; 3] = [Level::Error, Level::Warning, Level::Informational];
/// The `color` of event `seq` is `COLORS[seq % 5]`.
const COLORS: [&str; 5] = ["red", "green", "blue", "amber", "violet"];
/// The `http.status` of event `seq` is `STATUSES[seq % 4]`.
const STATUSES: [u16; 4] = [200, 200, 404, 500];

fn main() {
    let args = Args::parse();
    let mut provider = Provider::new(&args.name, &Provider::new_options());
    let sets: Vec<_> = LEVELS
        .iter()
        .map(|&level| provider.register_set(level, 1))
        .collect();
    for (set, level) in sets.iter().zip(LEVELS) {
        if set.errno() != 0 {
            fail(format!(
                "registering level {}: errno {} (needs user_events and tracefs)",
                level.as_int(),
                set.errno()
            ));
        }
        report(&json!({"registered": tracepoint_name(&args.name, level.as_int(), 1, None)}));
    }
    args.start
        .wait_for("eh_filter", || sets.iter().all(|s| s.enabled()));

    let mut eb = EventBuilder::new();
    for seq in 0..args.count {
        let i = seq as usize;
        let (level, color, status) = (LEVELS[i % 3], COLORS[i % 5], STATUSES[i % 4]);
        let path = format!("/item/{seq}");
        eb.reset("Req", 0)
            .add_value("seq", seq, FieldFormat::Default, 0)
            .add_str("color", color, FieldFormat::Default, 0)
            .add_struct("http", 2, 0)
            .add_value("status", status, FieldFormat::Default, 0)
            .add_str("path", &path, FieldFormat::Default, 0);
        let rc = eb.write(&sets[i % 3], None, None);
        Written::new(&args.name, "Req", level.as_int(), 1)
            .field("seq", json!(seq))
            .field("color", json!(color))
            .field("http", json!({"status": status, "path": path}))
            .report_written(i64::from(rc), u64::from(seq), "EventBuilder::write");
    }
    provider.unregister();
    report(&json!({"done": "eh_filter", "written": args.count}));
}
