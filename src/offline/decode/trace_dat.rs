//! A trace-cmd trace.dat, whole: [`decode_trace_dat`].

use uevrec_parsers::to_lines::DecodeOptions;
use uevrec_parsers::to_lines::trace_dat as lines;

use super::parallel::{Par, par_lines, past, staged};
use super::pick::Pick;
use super::windows::{decode_windows, window_bytes};
use super::{Flush, Outcome};

/// How a cut trace.dat's message ends.
const WHOLE_RECORDS_DECODED: &str = "every whole record before the cut was decoded";

/// The first bytes of a trace-cmd `trace.dat`.
pub(crate) const TRACE_DAT_MAGIC: &[u8] = uevrec_parsers::trace_dat::MAGIC;

/// A whole trace-cmd trace.dat (v6 or v7): [`lines::decode_lines`]; with workers in
/// windows of time, each mapping in what it reads first (`populate(from, to)`).
pub(crate) fn decode_trace_dat(
    bytes: &[u8],
    opts: DecodeOptions,
    pick: &Pick<'_>,
    flush: &mut Flush<'_>,
    populate: &(dyn Fn(usize, usize) + Sync),
    par: Option<&Par<'_>>,
) -> Result<Outcome, String> {
    let file = uevrec_parsers::trace_dat::TraceDat::parse(bytes).map_err(|e| e.to_string())?;
    let d = lines::FileDecoder::new(&file, &opts, pick.select).with_judge(pick.judge());
    // A record and its stack records are read in one pass (windows would cut them
    // apart): staged whole for the workers.
    let ties = d.ties_stacks();
    let (decoded, shared) = match par {
        Some(par) if ties => {
            let context = lines::context_of(&file);
            let par_opts = par_lines(opts, file.endian(), Some(context));
            let decoded = staged(par, par_opts, bytes, |mut sink| {
                lines::decode_with(&d, flush, Some(sink.as_mut()))
            })
            .map_err(|e| e.to_string())?;
            let how = format!(
                "{} formatting threads after one reading (a file with stack records is not cut \
                 into windows of time)",
                par.workers
            );
            (decoded, how)
        }
        Some(par) => {
            let sizes: Vec<u64> = (file.top_buffer().into_iter())
                .flat_map(|b| b.cpus.iter().map(|c| c.size).filter(|&s| s > 0))
                .collect();
            let data: u64 = sizes.iter().sum();
            let window = par
                .range_bytes
                .unwrap_or_else(|| window_bytes(sizes.len()))
                .max(1);
            let count = usize::try_from(data.div_ceil(window as u64))
                .unwrap_or(usize::MAX)
                .max(par.workers);
            let windows = match pick.in_order() {
                Some(why) => Err(why.to_string()),
                None => lines::plan_windows(&d, count),
            };
            match windows {
                Ok(windows) => {
                    let done = decode_windows(&d, windows, par, populate, |skip| {
                        // Judged again from the first record: counted afresh.
                        if let Some(f) = pick.filter {
                            f.restart();
                        }
                        let mut rest = past(skip, flush);
                        lines::decode_with(&d, &mut rest, None).map_err(|e| e.to_string())
                    })?;
                    let mut how = format!(
                        "in {} windows of time by {} threads",
                        done.windows, par.workers
                    );
                    if let Some(why) = done.again {
                        how.push_str(&format!(
                            ", then decoded again whole by one thread from where the windows \
                             stopped ({why})"
                        ));
                    }
                    (done.decoded, how)
                }
                Err(why) => {
                    let endian = file.endian();
                    let context = lines::context_of(&file);
                    let par_opts = par_lines(opts, endian, Some(context));
                    let decoded = staged(par, par_opts, bytes, |mut sink| {
                        lines::decode_with(&d, flush, Some(sink.as_mut()))
                    })
                    .map_err(|e| e.to_string())?;
                    let how = format!(
                        "{} formatting threads after one reading, not in windows of time: {why}",
                        par.workers
                    );
                    (decoded, how)
                }
            }
        }
        None => {
            let decoded = match super::parallel::stack_options(opts).filter(|_| ties) {
                Some(o) => {
                    let mut namer = crate::pipeline::stacks::StackWriter::new(o);
                    // The file's own kallsyms names its kernel frames: blazesym reads a
                    // kallsyms file by path, so the section goes to a temporary file
                    // (removed when `_kallsyms` drops, after the decoding).
                    let _kallsyms = kallsyms_file(file.kallsyms())?;
                    if let Some(f) = &_kallsyms {
                        namer = namer.with_kallsyms(f.path());
                    }
                    lines::decode_named(&d, flush, Box::new(namer))
                }
                None => lines::decode_with(&d, flush, None),
            };
            (decoded.map_err(|e| e.to_string())?, String::new())
        }
    };
    let shared = par.map(|_| shared);
    let clock = file.trace_clock().unwrap_or("local");
    // Every CPU's cut in-band; one line on stderr.
    let truncated = decoded
        .truncation_details()
        .map(|d| format!("{d}; {WHOLE_RECORDS_DECODED}"));
    let truncated_summary = decoded
        .truncation_summary()
        .map(|s| format!("{s}; {WHOLE_RECORDS_DECODED}"));
    Ok(Outcome {
        stats: decoded.stats,
        stopped: None,
        problems: decoded.problems,
        unlisted: decoded.unlisted,
        time_note: Some(format!(
            "a trace.dat holds raw `{clock}` trace-clock stamps and no wall-clock anchor (records are in time order)"
        )),
        clock_data: false,
        truncated,
        truncated_summary,
        shared,
    })
}

/// A temporary file holding `text` (a trace.dat's kallsyms section), or none when it is
/// empty.
fn kallsyms_file(text: &[u8]) -> Result<Option<tempfile::NamedTempFile>, String> {
    if text.is_empty() {
        return Ok(None);
    }
    let mut f = tempfile::Builder::new()
        .prefix("uevrec-kallsyms-")
        .tempfile()
        .map_err(|e| format!("writing the file's kallsyms to a temporary file: {e}"))?;
    std::io::Write::write_all(&mut f, text)
        .map_err(|e| format!("writing the file's kallsyms to a temporary file: {e}"))?;
    Ok(Some(f))
}
