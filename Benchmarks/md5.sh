#!/usr/bin/env bash
# MD5 throughput: Downloader's MD5 (release build) against GNU md5sum on the same cached file, interleaved.
#
#   Benchmarks/md5.sh [SIZE_MiB=1024] [RUNS=7]
#
# Prints a Markdown table of medians, min–max and the ratio to md5sum (whole-process wall time for both).
set -euo pipefail
cd "$(dirname "$0")"
size_mib=${1:-1024}
runs=${2:-7}
file=${TMPDIR:-/tmp}/downloader-md5-bench-${size_mib}M.bin

swift build -c release --product downloader-bench >&2
bench="$(swift build -c release --show-bin-path)/downloader-bench"

if [[ ! -f "$file" || $(stat -c %s "$file") -ne $((size_mib << 20)) ]]; then
    head -c $((size_mib << 20)) /dev/urandom > "$file"
fi
cat "$file" > /dev/null  # warm the page cache

expected=$(md5sum "$file" | cut -d' ' -f1)
ours=() theirs=()
wall() { local s e; s=$(date +%s%N); "$@" > /tmp/md5-bench-out; e=$(date +%s%N); echo $(((e - s) / 1000)); }
for ((i = 0; i < runs; i++)); do
    theirs+=("$(wall md5sum "$file")")
    [[ $(cut -d' ' -f1 /tmp/md5-bench-out) == "$expected" ]] || { echo "md5sum disagrees" >&2; exit 1; }
    ours+=("$(wall "$bench" md5 "$file")")
    [[ $(cut -d' ' -f1 /tmp/md5-bench-out) == "$expected" ]] || { echo "downloader-bench gave a wrong digest" >&2; exit 1; }
done

python3 - "$size_mib" "${ours[*]}" "${theirs[*]}" <<'PY'
import statistics, sys
size = int(sys.argv[1]); ours = [int(x) / 1e6 for x in sys.argv[2].split()]; theirs = [int(x) / 1e6 for x in sys.argv[3].split()]
mo, mt = statistics.median(ours), statistics.median(theirs)
print(f"| contender | median s | min–max s | MiB/s | ratio to md5sum |")
print(f"|---|---|---|---|---|")
print(f"| Downloader MD5 (release) | {mo:.3f} | {min(ours):.3f}–{max(ours):.3f} | {size/mo:.0f} | {mo/mt:.2f} |")
print(f"| GNU md5sum | {mt:.3f} | {min(theirs):.3f}–{max(theirs):.3f} | {size/mt:.0f} | 1.00 |")
print(f"\n{len(ours)} interleaved runs each, {size} MiB cached file, digests checked every run.")
PY
