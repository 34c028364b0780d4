//! One ftrace ring-buffer page on its own (what `trace_pipe_raw` hands out) →
//! `PageLayout::parse_page` and `PageReader::new_cut`:
//! - never panics, never loops: at most one item per 4 bytes of data, then the end;
//! - a missed-events marker comes first or not at all; every record lies inside the
//!   page's committed data (after the header, before `data_offset + data_len`);
//! - the same page cut anywhere (a file that ends inside it) reads exactly the records of
//!   the whole page that end before the cut, with the same times, and then says it was
//!   cut (`is_cut`), never a corrupt page.
//!
//! - every record offered to a stack tie (`ftrace_page::stacks`, as `record --backend
//!   ftrace -g` reads: ids 4 and 13 are `kernel_stack` and `user_stack`, laid out as on
//!   x86_64, or with 4-byte words by bit 2 of byte 0): tied or counted, never a panic, and
//!   each chain whole words, `max_frames` (byte 1 modulo 16; 0: all) frames at most.
//!
//! Input layout: byte 0 → layout (bit 0: big-endian; bit 1: a 32-bit kernel's 4-byte
//! `commit`), bytes 1–2 → where to cut (LE u16, modulo the page size), then the page
//! (zero-padded or cut to a whole page).
#![no_main]

use libfuzzer_sys::fuzz_target;
use uevrec_parsers::Endian;
use uevrec_parsers::callchain::Callchain;
use uevrec_parsers::ftrace_page::stacks::{
    CHAIN_ENDIAN, Offered, StackEvents, StackFields, StackTie,
};
use uevrec_parsers::ftrace_page::{Item, PageLayout, PageReader};

/// (time, offset, bytes) of each record read before the end or the first error, and
/// whether that error was the cut.
type Read = (Vec<(u64, usize, Vec<u8>)>, Option<bool>);

fn read(layout: &PageLayout, page: &[u8], mut reader: PageReader) -> Read {
    let mut records = Vec::new();
    let data_end = layout.data_offset() + reader.header().data_len;
    let mut missed_seen = false;
    for step in 0.. {
        assert!(step <= page.len() / 4 + 2, "the page reader loops");
        match reader.next_item(layout, page) {
            None => return (records, None),
            Some(Ok(Item::Missed { .. })) => {
                assert!(
                    step == 0 && !missed_seen,
                    "a missed marker after the first item"
                );
                missed_seen = true;
            }
            Some(Ok(Item::Record { time, raw, offset })) => {
                assert!(
                    offset >= layout.data_offset(),
                    "a record in the page header"
                );
                assert!(offset + raw.len() <= data_end, "a record past the data");
                records.push((time, offset, raw.to_vec()));
            }
            Some(Err(e)) => {
                assert!(!e.to_string().is_empty());
                return (records, Some(reader.is_cut()));
            }
        }
    }
    unreachable!()
}

fuzz_target!(|input: &[u8]| {
    let [flags, cut_lo, cut_hi, bytes @ ..] = input else {
        return;
    };
    let endian = Endian::from_big(flags & 1 == 1);
    let layout = PageLayout::standard(if flags & 2 == 2 { 4 } else { 8 }, endian);
    let mut page = bytes.to_vec();
    page.resize(layout.page_size(), 0);
    // The iterator over a borrowed page and the reader agree.
    let items: Vec<_> = layout.parse_page(&page).take(page.len()).collect();
    let Ok(reader) = PageReader::new(&layout, &page) else {
        assert!(matches!(items.as_slice(), [Err(_)]), "{items:?}");
        return;
    };
    let (whole, whole_error) = read(&layout, &page, reader);
    assert_ne!(whole_error, Some(true), "a whole page is never cut");
    let records = items
        .iter()
        .filter(|i| matches!(i, Ok(Item::Record { .. })))
        .count();
    assert_eq!(records, whole.len());
    tie_stacks(&whole, endian, flags & 4 == 4, usize::from(*cut_lo % 16));

    let cut = usize::from(u16::from_le_bytes([*cut_lo, *cut_hi])) % layout.page_size();
    let Ok(reader) = PageReader::new_cut(&layout, &page[..cut]) else {
        assert!(
            cut < layout.data_offset(),
            "a cut page with its whole header refused"
        );
        return;
    };
    let (got, _) = read(&layout, &page[..cut], reader);
    // Up to a corrupt event both readings are the same walk; the cut one stops at the
    // first event that runs past the cut.
    let want: Vec<_> = (whole.iter())
        .filter(|(_, offset, raw)| offset + raw.len() <= cut)
        .cloned()
        .collect();
    assert_eq!(got, want, "the cut page's records are not the whole page's");
});

/// The records offered to a stack tie, one after the other ([`StackTie::offer`]).
fn tie_stacks(records: &[(u64, usize, Vec<u8>)], endian: Endian, narrow: bool, max: usize) {
    let word = if narrow { 4 } else { 8 };
    let fields = |id| StackFields {
        id,
        head: 8,
        caller: if narrow { 12 } else { 16 },
        word,
    };
    let events = StackEvents {
        kernel: Some(fields(4)),
        user: Some(fields(13)),
    };
    let mut tie = StackTie::new(true, true, max);
    let check = |tie: &mut StackTie| {
        if let Some(held) = tie.take() {
            assert_eq!(held.chain.len() % 8, 0);
            let frames = Callchain::new(held.chain, CHAIN_ENDIAN).frames().count();
            assert!(max == 0 || frames <= max, "{frames} frames past {max}");
        }
    };
    for (time, _, raw) in records {
        if let Offered::Record = tie.offer(&events, raw, endian) {
            check(&mut tie);
            tie.hold(raw, *time, 0, None);
        }
    }
    check(&mut tie);
    assert!(tie.untied.total() <= records.len() as u64);
}
