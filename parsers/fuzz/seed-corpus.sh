#!/bin/sh
# Fill parsers/fuzz/corpus/ with seed inputs (the corpus directory is not committed).
#   format_file: the 2,751 real format files of formats0.zip
#                ($UEVREC_CORPUS_DIR, else <project root>/../shared/corpus).
# Other targets start from libFuzzer's own empty input.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
corpus_dir=${UEVREC_CORPUS_DIR:-$here/../../../shared/corpus}
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
