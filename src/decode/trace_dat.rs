//! A trace-cmd trace.dat, whole: [`decode_trace_dat`].

use uevrec_parsers::to_lines::DecodeOptions;
use uevrec_parsers::to_lines::trace_dat as lines;

use super::parallel::{Par, par_lines, staged};
use super::{Flush, Outcome};

/// The first bytes of a trace-cmd `trace.dat`.
pub(crate) const TRACE_DAT_MAGIC: &[u8] = uevrec_parsers::trace_dat::MAGIC;

/// A whole trace-cmd trace.dat (v6 or v7): [`lines::decode_lines`].
pub(crate) fn decode_trace_dat(
    bytes: &[u8],
    opts: DecodeOptions,
    select: &dyn Fn(&str, &str) -> bool,
    flush: &mut Flush<'_>,
    par: Option<&Par<'_>>,
) -> Result<Outcome, String> {
    let file = uevrec_parsers::trace_dat::TraceDat::parse(bytes).map_err(|e| e.to_string())?;
    let shared = par.map(|par| {
        format!(
            "{} formatting threads after one reading (a trace.dat is not cut into ranges)",
            par.workers
        )
    });
    let decoded = match par {
        Some(par) => {
            let endian = file.endian();
            let context = lines::context_of(&file);
            let lines = par_lines(opts, endian, Some(context));
            staged(par, lines, bytes, |mut sink| {
                lines::decode_into(&file, &opts, select, flush, Some(sink.as_mut()))
            })
        }
        None => lines::decode_lines(&file, &opts, select, flush),
    }
    .map_err(|e| e.to_string())?;
    let clock = file.trace_clock().unwrap_or("local");
    Ok(Outcome {
        stats: decoded.stats,
        stopped: None,
        problems: decoded.problems,
        time_note: Some(format!(
            "a trace.dat holds raw `{clock}` trace-clock stamps and no wall-clock anchor (records are in time order)"
        )),
        clock_data: false,
        truncated: (!decoded.truncated.is_empty()).then(|| {
            format!(
                "{}; every whole record before the cut was decoded",
                decoded.truncated.join("; ")
            )
        }),
        shared,
    })
}
