#!/usr/bin/env bash
# Tests/Reliability/no-length.sh — issue #33's memory case: RUNS (default 20) downloads of a SIZE-byte body (default
# 200 MiB) without Content-Length from a server that ignores Range (the test server, release builds: 0.7–1.3 GB/s on
# loopback), each deleting the file before the next, with the release `dl`'s peak RSS (GNU time). Prints one line per
# run and a summary: completed runs and the peak RSS range. A run counts as over when its peak is above LIMIT MB
# (default 64).
#
#   Tests/Reliability/no-length.sh [RUNS] [SIZE] [LIMIT]
set -euo pipefail
RUNS=${1:-20}
SIZE=${2:-209715200}
LIMIT=${3:-64}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)

DL="$("$ROOT/Examples/dl/build-release.sh")"  # dl as shipped
swift build --package-path "$ROOT" -c release --product http-test-server >&2
BIN=$(swift build --package-path "$ROOT" -c release --show-bin-path)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/downloader-no-length.XXXXXX")
coproc SERVER { "$BIN/http-test-server" --seconds 1800; }
SERVER_IN=${SERVER[1]}
read -r PORT <&"${SERVER[0]}"
cleanup() { exec {SERVER_IN}>&- 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT

completed=0 over=0 low= high=
for ((run = 1; run <= RUNS; run++)); do
    url="http://127.0.0.1:$PORT/bytes/nolength$run?size=$SIZE&length=none&norange=1"
    status=0
    /usr/bin/time -f "%M" -o "$WORK/rss" "$DL" -q --dir "$WORK/out" "$url" > /dev/null 2> "$WORK/err" || status=$?
    rss=$(( $(tail -1 "$WORK/rss") / 1024 ))
    [[ $status == 0 ]] && completed=$((completed + 1))
    (( rss > LIMIT )) && over=$((over + 1))
    [[ -z $low || $rss -lt $low ]] && low=$rss
    [[ -z $high || $rss -gt $high ]] && high=$rss
    echo "run $run: exit $status, peak RSS $rss MB $(head -c 200 "$WORK/err" | tr '\n' ' ')"
    rm -rf "$WORK/out"
done
echo "no-length: $completed of $RUNS completed, peak RSS $low–$high MB, $over over $LIMIT MB"
