#!/usr/bin/env bash
# Benchmarks/lists.sh "SIZES" RUNS — lists of many small files (issue #34): `dl -j 16 -i LIST` against
# `aria2c -j 16 -i LIST` and the platform's floor (`urlsession-many LIST 16`: URLSession alone, bodies discarded, no
# disk; `floor-tuned`: the same with FLOOR_TUNED=1, configured as the library configures its session; `floor-writes`:
# floor-tuned writing each body to its own file with FLOOR_WRITES, the least a downloader that keeps files does;
# `floor-durable`: floor-writes with FLOOR_DURABLE=1, adding by hand the file-system calls the library makes for each
# file so that no crash leaves a wrong file: temporary name, attributes, the journal's placement line, the move;
# `floor-async`: floor-durable with FLOOR_ASYNC=1, each download a child task suspended on a continuation, with an
# actor's entry: what Swift concurrency costs a file; `floor-product`: floor-async with FLOOR_PRODUCT=1, adding
# receipts in the actor, the MD5 and the journal's state and removal lines: the required work done plainly),
# interleaved, RUNS times per size (`dl` is the shipped build, Examples/dl/build-release.sh; `dl-dynamic` the same
# code as `swift build -c release` links it, against the toolchain's shared libraries), on loopback nginx serving one
# 1 KiB file under every path. Prints the medians of wall time, peak RSS and CPU (user + sys) per tool and size.
# DL_BASELINE=PATH adds another dl binary.
# Each run writes its files into a new folder on a tmpfs (LISTS_ON_DISK=1: in /tmp), removed afterwards: on ext4,
# creating thousands of files right after thousands were deleted costs more in the kernel's inode allocator
# (`recently_deleted`, 76 % of the samples of a `perf record` here) than all the rest, for every tool alike.
set -euo pipefail
cd "$(dirname "$0")"
SIZES=${1:-"2000 20000 100000"}
RUNS=${2:-3}
source ./nginx-workspace.sh
swift build -c release --product urlsession-many > /dev/null
DL=$(../Examples/dl/build-release.sh 2> /dev/null)  # dl as shipped (the Swift runtime linked in)
(cd ../Examples/dl && swift build -c release --product dl > /dev/null)
DL_DYNAMIC=$(cd ../Examples/dl && swift build -c release --show-bin-path)/dl
FLOOR=$(swift build -c release --show-bin-path)/urlsession-many
command -v aria2c > /dev/null || apt-get install -y -q aria2 > /dev/null

make_workspace lists
serve_one_file
OUTS=$WORK
if [ -z "${LISTS_ON_DISK:-}" ]; then
    mkdir -p "$WORK/mnt"
    mount -t tmpfs -o size=16g tmpfs "$WORK/mnt"
    OUTS=$WORK/mnt
fi
trap 'kill $NGINX_PID 2> /dev/null; umount "$WORK/mnt" 2> /dev/null; rm -rf "$WORK"' EXIT
sleep 1

declare -A TOOLS=([dl]="$DL -q -j 16 -P OUT -i LIST" [dl-dynamic]="$DL_DYNAMIC -q -j 16 -P OUT -i LIST"
    [aria2c]="aria2c -q -j 16 -d OUT -i LIST --file-allocation=none"
    [floor]="$FLOOR LIST 16" [floor-tuned]="env FLOOR_TUNED=1 $FLOOR LIST 16"
    [floor-writes]="env FLOOR_TUNED=1 FLOOR_WRITES=OUT $FLOOR LIST 16"
    [floor-durable]="env FLOOR_TUNED=1 FLOOR_WRITES=OUT FLOOR_DURABLE=1 $FLOOR LIST 16"
    [floor-async]="env FLOOR_TUNED=1 FLOOR_WRITES=OUT FLOOR_DURABLE=1 FLOOR_ASYNC=1 $FLOOR LIST 16"
    [floor-product]="env FLOOR_TUNED=1 FLOOR_WRITES=OUT FLOOR_DURABLE=1 FLOOR_ASYNC=1 FLOOR_PRODUCT=1 $FLOOR LIST 16")
ORDER="dl dl-dynamic aria2c floor floor-tuned floor-writes floor-durable floor-async floor-product"
if [ -n "${DL_BASELINE:-}" ]; then
    TOOLS[dl-baseline]="$DL_BASELINE -q -j 16 -P OUT -i LIST"
    ORDER="dl dl-dynamic dl-baseline aria2c floor floor-tuned floor-writes floor-durable floor-async floor-product"
fi

echo "| list | tool | time (s) | files/s | peak RSS (MB) | CPU (s) | CPU per file (ms) | runs |"
echo "|---|---|---|---|---|---|---|---|"
for size in $SIZES; do
    list="$WORK/list-$size.txt"
    python3 -c "import sys; sys.stdout.write(''.join(f'http://127.0.0.1:$NGINX_PORT/f/{i}.bin\n' for i in range($size)))" > "$list"
    declare -A times=() rss=() cpu=()
    for run in $(seq "$RUNS"); do
        for tool in $ORDER; do
            out="$OUTS/out-$tool"
            command=${TOOLS[$tool]//OUT/$out}
            command=${command//LIST/$list}
            /usr/bin/time -f "%e %M %U %S" -o "$WORK/time" $command > /dev/null 2> "$WORK/stderr" || {
                echo "$tool failed:" >&2; tail -3 "$WORK/stderr" >&2; }
            read -r wall kb user sys < "$WORK/time"
            if [ "${tool#floor}" = "$tool" ] || [ "$tool" = floor-writes ] || [ "$tool" = floor-durable ] \
                || [ "$tool" = floor-async ] || [ "$tool" = floor-product ]; then
                count=$(find "$out" -maxdepth 1 -type f | wc -l)
                [ "$count" = "$size" ] || echo "$tool: $count files of $size" >&2
            fi
            times[$tool]+="$wall "
            rss[$tool]+="$((kb / 1000)) "
            cpu[$tool]+="$(echo "$user + $sys" | bc) "
            rm -rf "$out"
        done
    done
    for tool in $ORDER; do
        t=$(echo "${times[$tool]}" | median)
        c=$(echo "${cpu[$tool]}" | median)
        echo "| $size | $tool | $t | $(echo "$size / $t" | bc) | $(echo "${rss[$tool]}" | median) | $c |" \
            "$(echo "scale=3; 1000 * $c / $size" | bc) | $RUNS |"
    done
    unset times rss cpu
done
