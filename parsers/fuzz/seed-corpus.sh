#!/bin/sh
# Fill parsers/fuzz/corpus/ with seed inputs (the corpus directory is not committed).
#   format_file: the 2,751 real format files of formats0.zip
#                ($UEVREC_CORPUS_DIR, else <project root>/../shared/corpus).
#   register:    a few register commands in every form (kernel-facts.md examples).
#   eventheader: the 374 records of EventHeaderInterceptorLE64.dat, as `name NUL data`.
#   ftrace_page: the ring-buffer pages of tests/data/trace-dat/*.dat.
#   cgroup_path: cgroup paths of Docker, podman, units and both kubelet drivers, with
#                kubelet names.
#   otlp_frames: OTLP export frames of every signal and encoding, with and without pods.
#   callchain:   kernel, user and guest chains in both byte orders, and each error.
# The structured targets (decode_record, json_line, perf_sample) start from libFuzzer's
# own empty input.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
reg=$here/corpus/register
mkdir -p "$reg"
i=0
for cmd in \
    'test u32 a; char[8] b; __rel_loc char[] msg; __data_loc char[] dmsg' \
    'u:test u32 a;char[8] b' \
    '-:test u32 a; char[8] b' \
    'e s8 a; s16 b; s32 c; s64 d; u8 e; u16 f; u64 g; int h; unsigned int i; short j' \
    'e unsigned short a; char b; unsigned char c; unsigned char[1024] d; char[0x10] e' \
    'e struct foo f 24; __data_loc u32[] arr; __rel_loc u8[] bytes; __data_loc unsigned char[] u' \
    'bare' \
    'flags:BPF u32 a'; do
    i=$((i + 1))
    printf '%s' "$cmd" >"$reg/seed-$i"
done
corpus_dir=${UEVREC_CORPUS_DIR:-$here/../../../shared/corpus}
dat=$corpus_dir/EventHeaderInterceptorLE64.dat
if [ -f "$dat" ]; then
    eh=$here/corpus/eventheader
    mkdir -p "$eh"
    # Each record: u32 LE size (including itself), then `name NUL data`.
    python3 - "$dat" "$eh" <<'PY'
import struct, sys
data = open(sys.argv[1], "rb").read()
at = n = 0
while at + 4 <= len(data):
    size = struct.unpack_from("<I", data, at)[0]
    if size < 4:
        break
    n += 1
    open(f"{sys.argv[2]}/seed-{n}", "wb").write(data[at + 4:at + size])
    at += size
print(f"seed-corpus.sh: {n} EventHeader records in {sys.argv[2]}")
PY
fi
# perf_data: 3 parameter bytes (chunk, order bound, count: see the target) + cut-down
# corpus perf.data files (pipe mode: header, attrs, features, tracing data and the first 40 samples;
# file mode: its first 40 samples, the sections moved up), small enough for
# libFuzzer's default max_len guess.
if [ -d "$corpus_dir/perf-data" ]; then
    mkdir -p "$here/corpus/perf_data"
    python3 - "$corpus_dir/perf-data" "$here/corpus/perf_data" <<'PY'
import struct, sys
src, out = sys.argv[1], sys.argv[2]
pipe = open(f"{src}/LinuxTracepoints-pipe.data", "rb").read()
def records(buf, pos, end):
    while pos < end:
        kind, size = struct.unpack_from("<IxxH", buf, pos)
        extra = struct.unpack_from("<I", buf, pos + 8)[0] if kind == 66 else 0
        yield kind, buf[pos:pos + size + extra]
        pos += size + extra
def cut_down(buf, pos, end, keep):
    out, samples = b"", 0
    for kind, rec in records(buf, pos, end):
        if kind in keep and samples < 40:
            out += rec
            samples += kind == 9
    return out
small_pipe = pipe[:16] + cut_down(pipe, 16, len(pipe), {9, 64, 66, 68, 80})
for i, prefix in enumerate([b"\x07\x03\x00", b"\x00\x00\x05", b"\xff\xff\x00"]):
    open(f"{out}/seed-pipe-{i}", "wb").write(prefix + small_pipe)
f = open(f"{src}/LinuxTracepoints-perf.data", "rb").read()
hdr = bytearray(f[:104])
attr_size, a_off, a_size, d_off, d_size = struct.unpack_from("<QQQQQ", f, 16)
end = d_off + d_size
data = cut_down(f, d_off, end, {9, 68})
bits = int.from_bytes(f[72:104], "little")
feats = [b for b in range(1, 256) if bits >> b & 1]
table = [struct.unpack_from("<QQ", f, end + 16 * k) for k in range(len(feats))]
new_end = d_off + len(data)
body, fpos = b"", new_end + 16 * len(feats)
new_table = b""
for off, size in table:
    new_table += struct.pack("<QQ", fpos + len(body), size)
    body += f[off:off + size]
struct.pack_into("<QQ", hdr, 40, d_off, len(data))
seed = bytes(hdr) + f[104:d_off] + data + new_table + body
open(f"{out}/seed-file-0", "wb").write(b"\x07\x03\x00" + seed)
PY
    echo "seed-corpus.sh: $(ls "$here/corpus/perf_data" | wc -l) files in $here/corpus/perf_data"
fi
# Truncated and unfinished inputs (committed, made by parsers/tests/perf_data_truncation.rs
# and trace_dat_truncation.rs): an unfinished `record --raw` perf.data whole and cut, a
# finished one cut inside its trailer; a small trace.dat whole, cut inside a page and
# inside a page header. Plus the real trace.dat files of the tests.
for target in perf_data trace_dat; do
    mkdir -p "$here/corpus/$target"
    for f in "$here/seeds/$target"/*; do
        cp "$f" "$here/corpus/$target/seed-cut-$(basename "$f")"
    done
done
for f in "$here/../tests/data/trace-dat"/*.dat; do
    cp "$f" "$here/corpus/trace_dat/$(basename "$f")"
done
echo "seed-corpus.sh: truncated/unfinished seeds in $here/corpus/{perf_data,trace_dat}"
# ftrace_page: the 4 KiB pages of the test trace.dat files (a layout byte 0: little
# endian, 8-byte commit; a cut at 2048), each page that looks like one (committed data
# that fits, a timestamp).
mkdir -p "$here/corpus/ftrace_page"
python3 - "$here/../tests/data/trace-dat" "$here/corpus/ftrace_page" <<'PY'
import glob, os, struct, sys
n = 0
for path in sorted(glob.glob(f"{sys.argv[1]}/*.dat")):
    data = open(path, "rb").read()
    for at in range(0, len(data) - 4096 + 1, 4096):
        page = data[at:at + 4096]
        ts, commit = struct.unpack_from("<QQ", page)
        if ts and 0 < commit & ((1 << 27) - 1) <= 4080:
            n += 1
            open(f"{sys.argv[2]}/seed-{os.path.basename(path)}-{at}", "wb").write(b"\x00\x00\x08" + page)
print(f"seed-corpus.sh: {n} ring-buffer pages in {sys.argv[2]}")
PY
# ...and pages of a `record --backend ftrace -g` ring: events followed by their
# kernel_stack and user_stack records (ids 4 and 13, as the target ties them).
cp "$here/seeds/ftrace_page/"* "$here/corpus/ftrace_page/"
# cgroup_path: paths of both kubelet cgroup drivers, containers and units, and kubelet
# names (line 1 the path, then the names).
cg=$here/corpus/cgroup_path
mkdir -p "$cg"
id=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
uid=0f1e2d3c-aaaa-bbbb-cccc-001122334455
uid_=0f1e2d3c_aaaa_bbbb_cccc_001122334455
i=0
for path in \
    "/system.slice/docker-$id.scope" \
    "/docker/$id" \
    "/user.slice/user-1000.slice/session-3.scope" \
    "/system.slice/cron.service" \
    "/machine.slice/libpod-$id.scope/container" \
    "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod$uid_.slice/cri-containerd-$id.scope" \
    "/kubepods.slice/kubepods-pod$uid_.slice/crio-$id.scope" \
    "/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/kubelet-kubepods-besteffort-pod$uid_.slice/docker-$id.scope" \
    "/kubepods/burstable/pod$uid/$id" \
    "/kubepods/pod$uid/crio-$id"; do
    i=$((i + 1))
    printf '%s\nshop_web-0_%s\nweb-0_shop_nginx-%s.log\n' "$path" "$uid" "$id" >"$cg/seed-$i"
done
echo "seed-corpus.sh: $i cgroup paths in $cg"
# otlp_frames: export frames as the writer appends them (parsers/src/otlp/frame.rs):
# logs, traces and metrics, JSON and protobuf, with and without a pod column, one to
# three frames per buffer.
mkdir -p "$here/corpus/otlp_frames"
python3 - "$here/corpus/otlp_frames" <<'PY'
import struct, sys
def text(s):
    b = s.encode()
    return struct.pack("<H", len(b)) + b
def frame(signal, encoding, entries, pods, body):
    meta = struct.pack("<BBIIH", signal, encoding | (0x80 if pods else 0),
                       sum(c for _, c in entries), len(entries), len(entries))
    for name, count in entries:
        meta += text(name) + struct.pack("<I", count)
    for pod in pods:
        meta += text(pod)
    rest = meta + body
    return struct.pack("<I", len(rest)) + rest
frames = [
    frame(0, 1, [("user_events:hello", 3), ("uevrec", 1)], [], b'{"resourceLogs":[]}'),
    frame(0, 0, [("user_events:hello", 2)], ["shop/web-0"], b"\x0a\x02\x12\x00"),
    frame(1, 1, [("user_events:span", 1)], [], b'{"resourceSpans":[]}'),
    frame(2, 0, [("user_events:otlp_metrics", 5), ("sched:x", 1)], ["", "/0f1e2d3c"], b"\x0a\x00"),
    frame(0, 1, [], [], b""),
]
for i, f in enumerate(frames):
    open(f"{sys.argv[1]}/seed-{i}", "wb").write(f)
open(f"{sys.argv[1]}/seed-all", "wb").write(b"".join(frames))
open(f"{sys.argv[1]}/seed-cut", "wb").write(b"".join(frames)[:-7])
print(f"seed-corpus.sh: {len(frames) + 2} export frame buffers in {sys.argv[1]}")
PY
# callchain: a byte-order byte, then chains as the kernel writes them (markers, then
# addresses): kernel then user, user only, guest parts, and one of each error.
mkdir -p "$here/corpus/callchain"
python3 - "$here/corpus/callchain" <<'PY'
import struct, sys
KERNEL, USER = 0xFFFFFFFFFFFFFF80, 0xFFFFFFFFFFFFFE00
GUEST, GUEST_KERNEL, GUEST_USER = 0xFFFFFFFFFFFFF800, 0xFFFFFFFFFFFFF780, 0xFFFFFFFFFFFFF600
chains = {
    "kernel-user": [KERNEL, 0xFFFFFFFF81425010, 0xFFFFFFFF8223CAEF, USER, 0x7EFF9FB0D829, 0x559F7AB8516F, 0x559F7AB8519B],
    "user": [USER, 0x401000, 0x401100, 0x401200],
    "guest": [GUEST, GUEST_KERNEL, 0xFFFFFFFF81000000, GUEST_USER, 0x400000],
    "unknown-marker": [KERNEL, 0xFFFFFFFF81000000, 0xFFFFFFFFFFFFFFF0, 0x401000],
    "out-of-order": [USER, 0x401000, KERNEL, 0xFFFFFFFF81000000],
    "no-context": [0x401000, USER, 0x401100],
}
for name, words in chains.items():
    open(f"{sys.argv[1]}/seed-le-{name}", "wb").write(b"\x00" + struct.pack(f"<{len(words)}Q", *words))
    open(f"{sys.argv[1]}/seed-be-{name}", "wb").write(b"\x01" + struct.pack(f">{len(words)}Q", *words))
print(f"seed-corpus.sh: {2 * len(chains)} callchains in {sys.argv[1]}")
PY
zip=$corpus_dir/formats0.zip
if [ ! -f "$zip" ]; then
    echo "seed-corpus.sh: $zip not found (set UEVREC_CORPUS_DIR); seeds skipped" >&2
    exit 0
fi
out=$here/corpus/format_file
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
unzip -q -o "$zip" -d "$tmp"
# Entry names contain spaces; libFuzzer only needs distinct file names.
n=0
find "$tmp" -type f | while IFS= read -r f; do
    n=$((n + 1))
    cp "$f" "$out/seed-$n"
done
echo "seed-corpus.sh: $(ls "$out" | wc -l) files in $out"
