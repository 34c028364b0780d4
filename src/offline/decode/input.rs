//! Where the input comes from: a named file (mapped), a regular file on standard input
//! (the same), or a pipe (a pipe-mode perf.data read in pieces; a file-mode perf.data or
//! a trace.dat read whole first).

use std::fs::File;
use std::io::{IsTerminal, Read};
use std::os::fd::AsFd;
use std::path::Path;

use uevrec_parsers::ContextTracker;
use uevrec_parsers::perf_data::header::parse_magic;
use uevrec_parsers::to_lines::DecodeOptions;
use uevrec_parsers::to_lines::perf_data::StreamDecoder;

use super::mapped::{MappedInput, PAGE_AHEAD, PAGE_LAG};
use super::parallel::{Par, par_lines, stack_options, staged};
use super::perf_data::{decode_bytes, pump, stream_outcome};
use super::pick::Pick;
use super::ranges::{NO_PAGES, Pages};
use super::trace_dat::TRACE_DAT_MAGIC;
use super::{Flush, Outcome};
use crate::pipeline::stacks::StackWriter;

pub(crate) fn decode_file(
    path: &Path,
    opts: DecodeOptions,
    pick: &Pick<'_>,
    flush: &mut Flush<'_>,
    par: Option<&Par<'_>>,
) -> Result<Outcome, String> {
    let file = File::open(path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound && crate::offline::recover::has_leftovers(path)
        {
            format!(
                "opening: {e}; a killed `uevrec record --raw {p} --raw-format trace-dat` left \
                 its spools beside it: run `uevrec recover {p}`, then decode it",
                p = path.display()
            )
        } else {
            format!("opening: {e}")
        }
    })?;
    decode_open_file(&file, opts, pick, flush, par)
}

pub(crate) fn decode_open_file(
    file: &File,
    opts: DecodeOptions,
    pick: &Pick<'_>,
    flush: &mut Flush<'_>,
    par: Option<&Par<'_>>,
) -> Result<Outcome, String> {
    let len = file
        .metadata()
        .map_err(|e| format!("reading size: {e}"))?
        .len();
    if len == 0 {
        return decode_bytes(&[], opts, pick, flush, &|_| (), &NO_PAGES, par);
    }
    let map = MappedInput::open(file)?;
    if par.is_none() {
        // The pages ahead mapped in by one call every few MiB, not a fault a page (5 %
        // of one thread's time on a 3 M-sample perf.data: BENCHMARKS.md §34).
        let release = |end: usize| {
            map.populate(end, end.saturating_add(PAGE_AHEAD));
            map.release_before(end);
        };
        map.populate(0, PAGE_AHEAD);
        return decode_bytes(map.bytes(), opts, pick, flush, &release, &NO_PAGES, par);
    }
    // With workers, a thread of its own maps the pages ahead of the reader
    // (`MADV_POPULATE_READ`: the page faults off the decoding thread) and lets them go
    // [`PAGE_LAG`] behind it, after the workers (which read the records from the
    // mapping) are done with them (`MADV_DONTNEED`: its cost off the decoding thread too).
    let (tx, rx) = crossbeam_channel::bounded::<usize>(64);
    let map = &map;
    std::thread::scope(|s| {
        let pager = std::thread::Builder::new()
            .name("uevrec-pages".into())
            .spawn_scoped(s, move || {
                map.populate(0, PAGE_AHEAD);
                for at in rx {
                    map.populate(at, at.saturating_add(PAGE_AHEAD));
                    map.release_before(at.saturating_sub(PAGE_LAG));
                }
            });
        let tx = pager.is_ok().then_some(tx);
        let release = |end: usize| match &tx {
            // Full: the next one says as much.
            Some(tx) => {
                let _ = tx.try_send(end);
            }
            // No thread: as with one thread.
            None => map.release_before(end),
        };
        let pages = Pages {
            forget: &|from, to| map.release_range(from, to),
            populate: &|from, to| map.populate_range(from, to),
        };
        let result = decode_bytes(map.bytes(), opts, pick, flush, &release, &pages, par);
        drop(tx);
        result
    })
}

pub(crate) fn decode_stdin(
    opts: DecodeOptions,
    pick: &Pick<'_>,
    flush: &mut Flush<'_>,
    par: Option<&Par<'_>>,
) -> Result<Outcome, String> {
    let mut stdin = std::io::stdin().lock();
    // `< perf.data`: a regular file on standard input is read like a named one.
    if let Ok(fd) = stdin.as_fd().try_clone_to_owned() {
        let file = File::from(fd);
        if file.metadata().is_ok_and(|m| m.is_file()) {
            return decode_open_file(&file, opts, pick, flush, par);
        }
    }
    if stdin.is_terminal() {
        return Err(
            "standard input is a terminal: give a perf.data file or pipe one in \
                    (perf record -o - … | uevrec decode)"
                .into(),
        );
    }
    let read_err = |e: std::io::Error| format!("reading: {e}");
    // The first 16 bytes tell a pipe-mode stream from a file-mode perf.data or a
    // trace.dat, which need their end first and are read whole.
    let mut head = Vec::with_capacity(16);
    (&mut stdin)
        .take(16)
        .read_to_end(&mut head)
        .map_err(read_err)?;
    let whole = head.len() == 16
        && (head.starts_with(TRACE_DAT_MAGIC) || parse_magic(&head).is_ok_and(|(_, pipe)| !pipe));
    if whole {
        stdin.read_to_end(&mut head).map_err(read_err)?;
        return decode_bytes(&head, opts, pick, flush, &|_| (), &NO_PAGES, par);
    }
    let mut run = |mut dec: StreamDecoder<'_>, flush: &mut Flush<'_>| {
        dec.feed(&head);
        let mut read = |buf: &mut [u8]| stdin.read(buf);
        let stopped = pump(&mut dec, &mut read, flush)?;
        if dec.decoder().is_none() {
            return Err(stopped.map_or_else(|| "no input".into(), |e| e.to_string()));
        }
        Ok(stream_outcome(&dec, stopped, false))
    };
    let dec = StreamDecoder::new(opts, pick.select).with_judge(pick.judge());
    match par {
        Some(par) => {
            // The header's byte order (the tracing data's, in every perf.data seen).
            let endian =
                parse_magic(&head).map_or(uevrec_parsers::Endian::Little, |(endian, _)| endian);
            let lines = par_lines(opts, endian, Some(ContextTracker::new()));
            // Pipe mode: the records are copied out of the stream's buffer.
            staged(par, lines, &[], |sink| run(dec.with_sink(sink), flush))
        }
        None => run(with_namer(dec, opts), flush),
    }
}

/// `dec` naming the stacks of its lines on this thread, when `opts` asks for stacks
/// ([`stack_options`]).
fn with_namer<'s>(dec: StreamDecoder<'s>, opts: DecodeOptions) -> StreamDecoder<'s> {
    match stack_options(opts) {
        Some(o) => dec.with_stacks(Box::new(StackWriter::new(o))),
        None => dec,
    }
}
