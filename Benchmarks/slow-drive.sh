#!/usr/bin/env bash
# Benchmarks/slow-drive.sh — how long after SIGTERM `dl` ends when the drive is slower than the network (issue #48).
#
#   Benchmarks/slow-drive.sh RUNS RATE DL...   # e.g. 3 1500000 ./dl-before ./dl-after
#
# Serves a 96 MiB file from nginx on loopback; each `dl` (interleaved, RUNS rounds, `-x 1` then `-x 4`) downloads it
# into /tmp with its writes to that drive held to RATE bytes a second by a cgroup (v1 blkio, as root), gets SIGTERM
# 3 s in, and the seconds to its exit are printed with the dirty page cache at the signal. Linux, root.
set -euo pipefail
RUNS=${1:?runs}; RATE=${2:?bytes a second}; shift 2
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/nginx-workspace.sh"
make_workspace slow-drive
head -c $((96 << 20)) /dev/urandom > "$WORK/docs/big.bin"
serve_docs
GROUP=/sys/fs/cgroup/blkio/downloader-slow-drive-$$
mkdir "$GROUP"
trap 'kill $NGINX_PID 2>/dev/null; rmdir "$GROUP" 2>/dev/null; rm -rf "$WORK"' EXIT
DEVICE=$(mountpoint -d "$(df --output=target /tmp | tail -1)")
# A partition's throttle goes to its drive.
if [[ -e /sys/dev/block/$DEVICE/partition ]]; then DEVICE=$(cat "$(readlink -f /sys/dev/block/$DEVICE)/../dev"); fi
echo "$DEVICE $RATE" > "$GROUP/blkio.throttle.write_bps_device"
sleep 0.5
for round in $(seq "$RUNS"); do
    for dl in "$@"; do
        for x in 1 4; do
            out=$(mktemp -d /tmp/downloader-slow-drive-out.XXXXXX)
            sync
            bash -c "echo \$\$ > $GROUP/cgroup.procs; exec $dl -q -x $x --dir $out http://127.0.0.1:$NGINX_PORT/big.bin" \
                2> "$WORK/logs/dl.err" &
            pid=$!
            sleep 3
            dirty=$(awk '/^Dirty:/ {print $2}' /proc/meminfo)
            start=$(date +%s.%N)
            kill -TERM $pid
            wait $pid || true
            printf '%s\t-x %s\t%.2f s\tdirty %s kB\t%s\n' "$dl" "$x" "$(echo "$(date +%s.%N) - $start" | bc)" "$dirty" \
                "$(head -c 60 "$WORK/logs/dl.err")"
            rm -rf "$out"
        done
    done
done
