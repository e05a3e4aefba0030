#!/usr/bin/env bash
# Benchmarks/wan.sh — downloads through Benchmarks' latency-proxy (a wide-area link made of loopback: each direction
# delayed by half the round trip, one rate cap shared by every connection), from nginx serving random files.
# Interleaved runs of curl, wget, aria2c (when installed) and dl (release); prints each tool's median and its ratio
# to curl's.
#
#   Benchmarks/wan.sh [RTT_MS=40] [RATE_MIB_S=100] [RUNS=5]
set -uo pipefail
RTT=${1:-40}
RATE=${2:-100}
RUNS=${3:-5}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DL="$("$ROOT/Examples/dl/build-release.sh")"  # dl as shipped (the Swift runtime linked in)
swiftc -O -swift-version 6 "$ROOT/Benchmarks/Sources/latency-proxy/main.swift" -o /tmp/latency-proxy >&2
# The platform's floor for one small file: URLSession alone, one data task, no disk (Benchmarks' urlsession-floor).
HERE="$ROOT/Benchmarks"
swift build -c release --package-path "$HERE" --product urlsession-floor >&2 \
    || swift build -c release --package-path "$HERE" --product urlsession-floor >&2
FLOOR="$(swift build -c release --package-path "$HERE" --show-bin-path)/urlsession-floor"
source "$ROOT/Benchmarks/nginx-workspace.sh"

make_workspace wan
mkdir -p "$WORK/docs/small"
head -c $((256 << 20)) /dev/urandom > "$WORK/docs/big.bin"
for i in $(seq 1 100); do head -c $((200 << 10)) /dev/urandom > "$WORK/docs/small/f$i.bin"; done
serve_docs
PROXY=$(free_port)
/tmp/latency-proxy "$PROXY" "$NGINX_PORT" "$RTT" "$RATE" > /dev/null &
RELAY=$!
cleanup() { kill $NGINX_PID $RELAY 2>/dev/null; wait 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT
sleep 1
BASE="http://127.0.0.1:$PROXY"
SMALL=()
for i in $(seq 1 100); do SMALL+=("$BASE/small/f$i.bin"); done

declare -A CMD
CMD[curl]="curl -s -o \$OUT/big.bin $BASE/big.bin"
CMD[wget]="wget -q -O \$OUT/big.bin $BASE/big.bin"
CMD[dl]="$DL -q -P \$OUT $BASE/big.bin"
CMD[dl-x4]="$DL -q -x 4 -P \$OUT $BASE/big.bin"
CMD[curl-200k]="curl -s -o \$OUT/f1.bin $BASE/small/f1.bin"
CMD[dl-200k]="$DL -q -P \$OUT $BASE/small/f1.bin"
CMD[floor-200k]="$FLOOR $BASE/small/f1.bin discard"
CMD[dl-100x200k]="$DL -q --max-active 4 -P \$OUT ${SMALL[*]}"
NAMES=(curl wget dl dl-x4 curl-200k dl-200k floor-200k dl-100x200k)
# DL_DYNAMIC=1: also dl as `swift build -c release` links it (against the toolchain's shared libraries).
if [[ -n "${DL_DYNAMIC:-}" ]]; then
    swift build --package-path "$ROOT/Examples/dl" -c release --product dl >&2
    DYNAMIC="$(swift build --package-path "$ROOT/Examples/dl" -c release --show-bin-path)/dl"
    CMD[dl-dynamic-200k]="$DYNAMIC -q -P \$OUT $BASE/small/f1.bin"
    NAMES+=(dl-dynamic-200k)
fi
# DL_BASELINE=PATH: another dl binary (an older tree's release build) in the same interleaved runs, for an A/B.
if [[ -n "${DL_BASELINE:-}" ]]; then
    CMD[base]="$DL_BASELINE -q -P \$OUT $BASE/big.bin"
    CMD[base-200k]="$DL_BASELINE -q -P \$OUT $BASE/small/f1.bin"
    CMD[base-100x200k]="$DL_BASELINE -q --max-active 4 -P \$OUT ${SMALL[*]}"
    NAMES+=(base base-200k base-100x200k)
fi
if command -v aria2c > /dev/null; then
    CMD[aria2c]="aria2c -q -x1 -s1 --allow-overwrite=true -d \$OUT -o big.bin $BASE/big.bin"
    CMD[aria2c-x4]="aria2c -q -x4 -s4 --allow-overwrite=true -d \$OUT -o big.bin $BASE/big.bin"
    CMD[aria2c-j4]="aria2c -q -Z -j4 -d \$OUT ${SMALL[*]}"
    NAMES+=(aria2c aria2c-x4 aria2c-j4)
fi

# A one-file row lasts a tenth of a second, where a scheduling hiccup is a large part: those rows run SMALL_REPEAT
# times per run (still interleaved), so their medians are of RUNS × SMALL_REPEAT.
SMALL_REPEAT=${SMALL_REPEAT:-4}
declare -A TIMES
for ((run = 1; run <= RUNS; run++)); do
    for name in "${NAMES[@]}"; do
        repeat=1
        [[ "$name" == *-200k ]] && repeat=$SMALL_REPEAT
        for ((i = 0; i < repeat; i++)); do
            OUT="$WORK/out"
            rm -rf "$OUT" && mkdir -p "$OUT"
            start=$(date +%s.%N)
            eval "${CMD[$name]}" > /dev/null 2>&1 || echo "$name failed" >&2
            end=$(date +%s.%N)
            TIMES[$name]+="$(echo "$end - $start" | bc) "
        done
    done
done
echo "link: ${RTT} ms round trip, ${RATE} MiB/s shared; $RUNS interleaved runs ($SMALL_REPEAT each for one file);" \
    "medians in seconds"
CURL=$(echo "${TIMES[curl]}" | median)
CURL_SMALL=$(echo "${TIMES[curl-200k]}" | median)
for name in "${NAMES[@]}"; do
    m=$(echo "${TIMES[$name]}" | median)
    base=$CURL
    [[ "$name" == *200k* ]] && base=$CURL_SMALL
    printf '%-14s %7.3f s  %5.2fx curl  (runs: %s)\n' "$name" "$m" "$(echo "$m / $base" | bc -l)" "${TIMES[$name]}"
done
