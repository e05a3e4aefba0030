#!/usr/bin/env bash
# Benchmarks/ab.sh — an A/B of two dl binaries on loopback: 1 GiB from nginx (sendfile, page cache), interleaved
# runs, median wall seconds and median peak RSS of each, every output MD5-checked.
#
#   Benchmarks/ab.sh OLD_DL NEW_DL [RUNS=5] [EXTRA dl FLAGS…]
set -uo pipefail
OLD=$1
NEW=$2
RUNS=${3:-5}
shift 3 2> /dev/null || shift $#
source "$(dirname "$0")/nginx-workspace.sh"
make_workspace ab
head -c $((1 << 30)) /dev/urandom > "$WORK/docs/1g.bin"
SUM=$(md5sum < "$WORK/docs/1g.bin" | cut -d' ' -f1)
serve_docs
PORT=$NGINX_PORT
trap 'kill $NGINX_PID 2>/dev/null; wait 2>/dev/null; rm -rf "$WORK"' EXIT
sleep 1
cat "$WORK/docs/1g.bin" > /dev/null
declare -A WALL RSS
for ((run = 1; run <= RUNS; run++)); do
    for name in old new; do
        bin=$OLD
        [[ $name == new ]] && bin=$NEW
        rm -rf "$WORK/out"
        /usr/bin/time -f '%e %M' -o "$WORK/time" "$bin" -q "$@" -P "$WORK/out" "http://127.0.0.1:$PORT/1g.bin" > /dev/null
        [[ $(md5sum < "$WORK/out/1g.bin" | cut -d' ' -f1) == "$SUM" ]] || echo "$name: wrong MD5" >&2
        read -r wall rss < "$WORK/time"
        WALL[$name]+="$wall "
        RSS[$name]+="$((rss / 1024)) "
    done
done
for name in old new; do
    printf '%-4s %6.2f s  %4d MB peak RSS  (wall: %s)\n' "$name" "$(echo "${WALL[$name]}" | median)" \
        "$(echo "${RSS[$name]}" | median)" "${WALL[$name]}"
done
