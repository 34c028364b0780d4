#!/bin/sh
# Fill parsers/fuzz/corpus/ with seed inputs (the corpus directory is not committed).
#   format_file: the 2,751 real format files of formats0.zip
#                ($UEVREC_CORPUS_DIR, else <project root>/../shared/corpus).
#   register:    a few register commands in every form (kernel-facts.md examples).
#   eventheader: the 374 records of EventHeaderInterceptorLE64.dat, as `name NUL data`.
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
