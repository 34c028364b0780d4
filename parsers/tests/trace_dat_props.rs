//! Properties of the trace.dat reader and the page parser on hostile input:
//! - arbitrary bytes (after a valid magic and version, to get past the first check),
//!   truncations and byte flips of the real files never panic, parse or not;
//! - every error says where: a file offset inside the input (or the offset of the
//!   compressed section/chunk it is in, with the offset in the decompressed bytes);
//! - a truncated file reads the same records as the whole one up to where the cut
//!   starts to matter (the records it returns are a prefix, per CPU, of the full ones);
//! - arbitrary pages never panic the page parser, and its records lie inside the page's
//!   committed data.

use std::collections::HashMap;
use std::path::PathBuf;

use proptest::prelude::*;
use uevrec_parsers::Endian;
use uevrec_parsers::ftrace_page::{Item as PageItem, PageLayout};
use uevrec_parsers::trace_dat::{Item, TraceDat, TraceDatError};

fn real(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/trace-dat")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn files() -> Vec<Vec<u8>> {
    ["v6.dat", "v7-none.dat", "v7-zstd.dat", "v7-lost.dat"]
        .iter()
        .map(|n| real(n))
        .collect()
}

fn check_error(e: &TraceDatError, len: usize) {
    assert!(
        e.inner.is_some() || e.offset <= len as u64,
        "offset {} past the end {len}: {e}",
        e.offset
    );
    assert!(e.to_string().starts_with("trace.dat byte "), "{e}");
}

/// Per CPU, the (time, raw bytes) of the records read.
type PerCpu = HashMap<u32, Vec<(u64, Vec<u8>)>>;

/// Parse and walk everything; `None` when the headers did not parse.
fn walk(data: &[u8]) -> Option<PerCpu> {
    let file = match TraceDat::parse(data) {
        Ok(f) => f,
        Err(e) => {
            check_error(&e, data.len());
            return None;
        }
    };
    let mut records = match file.records() {
        Ok(r) => r,
        Err(e) => {
            check_error(&e, data.len());
            return None;
        }
    };
    let mut out = PerCpu::new();
    for _ in 0..200_000 {
        match records.next_item() {
            Ok(None) => return Some(out),
            Ok(Some(Item::Record(r))) => {
                if let Some(i) = r.event {
                    assert!(i < file.events().len());
                }
                out.entry(r.cpu).or_default().push((r.time, r.raw.to_vec()));
            }
            Ok(Some(Item::Lost { .. })) => {}
            Err(e) => check_error(&e, data.len()),
        }
    }
    panic!("the walk did not end");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(
        version in prop::sample::select(vec![&b"6\0"[..], &b"7\0"[..]]),
        endian in 0u8..3,
        long in prop::sample::select(vec![4u8, 8, 3]),
        body in prop::collection::vec(any::<u8>(), 0..2048),
    ) {
        let mut data = b"\x17\x08\x44tracing".to_vec();
        data.extend_from_slice(version);
        data.extend([endian, long]);
        data.extend(body);
        walk(&data);
    }

    #[test]
    fn truncations_never_panic_and_keep_a_prefix(file in 0usize..4, cut in any::<prop::sample::Index>()) {
        let data = &files()[file];
        let full = walk(data).expect("the real file parses");
        let cut = cut.index(data.len());
        if let Some(part) = walk(&data[..cut]) {
            for (cpu, records) in part {
                let whole = &full[&cpu];
                prop_assert!(records.len() <= whole.len());
                // Records from pages the cut did not reach are the same; the page the
                // cut is in may end early but what it returns is right.
                prop_assert_eq!(&records[..], &whole[..records.len()]);
            }
        }
    }

    #[test]
    fn byte_flips_never_panic(
        file in 0usize..4,
        flips in prop::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 1..8),
    ) {
        let mut data = files()[file].clone();
        for (at, x) in flips {
            let i = at.index(data.len());
            data[i] ^= x;
        }
        walk(&data);
    }

    #[test]
    fn arbitrary_pages_never_panic(
        page in prop::collection::vec(any::<u8>(), 0..4200),
        big in any::<bool>(),
        long in prop::sample::select(vec![4u8, 8]),
    ) {
        let endian = if big { Endian::Big } else { Endian::Little };
        let layout = PageLayout::standard(long, endian);
        let end = layout.page_header(&page).map(|h| layout.data_offset() + h.data_len);
        let mut n = 0;
        for item in layout.parse_page(&page) {
            n += 1;
            prop_assert!(n <= page.len() + 2, "the page iterator did not end");
            match item {
                Ok(PageItem::Record { raw, offset, .. }) => {
                    let end = *end.as_ref().unwrap();
                    prop_assert!(offset >= layout.data_offset() && offset + raw.len() <= end);
                    prop_assert_eq!(&page[offset..offset + raw.len()], raw);
                }
                Ok(PageItem::Missed { .. }) => prop_assert_eq!(n, 1),
                Err(e) => prop_assert!(e.offset <= page.len().max(layout.data_offset())),
            }
        }
    }
}
