//! A perf.data → JSON lines decoder built on the `tracepoint_decode` crate, the reference
//! decoder `scripts/bench-decode.sh` measures `uevrec decode` against (not part of uevrec).
//!
//! `cargo run --release --example decode_td -- perf.data > out.jsonl`
//!
//! What is whose:
//! - `tracepoint_decode` 0.5 (the newest release) has no perf.data file reader (its C++
//!   sibling has one), so the file is read exactly as `uevrec decode` reads it: mapped
//!   (`uevrec::offline::decode::mapped::{MappedInput, MapWindow}`: read in place, the pages behind the
//!   reader let go), header, attrs, features and tracing data, records framed, laid out
//!   and put in time order (`FINISHED_ROUND` windows, the same [`Orderer`] and bound,
//!   records held as offsets into the mapping) by `uevrec_parsers::perf_data`. The two
//!   differ only in what happens per event.
//! - Everything per event is `tracepoint_decode`'s, used as its docs describe: each
//!   event's format text parsed by `PerfEventFormat::parse`, a `PerfEventDesc` and a
//!   `PerfSessionInfo` (byte order, `HEADER_CLOCK_DATA`), a `PerfSampleEventInfo` per
//!   sample, each field's value from `PerfFieldFormat::get_field_value` written by
//!   `PerfItemValue::write_json_to`, and the time, cpu, pid, tid and names by
//!   `json_meta_display`, with `PerfConvertOptions::Default` less `Space` (compact, as
//!   uevrec's lines) and less `IntHexAsString` (integers as numbers, as uevrec writes them).
//!
//! One line per sample of a tracepoint whose format the file has:
//! `{"n":"sched:sched_switch","prev_comm":"perl",…,"meta":{"time":"…","cpu":1,…}}`.
//! Lines are written 256 KiB at a time, as `uevrec decode` does.

use std::fmt::Write as _;
use std::fs::File;
use std::io::Write as _;
use std::process::ExitCode;
use std::sync::Arc;

use tracepoint_decode::{
    PerfByteReader, PerfConvertOptions, PerfEventAttr, PerfEventAttrSampleType, PerfEventDesc,
    PerfEventFormat, PerfSampleEventInfo, PerfSessionInfo,
};
use uevrec::offline::decode::mapped::{MapWindow, MappedInput};
use uevrec_parsers::perf_data::order::{Drain, Orderer};
use uevrec_parsers::perf_data::records::kind;
use uevrec_parsers::perf_data::{Item, PerfData};
use uevrec_parsers::perf_sample::PERF_RECORD_SAMPLE;
use uevrec_parsers::to_lines::{DEFAULT_ORDER_BYTES, FLUSH_BYTES};

/// The per-sample state: the file, one `PerfEventDesc` per attr, the session, the output.
struct Writer {
    data: PerfData,
    descs: Vec<Option<PerfEventDesc>>,
    session: PerfSessionInfo,
    options: PerfConvertOptions,
    line: String,
    out: std::io::StdoutLock<'static>,
}

impl Writer {
    /// (Re)build the descriptions once attrs or the tracing data are known.
    fn refresh(&mut self) {
        let long_is_64 = self.data.tracing_data().is_none_or(|t| t.long_size != 4);
        self.descs = (0..self.data.events().len())
            .map(|event| {
                let parsed = self.data.format(event)?;
                let text = self
                    .data
                    .tracing_data()?
                    .events
                    .iter()
                    .find(|t| t.at == parsed.at)?;
                let format = PerfEventFormat::parse(long_is_64, &text.system, &text.text)?;
                let ev = &self.data.events()[event];
                let attr = PerfEventAttr {
                    config: ev.attr.config,
                    sample_type: PerfEventAttrSampleType(ev.attr.sample_type),
                    ..PerfEventAttr::default()
                };
                let name = self.data.event_name(event);
                let ids = ev.ids.clone().into_boxed_slice();
                Some(PerfEventDesc::new(attr, name, Some(&Arc::new(format)), ids))
            })
            .collect();
        let clock = self.data.clock_data();
        if let Some(c) = clock {
            self.session
                .set_clock_data(c.clockid, c.wall_ns, c.clockid_ns);
        }
    }

    /// One sample's line; false when standard output failed.
    fn sample(&mut self, event: usize, offset: u64, bytes: &[u8]) -> bool {
        let Ok(Item::Sample { sample, .. }) = self.data.sample(event, bytes, offset) else {
            return true;
        };
        let Some(Some(desc)) = self.descs.get(event) else {
            return true;
        };
        let Some(format) = desc.format() else {
            return true;
        };
        let mut info = PerfSampleEventInfo::new(bytes, &self.session, desc);
        info.time = sample.time.unwrap_or(0);
        info.cpu = sample.cpu.unwrap_or(0);
        info.pid = sample.pid.unwrap_or(0);
        info.tid = sample.tid.unwrap_or(0);
        if let Some(raw) = sample.raw {
            // The raw data's place in the record (`raw` is a slice of `bytes`).
            let start = raw.as_ptr() as usize - bytes.as_ptr() as usize;
            let (Ok(start), Ok(end)) = (u16::try_from(start), u16::try_from(start + raw.len()))
            else {
                return true;
            };
            info.raw_range = start..end;
        }
        let line = &mut self.line;
        let _ = write!(line, "{{\"n\":\"{}\"", info.json_name_display());
        for field in &format.fields()[format.common_field_count()..] {
            let _ = write!(line, ",\"{}\":", field.name());
            let _ = field
                .get_field_value(&info)
                .write_json_to(line, self.options);
        }
        let mut meta = info.json_meta_display();
        meta.convert_options(self.options);
        let _ = writeln!(line, ",\"meta\":{{{meta}}}}}");
        if self.line.len() >= FLUSH_BYTES {
            return self.flush();
        }
        true
    }

    fn flush(&mut self) -> bool {
        let ok = self.out.write_all(self.line.as_bytes()).is_ok();
        self.line.clear();
        ok
    }
}

fn main() -> ExitCode {
    let Some(path) = std::env::args_os().nth(1) else {
        eprintln!("usage: decode_td PERF.DATA > OUT.jsonl");
        return ExitCode::FAILURE;
    };
    match run(&path) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("decode_td: {}: {e}", path.to_string_lossy());
            ExitCode::FAILURE
        }
    }
}

fn run(path: &std::ffi::OsStr) -> Result<(), String> {
    let file = File::open(path).map_err(|e| e.to_string())?;
    let map = MappedInput::open(&file)?;
    let bytes = map.bytes();
    let (data, records) = PerfData::open(bytes).map_err(|e| e.to_string())?;
    let session = PerfSessionInfo::new(PerfByteReader::new(data.endian.is_big()));
    let mut w = Writer {
        data,
        descs: Vec::new(),
        session,
        options: PerfConvertOptions::Default
            .and_not(PerfConvertOptions::Space)
            .and_not(PerfConvertOptions::IntHexAsString),
        line: String::with_capacity(FLUSH_BYTES + 64 * 1024),
        out: std::io::stdout().lock(),
    };
    w.refresh();
    let mut orderer = Orderer::new(DEFAULT_ORDER_BYTES);
    let mut behind = MapWindow::default();
    let emit = |w: &mut Writer, o: &mut Orderer, how| {
        let done = o.drain(how, bytes, &mut |event, offset, rec| {
            w.sample(event as usize, offset, rec)
        });
        if done {
            Err("writing: standard output failed")
        } else {
            Ok(())
        }
    };
    for rec in records {
        let rec = rec.map_err(|e| e.to_string())?;
        match rec.header.kind {
            PERF_RECORD_SAMPLE => {
                let Some(event) = w.data.sample_event(rec.bytes) else {
                    continue;
                };
                let Some(time) = w.data.sample_time(event, rec.bytes) else {
                    continue;
                };
                let tag = u32::try_from(event).unwrap_or(u32::MAX);
                let (Ok(start), Ok(len)) =
                    (usize::try_from(rec.offset), u32::try_from(rec.bytes.len()))
                else {
                    continue;
                };
                orderer.push_external(time, tag, start, len);
                if orderer.over_bound() {
                    emit(&mut w, &mut orderer, Drain::Half)?;
                }
            }
            kind::FINISHED_ROUND => emit(&mut w, &mut orderer, Drain::Round)?,
            _ => {
                if let Ok(Item::NewEvent | Item::TracingData | Item::Feature(_)) =
                    w.data.record(&rec)
                {
                    w.refresh();
                }
            }
        }
        if let Some(at) = behind.due(rec.offset) {
            map.release_before(orderer.release_point(at, DEFAULT_ORDER_BYTES, bytes));
        }
    }
    emit(&mut w, &mut orderer, Drain::All)?;
    if w.flush() {
        Ok(())
    } else {
        Err("writing: standard output failed".into())
    }
}
