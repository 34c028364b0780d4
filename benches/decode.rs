//! Decode + JSON-line throughput (events/s), time formatting included.
//!
//! (a) an 8-field user event with two dynamic strings, (b) the kernel's sched_switch
//! (format text from a 6.18 kernel), (c) a string-heavy event: four 200-byte strings with
//! characters that need escaping. Each iteration writes a batch of 1000 records with
//! advancing timestamps into one reused buffer, as the recorder does.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use uevrec_parsers::decode::{Endian, decode_field};
use uevrec_parsers::field_type::resolve_decl;
use uevrec_parsers::json_line::{LineOptions, LineWriter, RecordMeta};
use uevrec_parsers::schema::{EventFormat, Field};

const BATCH: u64 = 1000;
const T0: u64 = 1_795_345_200_000_000_000;

/// `cat /sys/kernel/tracing/events/sched/sched_switch/format` on the 6.18 host (print fmt
/// shortened).
const SCHED_SWITCH: &str = "name: sched_switch
ID: 372
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;
\tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;
\tfield:int prev_prio;\toffset:28;\tsize:4;\tsigned:1;
\tfield:long prev_state;\toffset:32;\tsize:8;\tsigned:1;
\tfield:char next_comm[16];\toffset:40;\tsize:16;\tsigned:0;
\tfield:pid_t next_pid;\toffset:56;\tsize:4;\tsigned:1;
\tfield:int next_prio;\toffset:60;\tsize:4;\tsigned:1;

print fmt: \"prev_comm=%s prev_pid=%d prev_prio=%d prev_state=%s%s ==> next_comm=%s next_pid=%d next_prio=%d\", REC->prev_comm, REC->prev_pid, REC->prev_prio, REC->next_comm, REC->next_pid, REC->next_prio
";

/// The `field:` lines of a format text, each through `resolve_decl` (until the format
/// parser lands, this is the bench's stand-in for it; blank line = end of common fields).
fn format_from_text(text: &str) -> EventFormat {
    let mut common = Vec::new();
    let mut fields = Vec::new();
    let mut in_common = true;
    for line in text
        .lines()
        .skip_while(|l| !l.starts_with("format:"))
        .skip(1)
    {
        let line = line.trim();
        if line.is_empty() {
            in_common = false;
            continue;
        }
        let Some(rest) = line.strip_prefix("field:") else {
            break;
        };
        let parts: Vec<&str> = rest.split(';').map(str::trim).collect();
        let value = |key: &str| {
            parts
                .iter()
                .find_map(|p| p.strip_prefix(key))
                .map(|v| v.parse::<u32>().expect("number"))
        };
        let (offset, size) = (
            value("offset:").expect("offset"),
            value("size:").expect("size"),
        );
        let signed = value("signed:").map(|s| s != 0);
        let d = resolve_decl(parts[0], size, signed).expect("declaration");
        let field = Field {
            name: d.name,
            type_text: d.type_text,
            offset,
            size,
            signed,
            kind: d.kind,
        };
        if in_common {
            common.push(field)
        } else {
            fields.push(field)
        }
    }
    EventFormat {
        name: "bench".into(),
        id: 1,
        common_fields: common,
        fields,
        print_fmt: String::new(),
    }
}

fn common_header(id: u16, pid: i32) -> Vec<u8> {
    let mut raw = id.to_le_bytes().to_vec();
    raw.extend_from_slice(&[0, 0]);
    raw.extend_from_slice(&pid.to_le_bytes());
    raw
}

fn loc(len: usize, offset: usize) -> [u8; 4] {
    (((len as u32) << 16) | offset as u32).to_le_bytes()
}

const COMMON: &str = "format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

";

/// (a) u32, u64, s32, char[16], __data_loc char[] (30 B), __rel_loc char[] (40 B), u16, u8.
fn user_event() -> (EventFormat, Vec<u8>) {
    let text = format!(
        "{COMMON}\tfield:u32 a;\toffset:8;\tsize:4;\tsigned:0;
\tfield:u64 b;\toffset:12;\tsize:8;\tsigned:0;
\tfield:s32 c;\toffset:20;\tsize:4;\tsigned:1;
\tfield:char d[1055984226];\toffset:24;\tsize:16;\tsigned:1;
\tfield:__data_loc char[] e;\toffset:40;\tsize:4;\tsigned:1;
\tfield:__rel_loc char f[];\toffset:44;\tsize:4;\tsigned:1;
\tfield:u16 g;\toffset:48;\tsize:2;\tsigned:0;
\tfield:u8 h;\toffset:50;\tsize:1;\tsigned:0;
"
    );
    let e = b"/usr/lib/x86_64-linux-gnu/abc\0"; // 30 bytes with NUL
    let f = b"request=GET /index.html status=200 ok!!\0"; // 40 bytes with NUL
    assert_eq!((e.len(), f.len()), (30, 40));
    let mut raw = common_header(1117, 4242);
    raw.extend_from_slice(&123_456u32.to_le_bytes());
    raw.extend_from_slice(&0x1234_5678_9abc_def0u64.to_le_bytes());
    raw.extend_from_slice(&(-42i32).to_le_bytes());
    raw.extend_from_slice(b"worker-thread-7\0");
    raw.extend_from_slice(&loc(e.len(), 51));
    raw.extend_from_slice(&loc(f.len(), 51 + e.len() - 48));
    raw.extend_from_slice(&8080u16.to_le_bytes());
    raw.push(3);
    raw.extend_from_slice(e);
    raw.extend_from_slice(f);
    (format_from_text(&text), raw)
}

/// (b) sched_switch as the kernel writes it.
fn sched_switch() -> (EventFormat, Vec<u8>) {
    let mut raw = common_header(372, 0);
    raw.extend_from_slice(b"kworker/u8:3\0\0\0\0");
    raw.extend_from_slice(&1234i32.to_le_bytes());
    raw.extend_from_slice(&120i32.to_le_bytes());
    raw.extend_from_slice(&1i64.to_le_bytes());
    raw.extend_from_slice(b"swapper/1\0\0\0\0\0\0\0");
    raw.extend_from_slice(&0i32.to_le_bytes());
    raw.extend_from_slice(&120i32.to_le_bytes());
    (format_from_text(SCHED_SWITCH), raw)
}

/// (c) four `__data_loc char[]` strings of 200 bytes with quotes, backslashes, tabs and
/// newlines sprinkled in.
fn string_heavy() -> (EventFormat, Vec<u8>) {
    let text = format!(
        "{COMMON}\tfield:__data_loc char[] s0;\toffset:8;\tsize:4;\tsigned:1;
\tfield:__data_loc char[] s1;\toffset:12;\tsize:4;\tsigned:1;
\tfield:__data_loc char[] s2;\toffset:16;\tsize:4;\tsigned:1;
\tfield:__data_loc char[] s3;\toffset:20;\tsize:4;\tsigned:1;
"
    );
    let mut s = Vec::new();
    while s.len() < 199 {
        s.extend_from_slice(b"key=\"value\" path=C:\\dir\tnext\n");
    }
    s.truncate(199);
    s.push(0);
    let mut raw = common_header(1118, 4242);
    for i in 0..4 {
        raw.extend_from_slice(&loc(s.len(), 24 + i * s.len()));
    }
    for _ in 0..4 {
        raw.extend_from_slice(&s);
    }
    (format_from_text(&text), raw)
}

fn bench_lines(c: &mut Criterion, name: &str, (format, raw): (EventFormat, Vec<u8>)) {
    let meta = RecordMeta {
        time_unix_ns: None,
        cpu: 1,
        pid: 4242,
        tid: 4243,
        system: "user_events",
        event: name,
        format_id: None,
    };
    let mut writer = LineWriter::new(LineOptions::default());
    let mut out = Vec::with_capacity(1 << 20);
    let mut time = T0;
    // Show one line, so the bench output says what is measured.
    writer.write_record(
        &mut out,
        &RecordMeta {
            time_unix_ns: Some(T0),
            ..meta
        },
        &format,
        &raw,
    );
    eprint!("{name}: {}", String::from_utf8_lossy(&out));
    let mut group = c.benchmark_group("json_line");
    group.throughput(Throughput::Elements(BATCH));
    group.bench_function(name, |b| {
        b.iter(|| {
            out.clear();
            for _ in 0..BATCH {
                time += 1_000; // 1 µs apart: a new second every 10^6 events
                let meta = RecordMeta {
                    time_unix_ns: Some(time),
                    ..meta
                };
                writer.write_record(&mut out, &meta, black_box(&format), black_box(&raw));
            }
            black_box(out.len())
        })
    });
    group.finish();
}

fn benches(c: &mut Criterion) {
    bench_lines(c, "a_user_event_8_fields", user_event());
    bench_lines(c, "b_sched_switch", sched_switch());
    bench_lines(c, "c_four_200b_escaped_strings", string_heavy());

    // Decoding alone (no JSON) for event (a), to split the cost.
    let (format, raw) = user_event();
    let mut group = c.benchmark_group("decode_only");
    group.throughput(Throughput::Elements(BATCH));
    group.bench_function("a_user_event_8_fields", |b| {
        b.iter(|| {
            let mut n = 0usize;
            for _ in 0..BATCH {
                for field in &format.fields {
                    n += matches!(
                        decode_field(field, black_box(&raw), Endian::Little),
                        uevrec_parsers::decode::Value::Error(_)
                    ) as usize;
                }
            }
            black_box(n)
        })
    });
    group.finish();
}

criterion_group!(decode, benches);
criterion_main!(decode);
