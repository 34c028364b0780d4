//! Decode + JSON-line throughput (events/s), time formatting included.
//!
//! (a) an 8-field user event with two dynamic strings, (b) the kernel's sched_switch
//! (format text from a 6.18 kernel), (c) a string-heavy event: four 200-byte strings with
//! characters that need escaping, (d) `raw_syscalls:sys_enter` (a `long` and an
//! `unsigned long[6]`: the line a live syscall recording writes most). Each iteration writes a batch of 1000 records with
//! advancing timestamps into one reused buffer, as the recorder does.
//!
//! Every benchmark runs twice: `wall/…` (criterion's wall clock) and `cpu/…` (this
//! thread's CPU time, `CLOCK_THREAD_CPUTIME_ID`). On a shared machine the wall clock
//! counts time spent waiting for a core; CPU time gives events per second of one core.

use std::hint::black_box;
use std::time::Duration;

use criterion::measurement::{Measurement, ValueFormatter, WallTime};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use uevrec_parsers::EventFormat;
use uevrec_parsers::parse_format;
use uevrec_parsers::{Endian, decode_field};
use uevrec_parsers::{LineOptions, LineWriter, PreparedFormat, RecordMeta, RecordStamp};
use uevrec_samples::register::format_file_text;

const BATCH: u64 = 1000;
const T0: u64 = 1_795_345_200_000_000_000;

/// `cat /sys/kernel/tracing/events/sched/sched_switch/format` on the 6.18 host, verbatim.
const SCHED_SWITCH: &str = include_str!("../parsers/tests/data/sched_switch-6.18.format");

/// The schema of a format file text, as the recorder gets it.
fn format_from_text(text: &str) -> EventFormat {
    parse_format(text).expect("bench format text parses")
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

/// (a) u32, u64, s32, char[16], __data_loc char[] (30 B), __rel_loc char[] (40 B), u16, u8.
fn user_event() -> (EventFormat, Vec<u8>) {
    let text = format_file_text(
        "bench",
        1117,
        &[
            ("u32 a", 8, 4, false),
            ("u64 b", 12, 8, false),
            ("s32 c", 20, 4, true),
            ("char d[1055984226]", 24, 16, true),
            ("__data_loc char[] e", 40, 4, true),
            ("__rel_loc char f[]", 44, 4, true),
            ("u16 g", 48, 2, false),
            ("u8 h", 50, 1, false),
        ],
        "",
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
    let text = format_file_text(
        "bench",
        1118,
        &[
            ("__data_loc char[] s0", 8, 4, true),
            ("__data_loc char[] s1", 12, 4, true),
            ("__data_loc char[] s2", 16, 4, true),
            ("__data_loc char[] s3", 20, 4, true),
        ],
        "",
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

/// (d) `raw_syscalls:sys_enter` (format as on x86_64 kernels): `read(…)`-like values,
/// pointers in the args as the kernel records them, and the 4 bytes of padding
/// PERF_SAMPLE_RAW adds (4-byte size + 68 bytes = 72).
fn sys_enter() -> (EventFormat, Vec<u8>) {
    let text = format_file_text(
        "sys_enter",
        22,
        &[
            ("long id", 8, 8, true),
            ("unsigned long args[6]", 16, 48, false),
        ],
        "\"NR %ld (%lx, %lx, %lx, %lx, %lx, %lx)\", REC->id, REC->args[0], REC->args[1], \
         REC->args[2], REC->args[3], REC->args[4], REC->args[5]",
    );
    let mut raw = common_header(22, 4242);
    raw.extend_from_slice(&110i64.to_le_bytes());
    for arg in [
        1u64,
        140_612_290_334_165,
        140_722_793_657_184,
        4096,
        140_612_290_587_264,
        0,
    ] {
        raw.extend_from_slice(&arg.to_le_bytes());
    }
    raw.extend_from_slice(&[0; 4]);
    (format_from_text(&text), raw)
}

/// CPU time of the calling thread, as a criterion measurement (values in ns, so the
/// wall-clock formatter applies).
struct ThreadCpuTime;

fn thread_cpu_now() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the clock id is a constant the kernel
    // supports on every Linux since 2.6.12.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID) failed");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

static WALL: WallTime = WallTime;

impl Measurement for ThreadCpuTime {
    type Intermediate = Duration;
    type Value = Duration;

    fn start(&self) -> Duration {
        thread_cpu_now()
    }
    fn end(&self, start: Duration) -> Duration {
        thread_cpu_now().saturating_sub(start)
    }
    fn add(&self, a: &Duration, b: &Duration) -> Duration {
        *a + *b
    }
    fn zero(&self) -> Duration {
        Duration::ZERO
    }
    fn to_f64(&self, value: &Duration) -> f64 {
        value.as_nanos() as f64
    }
    fn formatter(&self) -> &dyn ValueFormatter {
        WALL.formatter()
    }
}

fn bench_lines<M: Measurement>(
    c: &mut Criterion<M>,
    clock: &str,
    system: &str,
    name: &str,
    (format, raw): (EventFormat, Vec<u8>),
) {
    let meta = RecordMeta {
        time_unix_ns: None,
        cpu: 1,
        pid: 4242,
        tid: 4243,
        system,
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
    let mut group = c.benchmark_group(format!("{clock}/json_line"));
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
    // The same lines through the recorder's path: names and keys rendered once.
    let prepared = PreparedFormat::new(&format, meta.system, meta.event, meta.format_id);
    let mut group = c.benchmark_group(format!("{clock}/json_prepared"));
    group.throughput(Throughput::Elements(BATCH));
    group.bench_function(name, |b| {
        b.iter(|| {
            out.clear();
            for _ in 0..BATCH {
                time += 1_000;
                let stamp = RecordStamp {
                    time_unix_ns: Some(time),
                    cpu: meta.cpu,
                    pid: meta.pid,
                    tid: meta.tid,
                };
                writer.write_prepared(&mut out, &stamp, black_box(&prepared), black_box(&raw));
            }
            black_box(out.len())
        })
    });
    group.finish();
}

fn benches<M: Measurement>(c: &mut Criterion<M>, clock: &str) {
    let ue = "user_events";
    bench_lines(c, clock, ue, "a_user_event_8_fields", user_event());
    bench_lines(c, clock, ue, "b_sched_switch", sched_switch());
    bench_lines(c, clock, ue, "c_four_200b_escaped_strings", string_heavy());
    bench_lines(c, clock, "raw_syscalls", "d_sys_enter", sys_enter());

    // Decoding alone (no JSON) for event (a), to split the cost.
    let (format, raw) = user_event();
    let mut group = c.benchmark_group(format!("{clock}/decode_only"));
    group.throughput(Throughput::Elements(BATCH));
    group.bench_function("a_user_event_8_fields", |b| {
        b.iter(|| {
            let mut n = 0usize;
            for _ in 0..BATCH {
                for field in &format.fields {
                    n += matches!(
                        decode_field(field, black_box(&raw), Endian::Little),
                        uevrec_parsers::Value::Error(_)
                    ) as usize;
                }
            }
            black_box(n)
        })
    });
    group.finish();
}

fn wall(c: &mut Criterion) {
    benches(c, "wall");
}

fn cpu(c: &mut Criterion<ThreadCpuTime>) {
    benches(c, "cpu");
}

criterion_group!(wall_clock, wall);
criterion_group! {
    name = cpu_time;
    config = Criterion::default().with_measurement(ThreadCpuTime);
    targets = cpu
}
criterion_main!(wall_clock, cpu_time);
