#!/usr/bin/env bash
# Tests/Reliability/crash-loop.sh — runs `dl` over 10 throttled downloads, kills it with SIGKILL at random moments
# KILLS times (default 20), then lets it finish, and checks: every file's MD5, that the receipts load after every
# kill (`dl --list`), and how many bytes the server sent in all compared with the files' total size.
#
#   Tests/Reliability/crash-loop.sh [KILLS] [SEED]
set -euo pipefail
KILLS=${1:-20}
SEED=${2:-1}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
RANDOM=$SEED

swift build --package-path "$ROOT/Examples/dl" --product dl >&2
DL="$(swift build --package-path "$ROOT/Examples/dl" --show-bin-path)/dl"
swift build --package-path "$ROOT" --product http-test-server >&2 2>/dev/null || swift build --package-path "$ROOT" --target http-test-server >&2
BIN=$(swift build --package-path "$ROOT" --show-bin-path)
WORK=$(mktemp -d /tmp/downloader-crash-loop.XXXXXX)
coproc SERVER { "$BIN/http-test-server" --seconds 1800; }
SERVER_IN=${SERVER[1]}
read -r PORT <&"${SERVER[0]}"
cleanup() { exec {SERVER_IN}>&- 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT

SIZE=2000000
URLS=()
for i in $(seq 0 9); do URLS+=("http://127.0.0.1:$PORT/bytes/crash$i?size=$SIZE&rate=2000000"); done

survived=0
for ((kill = 1; kill <= KILLS; kill++)); do
    "$DL" --quiet --dir "$WORK/out" "${URLS[@]}" > /dev/null 2>&1 &
    pid=$!
    sleep "0.$((RANDOM % 9 + 1))"  # a random moment: this is the fault being injected, not synchronisation
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    "$DL" --list --dir "$WORK/out" > /dev/null || { echo "receipts failed to load after kill $kill" >&2; exit 1; }
    survived=$((survived + 1))
done
"$DL" --quiet --dir "$WORK/out" "${URLS[@]}" > "$WORK/paths.txt"

corrupt=0
for i in $(seq 0 9); do
    expected=$(curl -s "http://127.0.0.1:$PORT/bytes/crash$i?size=$SIZE" | md5sum | cut -d' ' -f1)
    actual=$(md5sum "$WORK/out/crash$i" | cut -d' ' -f1)
    [[ "$expected" == "$actual" ]] || { corrupt=$((corrupt + 1)); echo "corrupt: crash$i" >&2; }
done
echo "kills survived: $survived/$KILLS; files: 10; corrupt: $corrupt; paths printed: $(wc -l < "$WORK/paths.txt")"
[[ $corrupt -eq 0 && $(wc -l < "$WORK/paths.txt") -eq 10 ]]
