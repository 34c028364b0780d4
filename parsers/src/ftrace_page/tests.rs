use super::*;

/// `events/header_page` of the 6.18 x86_64 host (and of the 6.12 VM).
pub(crate) const HEADER_PAGE_64: &str = "\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n\
\tfield: local_t commit;\toffset:8;\tsize:8;\tsigned:1;\n\
\tfield: int overwrite;\toffset:8;\tsize:1;\tsigned:1;\n\
\tfield: char data;\toffset:16;\tsize:4080;\tsigned:0;\n";

/// A 32-bit kernel's `header_page` (`long` is 4 bytes).
const HEADER_PAGE_32: &str = "\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n\
\tfield: local_t commit;\toffset:8;\tsize:4;\tsigned:1;\n\
\tfield: int overwrite;\toffset:8;\tsize:1;\tsigned:1;\n\
\tfield: char data;\toffset:12;\tsize:4084;\tsigned:0;\n";

/// `events/header_event` of the 6.18 host.
pub(crate) const HEADER_EVENT: &str = "# compressed entry header\n\
\ttype_len    :    5 bits\n\
\ttime_delta  :   27 bits\n\
\tarray       :   32 bits\n\
\n\
\tpadding     : type == 29\n\
\ttime_extend : type == 30\n\
\ttime_stamp : type == 31\n\
\tdata max type_len  == 28\n";

/// Builds one ring-buffer page, the way the kernel writes it.
struct PageBuilder {
    endian: Endian,
    long: usize,
    timestamp: u64,
    data: Vec<u8>,
}

impl PageBuilder {
    fn new(endian: Endian, long: usize, timestamp: u64) -> Self {
        PageBuilder {
            endian,
            long,
            timestamp,
            data: Vec::new(),
        }
    }

    fn uint(&self, v: u64, size: usize) -> Vec<u8> {
        let b = v.to_le_bytes()[..size].to_vec();
        match self.endian {
            Endian::Little => b,
            Endian::Big => b.into_iter().rev().collect(),
        }
    }

    fn word(&mut self, v: u32) {
        let b = self.uint(u64::from(v), 4);
        self.data.extend_from_slice(&b);
    }

    fn head(&mut self, type_len: u32, delta: u32) {
        assert!(delta < 1 << 27);
        let w = match self.endian {
            Endian::Little => type_len | (delta << 5),
            Endian::Big => (type_len << 27) | delta,
        };
        self.word(w);
    }

    /// A record; small ones with `type_len` = words, others (or `force_long`) with
    /// `type_len` 0.
    fn record(&mut self, delta: u32, body: &[u8], force_long: bool) {
        if !force_long && body.len() % 4 == 0 && !body.is_empty() && body.len() <= 112 {
            self.head((body.len() / 4) as u32, delta);
            self.data.extend_from_slice(body);
        } else {
            self.head(0, delta);
            self.word(body.len() as u32 + 4);
            self.data.extend_from_slice(body);
            while self.data.len() % 4 != 0 {
                self.data.push(0);
            }
        }
    }

    fn extend(&mut self, delta: u64) {
        self.head(TYPE_TIME_EXTEND, (delta & ((1 << 27) - 1)) as u32);
        self.word((delta >> 27) as u32);
    }

    fn absolute(&mut self, ts: u64) {
        self.head(TYPE_TIME_STAMP, (ts & ((1 << 27) - 1)) as u32);
        self.word(((ts >> 27) & 0xffff_ffff) as u32);
    }

    /// A discarded event of `len` bytes after its header.
    fn discarded(&mut self, delta: u32, len: u32) {
        self.head(TYPE_PADDING, delta);
        self.word(len);
        self.data
            .extend(std::iter::repeat_n(0xee, len as usize - 4));
    }

    fn page(&self, missed: Option<Option<u64>>) -> Vec<u8> {
        let data_offset = 8 + self.long;
        let mut commit = self.data.len() as u64;
        if let Some(count) = missed {
            commit |= MISSED_EVENTS;
            if count.is_some() {
                commit |= MISSED_STORED;
            }
        }
        let mut page = self.uint(self.timestamp, 8);
        page.extend(self.uint(commit, self.long));
        page.extend_from_slice(&self.data);
        if let Some(Some(n)) = missed {
            page.extend(self.uint(n, self.long));
        }
        page.resize(4096.max(data_offset + self.data.len()), 0);
        page
    }
}

fn layout(endian: Endian, long: usize) -> PageLayout {
    let hp = if long == 8 {
        HEADER_PAGE_64
    } else {
        HEADER_PAGE_32
    };
    PageLayout::from_header_texts(hp, HEADER_EVENT, endian).unwrap()
}

/// (time, raw) of every record, or the first error.
fn records(layout: &PageLayout, page: &[u8]) -> Result<Vec<(u64, Vec<u8>)>, PageError> {
    let mut out = Vec::new();
    for item in layout.parse_page(page) {
        if let Item::Record { time, raw, .. } = item? {
            out.push((time, raw.to_vec()));
        }
    }
    Ok(out)
}

#[test]
fn layout_from_the_host_texts() {
    let l = layout(Endian::Little, 8);
    assert_eq!(l.page_size(), 4096);
    assert_eq!(l.data_offset(), 16);
    assert_eq!(l.long_size(), 8);
    assert_eq!(l, PageLayout::standard(8, Endian::Little));
    let l = layout(Endian::Big, 4);
    assert_eq!(
        (l.page_size(), l.data_offset(), l.long_size()),
        (4096, 12, 4)
    );
    assert_eq!(l, PageLayout::standard(4, Endian::Big));
}

#[test]
fn bad_layout_texts_are_errors() {
    let he = HEADER_EVENT;
    let e = |hp: &str, he: &str| PageLayout::from_header_texts(hp, he, Endian::Little).unwrap_err();
    assert!(matches!(e("", he), LayoutError::HeaderPage(m) if m.contains("timestamp")));
    let no_data = HEADER_PAGE_64.replace("char data", "char other");
    assert!(matches!(e(&no_data, he), LayoutError::HeaderPage(m) if m.contains("`data`")));
    let commit3 = HEADER_PAGE_64.replace("offset:8;\tsize:8", "offset:8;\tsize:3");
    assert!(matches!(e(&commit3, he), LayoutError::HeaderPage(m) if m.contains("commit size 3")));
    let garbage = format!("{HEADER_PAGE_64}field: x; offset:z;\n");
    assert!(matches!(e(&garbage, he), LayoutError::HeaderPage(m) if m.contains("bad field")));
    // The pre-2.6.31 header: `type : 2 bits`, `len : 3 bits`.
    let old = "\ttype        :    2 bits\n\tlen         :    3 bits\n\ttime_delta  :   27 bits\n";
    assert!(matches!(
        e(HEADER_PAGE_64, old),
        LayoutError::HeaderEvent(_)
    ));
    let moved = HEADER_EVENT.replace("type == 30", "type == 28");
    assert!(
        matches!(e(HEADER_PAGE_64, &moved), LayoutError::HeaderEvent(m) if m.contains("time_extend"))
    );
    // Old kernels print no time_stamp line: accepted.
    let no_ts = HEADER_EVENT.replace("\ttime_stamp : type == 31\n", "");
    PageLayout::from_header_texts(HEADER_PAGE_64, &no_ts, Endian::Little).unwrap();
}

/// Offsets the text gives are any usize: one near `usize::MAX` (the commit's, the data's)
/// is an error in words, not an overflow (the commit's was one before the audit of issue
/// 43: `commit_offset + commit_size`).
#[test]
fn offsets_past_any_page_are_errors_not_overflows() {
    let e = |hp: &str| PageLayout::from_header_texts(hp, HEADER_EVENT, Endian::Little).unwrap_err();
    let max = usize::MAX;
    let commit = HEADER_PAGE_64.replace("offset:8;\tsize:8", &format!("offset:{max};\tsize:8"));
    assert!(matches!(e(&commit), LayoutError::HeaderPage(m) if m.contains("fields overlap")));
    let data = HEADER_PAGE_64.replace("offset:16;", &format!("offset:{max};"));
    assert!(matches!(e(&data), LayoutError::HeaderPage(m) if m.contains("data offset")));
}

#[test]
fn records_deltas_extends_and_lengths_both_orders_both_longs() {
    for endian in [Endian::Little, Endian::Big] {
        for long in [4, 8] {
            let mut b = PageBuilder::new(endian, long, 1_000_000);
            b.record(5, &[1, 2, 3, 4], false); // type_len 1
            b.record(0, &[7; 112], false); // type_len 28
            b.record(10, &[9; 5], false); // type_len 0, padded to 8
            b.record(1, &[3; 200], true); // type_len 0, long
            b.extend(3 << 27 | 17); // time extend, then a record with its own delta
            b.record(2, &[4; 8], false);
            b.absolute(5_000_000_000);
            b.record(7, &[6; 4], false);
            let page = b.page(None);
            let l = layout(endian, long);
            let got = records(&l, &page).unwrap();
            let mut pad5 = vec![9; 5];
            pad5.extend([0, 0, 0]);
            let t3 = 1_000_016 + (3 << 27) + 17 + 2;
            assert_eq!(
                got,
                vec![
                    (1_000_005, vec![1, 2, 3, 4]),
                    (1_000_005, vec![7; 112]),
                    (1_000_015, pad5),
                    (1_000_016, vec![3; 200]),
                    (t3, vec![4; 8]),
                    (5_000_000_007, vec![6; 4]),
                ],
                "{endian:?} long {long}"
            );
            let header = l.page_header(&page).unwrap();
            assert_eq!(header.timestamp, 1_000_000);
            assert_eq!(header.missed, None);
            assert_eq!(header.data_len, b.data.len());
        }
    }
}

#[test]
fn record_offsets_point_into_the_page() {
    let mut b = PageBuilder::new(Endian::Little, 8, 0);
    b.record(1, &[1; 8], false);
    b.record(1, &[2; 9], false);
    let page = b.page(None);
    let l = layout(Endian::Little, 8);
    let offsets: Vec<usize> = l
        .parse_page(&page)
        .map(|i| match i.unwrap() {
            Item::Record { offset, raw, .. } => {
                assert_eq!(&page[offset..offset + raw.len()], raw);
                offset
            }
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(offsets, vec![20, 36]);
}

#[test]
fn padding_discarded_events_count_their_delta_and_null_padding_ends_the_page() {
    let mut b = PageBuilder::new(Endian::Little, 8, 100);
    b.record(1, &[1; 4], false);
    b.discarded(20, 16);
    b.record(3, &[2; 4], false);
    b.head(TYPE_PADDING, 0); // the rest is padding
    b.word(0xdead_beef);
    b.record(1, &[3; 4], false); // never read
    let l = layout(Endian::Little, 8);
    assert_eq!(
        records(&l, &b.page(None)).unwrap(),
        vec![(101, vec![1; 4]), (124, vec![2; 4])]
    );
}

#[test]
fn absolute_time_stamps_keep_the_high_bits_of_the_page_time() {
    let high = 0x18u64 << 56; // within the 5 MSBs
    let mut b = PageBuilder::new(Endian::Little, 8, high | 1000);
    b.absolute(2000);
    b.record(1, &[1; 4], false);
    b.absolute(500); // below the previous low bits: the high part wrapped once
    b.record(0, &[2; 4], false);
    let l = layout(Endian::Little, 8);
    assert_eq!(
        records(&l, &b.page(None)).unwrap(),
        vec![
            (high | 2001, vec![1; 4]),
            ((high | 500) + (1 << 59), vec![2; 4])
        ]
    );
    assert_eq!(fix_abs_ts(7, 3), 7);
}

#[test]
fn missed_events_come_first_with_or_without_a_count() {
    for long in [4, 8] {
        for endian in [Endian::Little, Endian::Big] {
            let l = layout(endian, long);
            let mut b = PageBuilder::new(endian, long, 42);
            b.record(1, &[1; 4], false);
            let page = b.page(Some(Some(31_337)));
            let items: Vec<_> = l.parse_page(&page).collect();
            assert_eq!(
                items,
                vec![
                    Ok(Item::Missed {
                        count: Some(31_337),
                        time: 42
                    }),
                    Ok(Item::Record {
                        time: 43,
                        raw: &[1; 4][..],
                        offset: 8 + long + 4
                    })
                ]
            );
            let page = b.page(Some(None));
            let first = l.parse_page(&page).next();
            assert_eq!(
                first,
                Some(Ok(Item::Missed {
                    count: None,
                    time: 42
                }))
            );
        }
    }
}

#[test]
fn an_empty_page_has_no_items() {
    let l = layout(Endian::Little, 8);
    let page = PageBuilder::new(Endian::Little, 8, 5).page(None);
    assert_eq!(l.parse_page(&page).count(), 0);
    // A missed marker on an otherwise empty page still shows.
    let page = PageBuilder::new(Endian::Little, 8, 5).page(Some(Some(3)));
    assert_eq!(l.parse_page(&page).count(), 1);
}

#[test]
fn malformed_pages_give_one_error_with_its_offset() {
    let l = layout(Endian::Little, 8);
    // Shorter than the header.
    let errs: Vec<_> = l.parse_page(&[0; 10]).collect();
    assert_eq!(
        errs,
        vec![Err(PageError {
            offset: 0,
            kind: PageErrorKind::ShortPage {
                len: 10,
                header: 16
            }
        })]
    );
    // Commit beyond the page.
    let mut page = PageBuilder::new(Endian::Little, 8, 0).page(None);
    page[8..16].copy_from_slice(&5000u64.to_le_bytes());
    let err = l.parse_page(&page).next().unwrap().unwrap_err();
    assert_eq!(err.offset, 8);
    assert!(matches!(
        err.kind,
        PageErrorKind::CommitTooLarge {
            commit: 5000,
            capacity: 4080
        }
    ));
    assert_eq!(
        err.to_string(),
        "page byte 8: commit 5000 is larger than the 4080 bytes of data the page holds"
    );
    // A record running past the commit, after a good one.
    let mut b = PageBuilder::new(Endian::Little, 8, 0);
    b.record(1, &[1; 4], false);
    b.head(3, 1); // needs 16 bytes, only 4 committed
    let page = b.page(None);
    let items: Vec<_> = l.parse_page(&page).collect();
    assert_eq!(items.len(), 2);
    assert!(items[0].is_ok());
    assert_eq!(
        items[1],
        Err(PageError {
            offset: 24,
            kind: PageErrorKind::EventTruncated {
                type_len: 3,
                needed: 16,
                available: 4
            }
        })
    );
    // A length word below 4.
    let mut b = PageBuilder::new(Endian::Little, 8, 0);
    b.head(0, 1);
    b.word(2);
    let err = l.parse_page(&b.page(None)).next().unwrap().unwrap_err();
    assert_eq!((err.offset, err.kind), (20, PageErrorKind::BadLength(2)));
    // A time extend cut after its header.
    let mut b = PageBuilder::new(Endian::Little, 8, 0);
    b.head(TYPE_TIME_EXTEND, 1);
    let err = l.parse_page(&b.page(None)).next().unwrap().unwrap_err();
    assert_eq!(err.offset, 16);
}

#[test]
fn a_short_last_page_is_read_up_to_its_commit() {
    // A page cut after its data (a truncated file): the commit still fits, so it reads.
    let mut b = PageBuilder::new(Endian::Little, 8, 0);
    b.record(1, &[1; 4], false);
    let page = b.page(None);
    let l = layout(Endian::Little, 8);
    assert_eq!(records(&l, &page[..24]).unwrap().len(), 1);
    let err = records(&l, &page[..22]).unwrap_err();
    assert!(matches!(err.kind, PageErrorKind::CommitTooLarge { .. }));
}

#[test]
fn the_reader_resumes_over_a_reused_buffer() {
    let mut b = PageBuilder::new(Endian::Little, 8, 10);
    b.record(1, &[1; 4], false);
    b.record(1, &[2; 4], false);
    let l = layout(Endian::Little, 8);
    let mut buffer = b.page(None);
    let mut reader = PageReader::new(&l, &buffer).unwrap();
    let mut times = Vec::new();
    while let Some(item) = reader.next_item(&l, &buffer) {
        if let Item::Record { time, .. } = item.unwrap() {
            times.push(time);
        }
    }
    assert_eq!(times, vec![11, 12]);
    // The same buffer refilled with the next page.
    let mut b = PageBuilder::new(Endian::Little, 8, 20);
    b.record(5, &[3; 4], false);
    buffer.copy_from_slice(&b.page(None));
    let mut reader = PageReader::new(&l, &buffer).unwrap();
    assert!(matches!(
        reader.next_item(&l, &buffer),
        Some(Ok(Item::Record { time: 25, .. }))
    ));
    assert_eq!(reader.next_item(&l, &buffer), None);
    assert_eq!(reader.next_item(&l, &buffer), None);
}
