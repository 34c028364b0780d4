//! Pure tier: call stacks in a perf.data as `record -g --raw` writes them. The writer's
//! attrs (`IP | CALLCHAIN`, the tracking attr's `mmap`, `mmap2`, `build_id`), samples and
//! `PERF_RECORD_MMAP2` records and the kernel map (`PERF_RECORD_MMAP`) read back through
//! the perf.data reader; the line decoder hands each sample's chain, and every mapping
//! before it, to the stack namer in time order; a callchain whose count runs past its record is an error that is counted,
//! never a panic, and the records after it are decoded. `--call-graph dwarf`'s samples
//! (user registers and stack copy) read back, their copies go to the namer, and the
//! read-only segments written beside the mappings tell it nothing.

use uevrec_parsers::callchain::{Callchain, PERF_CONTEXT_KERNEL, PERF_CONTEXT_USER};
use uevrec_parsers::perf_data::writer::{
    self, BuildIdEntry, KernelMap, Mmap2, STACK_SAMPLE_TYPE, Stamp, TrackingSpec,
    USER_STACK_SAMPLE_TYPE, UserCopy, UserStackSpec,
};
use uevrec_parsers::perf_data::{Item, PerfData, PerfDataError};
use uevrec_parsers::perf_sample::{
    PERF_RECORD_MISC_FORK_EXEC, PERF_RECORD_MISC_KERNEL, PERF_RECORD_MMAP, Record, sample_type,
};
use uevrec_parsers::to_lines::DecodeOptions;
use uevrec_parsers::to_lines::perf_data::LineDecoder;
use uevrec_parsers::user_stack::{StackCopy, UserRegs, UserStack, x86_64};
use uevrec_parsers::{ContextUpdate, Endian, RecordStamp, StackNamer};

#[path = "common/perf_data.rs"]
mod perf_data;
#[path = "common/trace_dat.rs"]
mod trace_dat;
use perf_data::{SeqFile, decode_until_cut, finish, seq_raw};

const EVENT_ID: u64 = 7;
const TRACKING: TrackingSpec = TrackingSpec {
    id: 9,
    clockid: 0,
    mmap: true,
};
/// A tracking attr without `build_id` (perf's own without `--buildid-mmap`).
const NO_BUILD_IDS: TrackingSpec = TrackingSpec {
    mmap: false,
    ..TRACKING
};
const BUILD_ID: [u8; 20] = [0xab; 20];
const KERNEL_MAP: KernelMap<'static> = KernelMap {
    start: 0xffff_ffff_8100_0000,
    end: 0xffff_ffff_8225_9b00,
    symbol: "_text",
};

/// The program's mapping (process 42).
const PROG: Mmap2<'static> = Mmap2 {
    pid: 42,
    tid: 42,
    addr: 0x40_0000,
    len: 0x1_0000,
    pgoff: 0,
    build_id: &BUILD_ID,
    path: b"/bin/prog",
};

/// What a record of process 42 says besides its data.
fn stamp(id: u64, time: u64) -> Stamp {
    Stamp {
        id,
        pid: 42,
        tid: 42,
        time,
        cpu: 0,
    }
}

/// The chain of sample `seq`: two kernel frames, two user frames (the first holds `seq`).
fn chain_words(seq: u64) -> Vec<u64> {
    vec![
        PERF_CONTEXT_KERNEL,
        0xffff_ffff_8100_0000,
        0xffff_ffff_8100_0100,
        PERF_CONTEXT_USER,
        0x40_1000 + seq,
        0x40_2000,
    ]
}

fn words_bytes(words: &[u64]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_ne_bytes()).collect()
}

/// A finished file: an MMAP2 with a build id, `n` stacked samples (SEQ 1..=n, times
/// 10, 20 …), an MMAP2 without one between them.
fn file(n: u64) -> Vec<u8> {
    file_with(n, TRACKING, &[])
}

/// [`file`] with the tracking attr `tracking` and the `HEADER_BUILD_ID` section
/// `build_ids`.
fn file_with(n: u64, tracking: TrackingSpec, build_ids: &[u8]) -> Vec<u8> {
    let seq_file = SeqFile::new(EVENT_ID, true);
    let mut meta = seq_file.meta("6.18", Some((10, 10 * n)), Some(tracking));
    meta.build_ids = build_ids;
    let mut file = writer::placeholder_header().to_vec();
    let mapping = PROG;
    // The kernel map first, as `record -g --raw` writes it after the tracking attr.
    let kernel = Stamp {
        pid: u32::MAX,
        tid: 0,
        ..stamp(TRACKING.id, 0)
    };
    writer::push_kernel_mmap(&mut file, &kernel, &KERNEL_MAP);
    // Then a loaded module's, as perf synthesizes them.
    writer::push_module_mmap(&mut file, &kernel, 0xffff_ffff_c0a0_0000, 0x2000, "xfs");
    writer::push_mmap2(&mut file, &stamp(TRACKING.id, 5), &mapping);
    for seq in 1..=n {
        if seq == 2 {
            let lib = Mmap2 {
                addr: 0x7f00_0000,
                build_id: &[],
                path: b"/lib/libc.so.6",
                ..mapping
            };
            writer::push_mmap2(&mut file, &stamp(TRACKING.id, 15), &lib);
        }
        let words = words_bytes(&chain_words(seq));
        let chain = Callchain::new(&words, Endian::Little);
        let stamp = stamp(EVENT_ID, 10 * seq);
        let user = UserCopy::NotAsked;
        writer::push_stacked_sample(&mut file, &stamp, chain, user, &seq_raw(seq), Some(0))
            .unwrap();
    }
    writer::push_finished_round(&mut file);
    finish(&mut file, &meta);
    file
}

#[test]
fn attrs_samples_and_mappings_read_back() {
    let bytes = file(3);
    let (mut data, records) = PerfData::open(&bytes).unwrap();
    let attrs: Vec<_> = data.events().iter().map(|e| e.attr).collect();
    assert_eq!(attrs.len(), 2, "the event and the tracking attr");
    assert_eq!(
        attrs[0].sample_type & STACK_SAMPLE_TYPE,
        sample_type::IP | sample_type::CALLCHAIN
    );
    // mmap (8), mmap2 (23), build_id (34) on the tracking attr.
    for bit in [8, 23, 34] {
        assert_ne!(attrs[1].flags & 1 << bit, 0, "tracking flag {bit}");
    }
    let (mut samples, mut mappings, mut kernel_maps) = (Vec::new(), Vec::new(), Vec::new());
    let records: Vec<_> = records.map(Result::unwrap).collect();
    for rec in &records {
        match data.record(rec).unwrap() {
            Item::Sample { sample, .. } => {
                let chain = sample.callchain.expect("a callchain");
                let seq = u64::from_ne_bytes(sample.raw.unwrap()[8..16].try_into().unwrap());
                assert_eq!(chain.entries().collect::<Vec<_>>(), chain_words(seq));
                // The IP is the innermost address (past the kernel marker), in the
                // kernel as the header says.
                assert_eq!(sample.ip, Some(0xffff_ffff_8100_0000));
                assert_eq!(rec.header.misc, PERF_RECORD_MISC_KERNEL);
                assert_eq!((sample.pid, sample.time), (Some(42), Some(10 * seq)));
                samples.push(seq);
            }
            Item::Other(h) if h.kind == PERF_RECORD_MMAP => {
                // perf's layout: pid, tid, start, len, pgoff, the name; then the trailer.
                let body = &rec.bytes[8..];
                let word = |at: usize| u64::from_ne_bytes(body[at..at + 8].try_into().unwrap());
                let name = &body[32..];
                let name = &name[..name.iter().position(|&b| b == 0).unwrap()];
                kernel_maps.push((
                    h.misc,
                    word(0),
                    word(8),
                    word(16),
                    word(24),
                    String::from_utf8(name.to_vec()).unwrap(),
                ));
                // Not a process's mapping: the reader keeps it as an other record.
                let layout = data.events()[1].layout.clone().unwrap();
                assert!(matches!(layout.parse(rec.bytes), Ok(Record::Other(_))));
            }
            Item::Other(_) => {
                let event = 1; // the tracking attr's layout parses the MMAP2 records
                let layout = data.events()[event].layout.clone().unwrap();
                if let Ok(Record::Mmap {
                    pid,
                    addr,
                    len,
                    build_id,
                    filename,
                    sample_id,
                    ..
                }) = layout.parse(rec.bytes)
                {
                    mappings.push((pid, addr, len, build_id.to_vec(), filename.to_vec()));
                    assert_eq!(sample_id.id, Some(TRACKING.id));
                }
            }
            _ => {}
        }
    }
    assert_eq!(samples, [1, 2, 3]);
    let len = KERNEL_MAP.end - KERNEL_MAP.start;
    assert_eq!(
        kernel_maps,
        [
            (
                PERF_RECORD_MISC_KERNEL,
                u64::from(u32::MAX), // pid -1, tid 0
                KERNEL_MAP.start,
                len,
                KERNEL_MAP.start, // pgoff: the start, as perf writes it
                "[kernel.kallsyms]_text".to_string()
            ),
            (
                PERF_RECORD_MISC_KERNEL,
                u64::from(u32::MAX),
                0xffff_ffff_c0a0_0000,
                0x2000,
                0, // pgoff 0
                "[xfs]".to_string()
            )
        ]
    );
    assert_eq!(
        mappings,
        [
            (
                42,
                0x40_0000,
                0x1_0000,
                BUILD_ID.to_vec(),
                b"/bin/prog".to_vec()
            ),
            (
                42,
                0x7f00_0000,
                0x1_0000,
                Vec::new(),
                b"/lib/libc.so.6".to_vec()
            ),
        ]
    );
}

/// What the decoder told the namer, in order.
#[derive(Default)]
struct Told(std::rc::Rc<std::cell::RefCell<Vec<String>>>);

impl StackNamer for Told {
    fn context(&mut self, time: Option<u64>, update: &ContextUpdate<'_>) {
        if let ContextUpdate::Mmap { path, build_id, .. } = update {
            let path = String::from_utf8_lossy(path);
            let id = build_id.len();
            self.0
                .borrow_mut()
                .push(format!("mmap {path} {time:?} {id}"));
        }
    }

    fn write(
        &mut self,
        out: &mut Vec<u8>,
        stamp: &RecordStamp,
        stack: Callchain<'_>,
        copy: Option<UserStack<'_>>,
    ) {
        let user = stack.frames().filter(|f| f.is_ok()).count();
        // With a stack copy: its IP register and how many bytes it holds.
        let copy = copy.map_or(String::new(), |c| {
            let ip = c.regs.get(x86_64::IP).unwrap_or(0);
            format!(" copy {ip:#x} {}", c.stack.bytes.len())
        });
        self.0
            .borrow_mut()
            .push(format!("stack {} {user}{copy}", stamp.pid));
        out.extend_from_slice(format!(",\"stack\":{user}").as_bytes());
    }
}

/// Decode `bytes` with stacks named by a [`Told`]: the lines, what the namer was told,
/// and the decoding's errors.
fn decode(bytes: &[u8]) -> (Vec<serde_json::Value>, Vec<String>, Vec<PerfDataError>) {
    let (data, records) = PerfData::open(bytes).unwrap();
    let told = Told::default();
    let log = told.0.clone();
    let opts = DecodeOptions {
        stacks: true,
        ..DecodeOptions::default()
    };
    let mut dec = LineDecoder::new(data, opts, |_, _| true).with_stacks(Box::new(told));
    let out = decode_until_cut(&mut dec, records, bytes);
    let errors = dec.stats().errors.clone();
    drop(dec);
    let lines = String::from_utf8(out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let told = log.borrow().clone();
    (lines, told, errors)
}

#[test]
fn the_namer_gets_every_mapping_before_the_samples_after_it() {
    let (lines, told, errors) = decode(&file(3));
    assert!(errors.is_empty(), "{errors:?}");
    let stacks: Vec<_> = lines.iter().map(|l| l["stack"].clone()).collect();
    assert_eq!(stacks, [4, 4, 4], "{lines:?}");
    assert_eq!(
        told,
        [
            "mmap /bin/prog Some(5) 20",
            "stack 42 4",
            "mmap /lib/libc.so.6 Some(15) 0",
            "stack 42 4",
            "stack 42 4",
        ]
    );
}

#[test]
fn a_callchain_past_its_record_is_a_counted_error() {
    let mut bytes = file(3);
    // The second sample's count (after header, identifier, IP, pid/tid, time, cpu):
    // claims more entries than the record holds.
    let (data, records) = PerfData::open(&bytes).unwrap();
    drop(data);
    let second = records
        .map(Result::unwrap)
        .filter(|r| r.header.kind == 9)
        .nth(1)
        .unwrap()
        .offset as usize;
    let nr_at = second + 8 + 8 + 8 + 8 + 8 + 8;
    for nr in [100u64, 1 << 40, u64::MAX] {
        bytes[nr_at..nr_at + 8].copy_from_slice(&nr.to_ne_bytes());
        let (lines, told, errors) = decode(&bytes);
        assert_eq!(errors.len(), 1, "nr {nr}: {errors:?}");
        assert!(
            errors[0].to_string().contains("callchain"),
            "the error names the chain: {}",
            errors[0]
        );
        let seqs: Vec<_> = lines.iter().map(|l| l["fields"]["seq"].clone()).collect();
        assert_eq!(seqs, [1, 3], "the records around it decoded (nr {nr})");
        assert_eq!(told.iter().filter(|t| t.starts_with("stack")).count(), 2);
    }
}

/// A build id is taken only from the records of an attr that asks for them: the kernel
/// marks other events' MMAP2 records as carrying one, over their inode numbers, while
/// any event asks (seen on 6.18 with `perf record -g` beside `uevrec record -g`).
#[test]
fn build_ids_only_where_the_attr_asks_for_them() {
    let (_, told, _) = decode(&file_with(1, NO_BUILD_IDS, &[]));
    assert_eq!(told[0], "mmap /bin/prog Some(5) 0");
}

/// perf's own files carry no build ids in their MMAP2 records (`perf record` without
/// `--buildid-mmap`) but list them in `HEADER_BUILD_ID`: a mapping without one gets the
/// header's, by its path.
#[test]
fn a_mapping_without_a_build_id_gets_the_headers() {
    let mut section = Vec::new();
    let libc = BuildIdEntry {
        kernel: false,
        build_id: &[7; 20],
        name: b"/lib/libc.so.6",
    };
    writer::push_build_id(&mut section, &libc);
    let kernel = BuildIdEntry {
        kernel: true,
        build_id: &[8; 16],
        name: b"[kernel.kallsyms]",
    };
    writer::push_build_id(&mut section, &kernel);
    let bytes = file_with(2, NO_BUILD_IDS, &section);
    let (_, told, _) = decode(&bytes);
    assert_eq!(told[0], "mmap /bin/prog Some(5) 0", "not listed: none");
    assert!(
        told.contains(&"mmap /lib/libc.so.6 Some(15) 20".to_string()),
        "{told:?}"
    );
    let (data, _) = PerfData::open(&bytes).unwrap();
    let ids = &data.features.build_ids;
    assert_eq!(ids.get(&b"/lib/libc.so.6"[..]), Some(&vec![7; 20]));
    assert_eq!(ids.get(&b"[kernel.kallsyms]"[..]), Some(&vec![8; 16]));
    assert_eq!(ids.len(), 2);
    // An entry shorter than its fixed part: the feature is a problem, not a panic.
    let mut bad = section.clone();
    bad[6] = 8;
    let bytes = file_with(2, NO_BUILD_IDS, &bad);
    let (data, _) = PerfData::open(&bytes).unwrap();
    assert!(data.features.build_ids.is_empty());
}

/// `--call-graph dwarf`'s registers (bp, sp, ip) and bytes of stack asked for per sample.
const DWARF: UserStackSpec = UserStackSpec {
    regs: 1 << x86_64::BP | 1 << x86_64::SP | 1 << x86_64::IP,
    size: 64,
};

/// The registers of sample `seq`: bp, sp, ip (its IP holds `seq`).
fn regs_words(seq: u64) -> Vec<u8> {
    words_bytes(&[0x7ffe_0000, 0x7ffd_0000, 0x40_1000 + seq])
}

/// A file of `--call-graph dwarf` samples: seq 1 with 40 bytes of stack copied (of 64
/// asked for), seq 2 without user context (a kernel thread), seq 3 with a raw entry so
/// large that its copy is cut to fit the record; a read-only segment beside the mapping.
fn dwarf_file() -> (Vec<u8>, usize) {
    let mut seq_file = SeqFile::new(EVENT_ID, true);
    seq_file.events[0].user_stack = Some(DWARF);
    let meta = seq_file.meta("6.18", Some((10, 30)), Some(TRACKING));
    let mut file = writer::placeholder_header().to_vec();
    let text = PROG;
    // The exec: the program starts without what it had mapped before.
    writer::push_exec_fork(&mut file, &stamp(TRACKING.id, 3), 42);
    writer::push_mmap2(&mut file, &stamp(TRACKING.id, 5), &text);
    let eh_frame = Mmap2 {
        addr: 0x41_0000,
        pgoff: 0x1_0000,
        ..text
    };
    writer::push_data_mmap2(&mut file, &stamp(TRACKING.id, 5), &eh_frame);
    let stack: Vec<u8> = (0..40).collect();
    let kernel_only = words_bytes(&[PERF_CONTEXT_KERNEL, 0xffff_ffff_8100_0000]);
    let chain = Callchain::new(&kernel_only, Endian::Little);
    let mut large = seq_raw(3);
    large.resize(60_000, 7);
    let mut cut_at = 0;
    for seq in 1..=3u64 {
        let regs = regs_words(seq);
        let copy = UserStack {
            regs: UserRegs::new(2, DWARF.regs, &regs, Endian::NATIVE),
            stack: StackCopy {
                bytes: &stack,
                size: if seq == 3 { 8192 } else { 64 },
            },
        };
        let user = UserCopy::Taken((seq != 2).then_some(copy));
        let raw = if seq == 3 {
            large.clone()
        } else {
            seq_raw(seq)
        };
        if seq == 3 {
            cut_at = file.len();
        }
        let s = stamp(EVENT_ID, 10 * seq);
        writer::push_stacked_sample(&mut file, &s, chain, user, &raw, Some(0)).unwrap();
    }
    writer::push_finished_round(&mut file);
    finish(&mut file, &meta);
    (file, cut_at)
}

#[test]
fn dwarf_registers_and_stack_copies_read_back() {
    let (bytes, third) = dwarf_file();
    let (mut data, records) = PerfData::open(&bytes).unwrap();
    let attr = data.events()[0].attr;
    assert_eq!(
        attr.sample_type & USER_STACK_SAMPLE_TYPE,
        USER_STACK_SAMPLE_TYPE
    );
    assert_eq!(attr.regs_user, DWARF.regs);
    // sample_stack_user: the u32 at 88 of the attr, as perf reads it.
    let mut spec = SeqFile::new(EVENT_ID, true).events[0].clone();
    spec.user_stack = Some(DWARF);
    let written = writer::attr_bytes(&spec, true);
    assert_eq!(written[88..92], DWARF.size.to_ne_bytes());
    assert!(
        bytes.windows(written.len()).any(|w| w == written),
        "the attr in the file"
    );
    let mut copies = Vec::new();
    let mut exec_flags = Vec::new();
    let mut exec_forks = Vec::new();
    for rec in records.map(Result::unwrap) {
        match data.record(&rec).unwrap() {
            Item::Sample { sample, .. } => {
                let regs = sample.user_regs.expect("REGS_USER");
                let copy = sample.user_stack.expect("STACK_USER");
                copies.push((
                    regs.abi(),
                    regs.get(x86_64::IP),
                    copy.size,
                    copy.bytes.len(),
                ));
                if rec.offset as usize == third {
                    assert!(usize::from(rec.header.size) <= 65_528, "fits a record");
                }
            }
            Item::Other(_) => {
                let layout = data.events()[1].layout.clone().unwrap();
                match layout.parse(rec.bytes) {
                    Ok(r @ Record::Mmap { exec, .. }) => {
                        exec_flags.push((exec, r.context_update().is_some()));
                    }
                    Ok(Record::Task {
                        fork, pid, ppid, ..
                    }) => exec_forks.push((rec.header.misc, fork, pid, ppid)),
                    _ => {}
                }
            }
            _ => {}
        }
    }
    // Seq 3: the copy cut (to a multiple of 8) so the record fits; its 40 bytes kept.
    let (abi, ip, size, copied) = copies[2];
    assert_eq!((abi, ip, copied), (2, Some(0x40_1003), 40));
    assert!((40..8192).contains(&size) && size % 8 == 0, "{size}");
    assert_eq!(
        copies[..2],
        [(2, Some(0x40_1001), 64, 40), (0, None, 0, 0)],
        "as the kernel gave them; none without user context"
    );
    // The code mapping tells the namer; the read-only segment beside it does not.
    assert_eq!(exec_flags, [(true, true), (false, false)]);
    // A fork of the process from itself that perf clones no mappings for.
    assert_eq!(exec_forks, [(PERF_RECORD_MISC_FORK_EXEC, true, 42, 42)]);
}

#[test]
fn the_namer_gets_each_samples_stack_copy() {
    let (lines, told, errors) = decode(&dwarf_file().0);
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert_eq!(
        told,
        [
            "mmap /bin/prog Some(5) 20",
            "stack 42 1 copy 0x401001 40",
            "stack 42 1 copy 0x0 0",
            "stack 42 1 copy 0x401003 40",
        ]
    );
}
