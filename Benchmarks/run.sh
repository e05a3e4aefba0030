#!/usr/bin/env bash
# Benchmarks/run.sh — Downloader side by side with curl, wget, aria2c and AsyncHTTPClient, in one run.
#
#   Benchmarks/run.sh            # 5 interleaved runs per contender; writes ../BENCHMARKS.md
#   RUNS=3 Benchmarks/run.sh     # fewer runs
#   NO_WRITE=1 Benchmarks/run.sh # print the report only
#
# Installs what it needs from Debian's packages (nginx, curl, wget, aria2, time), serves generated files from nginx
# on 127.0.0.1 (sendfile on, its own config in a temporary directory, an access log that records every Range and
# the bytes sent), runs every contender interleaved (A B C A B C …), checks every output's MD5, and reports medians,
# min–max and ratios. Wall time, CPU time (user + system) and peak RSS come from /usr/bin/time.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
RUNS=${RUNS:-5}

log() { printf '\n== %s\n' "$*" >&2; }

# --- tools -----------------------------------------------------------------------------------------------------
missing=()
for tool in nginx curl wget aria2c md5sum sha256sum sha1sum python3; do command -v "$tool" >/dev/null || missing+=("$tool"); done
[[ -x /usr/bin/time ]] || missing+=(time)
if ((${#missing[@]})); then
    log "installing: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq nginx-light curl wget aria2 time python3 coreutils >/dev/null \
        || apt-get install -y -qq nginx curl wget aria2 time python3 coreutils >/dev/null
fi

WORK=$(mktemp -d /tmp/downloader-bench.XXXXXX)
chmod 755 "$WORK"  # nginx's workers run as an unprivileged user
NGINX_PID=
cleanup() {
    [[ -n "$NGINX_PID" ]] && kill "$NGINX_PID" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT

# --- builds ----------------------------------------------------------------------------------------------------
log "building release products"
DL="$("$ROOT/Examples/dl/build-release.sh")"  # dl as shipped (the Swift runtime linked in)
# A path dependency's added or deleted source files confuse SwiftPM's cached build of it ("missing inputs"): build
# the library afresh inside the Benchmarks package (its peers stay cached), and retry once.
rm -rf "$HERE"/.build/*/release/Downloader.build "$HERE"/.build/*/release/description.json
swift build -c release --package-path "$HERE" >&2 || swift build -c release --package-path "$HERE" >&2
BIN="$(swift build -c release --package-path "$HERE" --show-bin-path)"

# --- data and server -------------------------------------------------------------------------------------------
log "generating files in $WORK/www"
mkdir -p "$WORK/www/small" "$WORK/logs"
head -c $((1 << 30)) /dev/urandom > "$WORK/www/1g.bin"
head -c $((100 << 20)) /dev/urandom > "$WORK/www/100m.bin"
head -c $((64 << 20)) /dev/urandom > "$WORK/www/64m.bin"
head -c $((2 << 20)) /dev/urandom > "$WORK/www/2m.bin"
python3 - "$WORK/www/small" <<'PY'
import os, sys
for i in range(1000):
    with open(os.path.join(sys.argv[1], f"f{i:04d}.bin"), "wb") as f:
        f.write(os.urandom(16384))
PY
chmod -R a+rX "$WORK/www"
MD5_1G=$(md5sum "$WORK/www/1g.bin" | cut -d' ' -f1)
MD5_100M=$(md5sum "$WORK/www/100m.bin" | cut -d' ' -f1)
MD5_64M=$(md5sum "$WORK/www/64m.bin" | cut -d' ' -f1)
(cd "$WORK/www/small" && md5sum f*.bin) > "$WORK/small.md5"

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
PORT2=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat > "$WORK/nginx.conf" <<NGINX
worker_processes 2;
daemon off;
pid $WORK/nginx.pid;
error_log $WORK/logs/error.log;
events { worker_connections 4096; }
http {
    log_format bench '\$request_method \$uri \$status \$body_bytes_sent "\$http_range"';
    access_log $WORK/logs/access.log bench;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 100000;
    client_body_temp_path $WORK/tmp-body;
    proxy_temp_path $WORK/tmp-proxy;
    fastcgi_temp_path $WORK/tmp-fastcgi;
    uwsgi_temp_path $WORK/tmp-uwsgi;
    scgi_temp_path $WORK/tmp-scgi;
    server {
        listen 127.0.0.1:$PORT;
        root $WORK/www;
        location /slow/ { alias $WORK/www/; limit_rate 200m; }
        location /trickle/ { alias $WORK/www/; limit_rate 200k; }
    }
    # A server that caps each connection (each request) at 4 MiB/s. Small send buffers and sendfile chunks make the
    # cap hold from a response's first byte: with loopback's autotuned buffers nginx hands a whole 2 MiB range to
    # the kernel before its limit starts, and Range windows would escape the cap.
    server {
        listen 127.0.0.1:$PORT2 sndbuf=64k;
        sendfile_max_chunk 64k;
        location /capped/ { alias $WORK/www/; limit_rate 4m; }
    }
}
NGINX
nginx -c "$WORK/nginx.conf" -p "$WORK" &
NGINX_PID=$!
for _ in $(seq 50); do curl -sf -o /dev/null "http://127.0.0.1:$PORT/100m.bin" -r 0-0 && break; sleep 0.1; done
BASE="http://127.0.0.1:$PORT"
CAPPED="http://127.0.0.1:$PORT2/capped"
cat "$WORK/www/1g.bin" "$WORK/www/100m.bin" > /dev/null  # warm the page cache
RESULTS="$WORK/results.tsv"
: > "$RESULTS"

# measure WORKLOAD CONTENDER OUTPUT EXPECTED_MD5 -- command...
# Runs the command under /usr/bin/time, checks the output's MD5 and appends one row to results.tsv.
measure() {
    local workload=$1 contender=$2 output=$3 expected=$4
    shift 5
    local timing="$WORK/time.txt"
    if ! /usr/bin/time -f "%e %U %S %M" -o "$timing" "$@" > "$WORK/stdout.txt" 2> "$WORK/stderr.txt"; then
        echo "FAILED: $contender ($workload): $(tail -3 "$WORK/stderr.txt")" >&2
        printf '%s\t%s\tNaN\tNaN\tNaN\tfail\n' "$workload" "$contender" >> "$RESULTS"
        return
    fi
    local ok=ok
    if [[ -n "$expected" ]]; then
        [[ $(md5sum "$output" | cut -d' ' -f1) == "$expected" ]] || ok=WRONG
    fi
    read -r wall user sys rss < <(tail -1 "$timing")
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$workload" "$contender" "$wall" "$(python3 -c "print($user+$sys)")" "$rss" "$ok" >> "$RESULTS"
}

fresh() { rm -rf "$WORK/out"; mkdir -p "$WORK/out"; }

# --- 1. one 1 GiB file -----------------------------------------------------------------------------------------
log "1 GiB: dl, curl, wget, aria2c -x1, aria2c -x4 -s4, AsyncHTTPClient, naive URLSession, URLSession floors ($RUNS runs each)"
for ((run = 1; run <= RUNS; run++)); do
    fresh; measure 1g dl "$WORK/out/1g.bin" "$MD5_1G" -- "$DL" --quiet --dir "$WORK/out" "$BASE/1g.bin"
    fresh; measure 1g "dl -x4" "$WORK/out/1g.bin" "$MD5_1G" -- "$DL" --quiet -x4 --dir "$WORK/out" "$BASE/1g.bin"
    fresh; measure 1g curl "$WORK/out/1g.bin" "$MD5_1G" -- curl -sf -o "$WORK/out/1g.bin" "$BASE/1g.bin"
    fresh; measure 1g wget "$WORK/out/1g.bin" "$MD5_1G" -- wget -q -O "$WORK/out/1g.bin" "$BASE/1g.bin"
    fresh; measure 1g "aria2c -x1" "$WORK/out/1g.bin" "$MD5_1G" -- aria2c -q -x1 --file-allocation=none \
        --allow-overwrite=true -d "$WORK/out" -o 1g.bin "$BASE/1g.bin"
    fresh; measure 1g "aria2c -x4 -s4" "$WORK/out/1g.bin" "$MD5_1G" -- aria2c -q -x4 -s4 --file-allocation=none \
        --allow-overwrite=true -d "$WORK/out" -o 1g.bin "$BASE/1g.bin"
    fresh; measure 1g AsyncHTTPClient "$WORK/out/1g.bin" "$MD5_1G" -- "$BIN/ahc-download" "$BASE/1g.bin" "$WORK/out/1g.bin"
    fresh; measure 1g "naive URLSession" "$WORK/out/1g.bin" "$MD5_1G" -- "$BIN/naive-download" "$BASE/1g.bin" "$WORK/out/1g.bin"
    fresh; measure verify "dl --no-md5" "$WORK/out/1g.bin" "$MD5_1G" -- "$DL" --quiet --no-md5 --dir "$WORK/out" "$BASE/1g.bin"
    measure floor "URLSession, no disk" "" "" -- "$BIN/urlsession-floor" "$BASE/1g.bin" discard
    [[ $(cut -d' ' -f1 "$WORK/stdout.txt") == $((1 << 30)) ]] || sed -i '$ s/\tok$/\tWRONG/' "$RESULTS"
    measure floor "URLSession + MD5, no disk" "" "" -- "$BIN/urlsession-floor" "$BASE/1g.bin" md5
    [[ $(cut -d' ' -f2 "$WORK/stdout.txt") == "$MD5_1G" ]] || sed -i '$ s/\tok$/\tWRONG/' "$RESULTS"
    # Verified contenders: what people run when they want a checked file. Each prints the MD5 it computed.
    for pair in "curl -o f && md5sum f::curl -sf -o OUT/1g.bin URL && md5sum OUT/1g.bin" \
        "curl | tee f | md5sum::curl -sf URL | tee OUT/1g.bin | md5sum" \
        "wget && md5sum::wget -q -O OUT/1g.bin URL && md5sum OUT/1g.bin"; do
        name=${pair%%::*} script=${pair#*::}
        script=${script//OUT/$WORK/out} script=${script//URL/$BASE/1g.bin}
        fresh; measure verified "$name" "$WORK/out/1g.bin" "$MD5_1G" -- bash -c "set -o pipefail; $script"
        [[ $(cut -d' ' -f1 "$WORK/stdout.txt") == "$MD5_1G" ]] || sed -i '$ s/\tok$/\tWRONG/' "$RESULTS"
    done
    fresh; measure verified "aria2c --checksum=md5=" "$WORK/out/1g.bin" "$MD5_1G" -- aria2c -q -x1 \
        --file-allocation=none --allow-overwrite=true --checksum="md5=$MD5_1G" -d "$WORK/out" -o 1g.bin "$BASE/1g.bin"
done

# --- 1b. a slow transfer: the CPU it costs -------------------------------------------------------------------------
SLOW_RUNS=${SLOW_RUNS:-3}
log "2 MiB at 200 KiB/s (nginx limit_rate, about 10 s): CPU of dl, curl, wget, a bare URLSession ($SLOW_RUNS runs each)"
MD5_2M=$(md5sum "$WORK/www/2m.bin" | cut -d' ' -f1)
for ((run = 1; run <= SLOW_RUNS; run++)); do
    fresh; measure slowcpu dl "$WORK/out/2m.bin" "$MD5_2M" -- "$DL" --quiet --dir "$WORK/out" "$BASE/trickle/2m.bin"
    fresh; measure slowcpu curl "$WORK/out/2m.bin" "$MD5_2M" -- curl -sf -o "$WORK/out/2m.bin" "$BASE/trickle/2m.bin"
    fresh; measure slowcpu wget "$WORK/out/2m.bin" "$MD5_2M" -- wget -q -O "$WORK/out/2m.bin" "$BASE/trickle/2m.bin"
    measure slowcpu "URLSession, no disk" "" "" -- "$BIN/urlsession-floor" "$BASE/trickle/2m.bin" discard
    [[ $(cut -d' ' -f1 "$WORK/stdout.txt") == $((2 << 20)) ]] || sed -i '$ s/\tok$/\tWRONG/' "$RESULTS"
    measure slowcpu "URLSession, primed connection" "" "" -- "$BIN/urlsession-floor" "$BASE/trickle/2m.bin" discard --primed
    [[ $(cut -d' ' -f1 "$WORK/stdout.txt") == $((2 << 20)) ]] || sed -i '$ s/\tok$/\tWRONG/' "$RESULTS"
done

# --- 1c. several connections per file: a server that caps each connection ------------------------------------------
SEG_RUNS=${SEG_RUNS:-3}
log "64 MiB at 4 MiB/s per connection (nginx limit_rate): dl -x1, dl -x4, aria2c -x4 -s4 ($SEG_RUNS runs each)"
for ((run = 1; run <= SEG_RUNS; run++)); do
    fresh; measure capped "dl -x1" "$WORK/out/64m.bin" "$MD5_64M" -- "$DL" --quiet --dir "$WORK/out" "$CAPPED/64m.bin"
    fresh; measure capped "dl -x4" "$WORK/out/64m.bin" "$MD5_64M" -- "$DL" --quiet -x4 --dir "$WORK/out" "$CAPPED/64m.bin"
    fresh; measure capped "aria2c -x4 -s4" "$WORK/out/64m.bin" "$MD5_64M" -- aria2c -q -x4 -s4 --file-allocation=none \
        --allow-overwrite=true -d "$WORK/out" -o 64m.bin "$CAPPED/64m.bin"
    fresh; measure capped "aria2c -x4 -s4 -k1M" "$WORK/out/64m.bin" "$MD5_64M" -- aria2c -q -x4 -s4 -k1M \
        --file-allocation=none --allow-overwrite=true -d "$WORK/out" -o 64m.bin "$CAPPED/64m.bin"
done
log "dl -x4 killed with SIGKILL at 50 % of the capped 64 MiB, then run again"
fresh
: > "$WORK/logs/access.log"
"$DL" --quiet -x4 --dir "$WORK/out" "$CAPPED/64m.bin" > /dev/null 2>&1 &
DL_PID=$!
while :; do
    # The partial file has holes while segments arrive: its allocated bytes are what was written.
    partial=$(find "$WORK/out/.dl/partial" -name '*.part' -exec du -B1 {} + 2>/dev/null | cut -f1 | head -1 || true)
    [[ -n "$partial" && "$partial" -ge $((32 << 20)) ]] && break
    kill -0 "$DL_PID" 2>/dev/null || break
    sleep 0.02
done
kill -9 "$DL_PID" 2>/dev/null || true
wait "$DL_PID" 2>/dev/null || true
"$DL" --quiet -x4 --dir "$WORK/out" "$CAPPED/64m.bin" > /dev/null
seg_ok=$([[ $(md5sum "$WORK/out/64m.bin" | cut -d' ' -f1) == "$MD5_64M" ]] && echo ok || echo WRONG)
seg_served=$(awk '$2 == "/capped/64m.bin" { sum += $4 } END { print sum + 0 }' "$WORK/logs/access.log")
printf 'killseg\tdl -x4\t%s\t%s\t0\t%s\n' "$seg_served" "${partial:-0}" "$seg_ok" >> "$RESULTS"

# --- 2. peak RSS at 100 MiB ------------------------------------------------------------------------------------
log "100 MiB: dl and curl ($RUNS runs each)"
for ((run = 1; run <= RUNS; run++)); do
    fresh; measure 100m dl "$WORK/out/100m.bin" "$MD5_100M" -- "$DL" --quiet --dir "$WORK/out" "$BASE/100m.bin"
    fresh; measure 100m curl "$WORK/out/100m.bin" "$MD5_100M" -- curl -sf -o "$WORK/out/100m.bin" "$BASE/100m.bin"
done

# --- 3. 1,000 small files, 8 at a time -------------------------------------------------------------------------
log "1,000 × 16 KiB, 8 at a time: dl and aria2c -j8 ($RUNS runs each)"
for i in $(seq -f '%04g' 0 999); do echo "$BASE/small/f$i.bin"; done > "$WORK/list.txt"
check_small() { (cd "$WORK/out" && md5sum -c --quiet "$WORK/small.md5") > /dev/null 2>&1; }
for ((run = 1; run <= RUNS; run++)); do
    fresh; measure small dl "" "" -- "$DL" --quiet --max-active 8 --dir "$WORK/out" $(cat "$WORK/list.txt")
    check_small || sed -i '$ s/\tok$/\tWRONG/' "$RESULTS"
    fresh; measure small "aria2c -j8" "" "" -- aria2c -q -j8 -x1 --file-allocation=none -d "$WORK/out" -i "$WORK/list.txt"
    check_small || sed -i '$ s/\tok$/\tWRONG/' "$RESULTS"
done

# --- 4. MD5, SHA-256, SHA-1 of a cached 1 GiB file -------------------------------------------------------------
log "digests of the cached 1 GiB file: Downloader's MD5, SHA-256, SHA-1 and GNU's md5sum, sha256sum, sha1sum ($RUNS runs each)"
SHA256_1G=$(sha256sum "$WORK/www/1g.bin" | cut -d' ' -f1)
SHA1_1G=$(sha1sum "$WORK/www/1g.bin" | cut -d' ' -f1)
for ((run = 1; run <= RUNS; run++)); do
    for pair in "md5 md5sum $MD5_1G" "sha256 sha256sum $SHA256_1G" "sha1 sha1sum $SHA1_1G"; do
        read -r algorithm tool expected <<< "$pair"
        measure "$algorithm" "Downloader $algorithm" "" "" -- "$BIN/downloader-bench" "$algorithm" "$WORK/www/1g.bin"
        [[ $(cut -d' ' -f1 "$WORK/stdout.txt") == "$expected" ]] || sed -i '$ s/\tok$/\tWRONG/' "$RESULTS"
        measure "$algorithm" "$tool" "" "" -- "$tool" "$WORK/www/1g.bin"
        [[ $(cut -d' ' -f1 "$WORK/stdout.txt") == "$expected" ]] || sed -i '$ s/\tok$/\tWRONG/' "$RESULTS"
    done
done

# --- 5. the manager's waiting queue ----------------------------------------------------------------------------
log "20,000 waiting URLs: enqueue, suspendAll, resumeAll ($RUNS runs)"
for ((run = 1; run <= RUNS; run++)); do
    "$BIN/downloader-bench" queue 20000 > "$WORK/queue.txt"
    read -r _ enqueue _ _ suspend _ _ resume _ < "$WORK/queue.txt"
    printf 'queue\tdl\t%s\t%s\t%s\tok\n' "$enqueue" "$suspend" "$resume" >> "$RESULTS"
done

log "saved state with 10,000 receipts: time to open, bytes written per change ($RUNS runs)"
for ((run = 1; run <= RUNS; run++)); do
    "$BIN/downloader-bench" state 10000 > "$WORK/state.txt"
    read -r _ open _ _ perchange _ _ journal _ < "$WORK/state.txt"
    printf 'state\tdl\t%s\t%s\t%s\tok\n' "$open" "$perchange" "$journal" >> "$RESULTS"
done

# --- 6. kill -9 at 50 %, then run again -------------------------------------------------------------------------
log "interrupt: kill -9 at 50 % of 1 GiB (nginx limit_rate 200 MiB/s), then rerun"
fresh
: > "$WORK/logs/access.log"
"$DL" --quiet --dir "$WORK/out" "$BASE/slow/1g.bin" > /dev/null 2>&1 &
DL_PID=$!
while :; do
    partial=$(find "$WORK/out/.dl/partial" -name '*.part' -printf '%s\n' 2>/dev/null | head -1 || true)
    [[ -n "$partial" && "$partial" -ge $((1 << 29)) ]] && break
    kill -0 "$DL_PID" 2>/dev/null || break
    sleep 0.02
done
kill -9 "$DL_PID" 2>/dev/null || true
wait "$DL_PID" 2>/dev/null || true
killed_at=$(find "$WORK/out/.dl/partial" -name '*.part' -printf '%s\n' 2>/dev/null | head -1 || true)
"$DL" --quiet --dir "$WORK/out" "$BASE/slow/1g.bin" > /dev/null
resume_ok=$([[ $(md5sum "$WORK/out/1g.bin" | cut -d' ' -f1) == "$MD5_1G" ]] && echo ok || echo WRONG)
served=$(awk '$2 == "/slow/1g.bin" { sum += $4 } END { print sum + 0 }' "$WORK/logs/access.log")
ranges=$(awk '$2 == "/slow/1g.bin" && $1 == "GET"' "$WORK/logs/access.log" | wc -l)
printf 'kill\tdl\t%s\t%s\t%s\t%s\n' "$served" "${killed_at:-0}" "$ranges" "$resume_ok" >> "$RESULTS"

# --- report ----------------------------------------------------------------------------------------------------
log "report"
cp "$RESULTS" "${TMPDIR:-/tmp}/downloader-bench-results.tsv"  # kept for a report written again by hand
python3 - "$RESULTS" "$RUNS" "$(date -u +%Y-%m-%d)" "$(nproc)" "$(swift --version 2>&1 | head -1)" \
    "$(nginx -v 2>&1 | cut -d/ -f2) / curl $(curl --version | head -1 | cut -d' ' -f2) / wget $(wget --version | head -1 | cut -d' ' -f3) / aria2 $(aria2c --version | head -1 | cut -d' ' -f3)" \
    > "$WORK/report.md" <<'PY'
import statistics, sys
from collections import defaultdict
path, runs, date, cores, swift, tools = sys.argv[1:7]
rows = defaultdict(list)
kill = None
killseg = None
queue = []
state = []
for line in open(path):
    w, c, *rest = line.rstrip("\n").split("\t")
    if w == "kill":
        kill = rest
        continue
    if w == "killseg":
        killseg = rest
        continue
    if w == "queue":
        queue.append([float(x) for x in rest[:3]])
        continue
    if w == "state":
        state.append([float(x) for x in rest[:3]])
        continue
    wall, cpu, rss, ok = rest
    rows[(w, c)].append((float(wall), float(cpu), float(rss) / 1024, ok))

def stats(w, c):
    r = [x for x in rows[(w, c)] if x[3] != "fail"]
    walls = [x[0] for x in r]
    return {
        "wall": statistics.median(walls), "min": min(walls), "max": max(walls),
        "cpu": statistics.median(x[1] for x in r), "rss": statistics.median(x[2] for x in r),
        "rssmax": max(x[2] for x in r), "ok": all(x[3] == "ok" for x in rows[(w, c)]) and len(r) == len(rows[(w, c)]),
    }

def table(w, reference, contenders, checked="all MD5 ok"):
    ref = stats(w, reference)["wall"]
    out = ["| contender | median wall s | min–max s | ratio to " + reference + " | CPU s | peak RSS MB | outputs |",
           "|---|---|---|---|---|---|---|"]
    for c in contenders:
        if (w, c) not in rows:
            continue
        s = stats(w, c)
        out.append(f"| {c.replace('|', chr(92) + '|')} | {s['wall']:.2f} | {s['min']:.2f}–{s['max']:.2f} | {s['wall'] / ref:.2f} | {s['cpu']:.2f} | "
                   f"{s['rss']:.0f} (max {s['rssmax']:.0f}) | {checked if s['ok'] else 'FAILED'} |")
    return "\n".join(out)

def verdict(ok):
    return "met" if ok else "**missed**"

p = print
p("# Benchmarks\n")
p("Release builds, measured side by side with the tools people would otherwise use, in one run, as medians and ratios:")
p("the machine is shared and noisy (absolute seconds drift ±30 %), ratios much less.\n")
p(f"Machine: {cores} cores, Linux. Date: {date}. {swift}. Server: nginx {tools}, on 127.0.0.1, `sendfile on`,")
p(f"files in the page cache. {runs} interleaved runs per contender; every output MD5-checked.")
p("Reproduce: `Benchmarks/run.sh` (installs what it needs; about 15 minutes).\n")

g = lambda w, c: stats(w, c)
p("## Commands\n")
p("Each run starts from an empty output directory `OUT`; `BASE` is nginx's address.\n")
p("```")
for line in [
    "dl --quiet --dir OUT BASE/1g.bin                      # and --no-md5, -x4; BASE/100m.bin",
    "dl --quiet [-x4] --dir OUT BASE/capped/64m.bin        # nginx limit_rate 4m (per request)",
    "aria2c -q -x4 -s4 [-k1M] --file-allocation=none --allow-overwrite=true -d OUT -o 64m.bin BASE/capped/64m.bin",
    "curl -sf -o OUT/1g.bin BASE/1g.bin",
    "wget -q -O OUT/1g.bin BASE/1g.bin",
    "aria2c -q -x1 --file-allocation=none --allow-overwrite=true -d OUT -o 1g.bin BASE/1g.bin",
    "aria2c -q -x4 -s4 --file-allocation=none --allow-overwrite=true -d OUT -o 1g.bin BASE/1g.bin",
    "ahc-download BASE/1g.bin OUT/1g.bin                  # Benchmarks/Sources/ahc-download",
    "naive-download BASE/1g.bin OUT/1g.bin                # Benchmarks/Sources/naive-download",
    "urlsession-floor BASE/1g.bin discard|md5             # Benchmarks/Sources/urlsession-floor",
    "dl --quiet --max-active 8 --dir OUT BASE/small/f0000.bin … BASE/small/f0999.bin",
    "aria2c -q -j8 -x1 --file-allocation=none -d OUT -i list.txt",
    "downloader-bench md5|sha256|sha1 1g.bin; md5sum|sha256sum|sha1sum 1g.bin",
    "dl --quiet --dir OUT BASE/slow/1g.bin                 # killed with SIGKILL at 50 %, then run again",
    "curl -sf -o OUT/1g.bin BASE/1g.bin && md5sum OUT/1g.bin  # verified contenders (bash, pipefail)",
    "curl -sf BASE/1g.bin | tee OUT/1g.bin | md5sum",
    "wget -q -O OUT/1g.bin BASE/1g.bin && md5sum OUT/1g.bin",
    "aria2c -q -x1 --file-allocation=none --allow-overwrite=true --checksum=md5=HEX -d OUT -o 1g.bin BASE/1g.bin",
    "dl|curl|wget|urlsession-floor … BASE/trickle/2m.bin   # nginx limit_rate 200k: about 10 s",
    "urlsession-floor BASE/trickle/2m.bin discard --primed  # a 1-byte request first, on the same session",
    "downloader-bench queue 20000                          # the manager's waiting queue",
    "downloader-bench state 10000                          # the saved state: open time, bytes per change",
]:
    p(line)
p("```\n")
p("## One 1 GiB file\n")
p(table("1g", "curl", ["dl", "dl -x4", "curl", "wget", "aria2c -x1", "aria2c -x4 -s4", "AsyncHTTPClient", "naive URLSession"]))
dl, curl = g("1g", "dl"), g("1g", "curl")
p("")
p(f"- `dl` wall ≤ 1.3 × curl: {dl['wall'] / curl['wall']:.2f} × — {verdict(dl['wall'] <= 1.3 * curl['wall'])}.")
for peer in ["wget", "aria2c -x1", "AsyncHTTPClient"]:
    if ("1g", peer) in rows:
        s = g("1g", peer)
        p(f"- faster than {peer}: {dl['wall']:.2f} s vs {s['wall']:.2f} s — {verdict(dl['wall'] < s['wall'])}.")

p("\n## Verified 1 GiB: what people run to get a checked file\n")
if ("verified", "curl -o f && md5sum f") in rows:
    rows[("verified", "dl")] = rows[("1g", "dl")]
    verified = ["curl -o f && md5sum f", "curl | tee f | md5sum", "wget && md5sum", "aria2c --checksum=md5="]
    p("`dl` hashes while it writes; the others hash after or beside the transfer. Same runs as the table above.\n")
    p(table("verified", "curl -o f && md5sum f", ["dl"] + verified))
    ref = g("verified", "curl -o f && md5sum f")
    p("")
    p(f"- `dl` ≤ 0.85 × `curl -o f && md5sum f`: {dl['wall'] / ref['wall']:.2f} × — {verdict(dl['wall'] <= 0.85 * ref['wall'])}.")
    others = [c for c in verified if ("verified", c) in rows]
    fastest = min(others, key=lambda c: g("verified", c)["wall"])
    p(f"- faster than every other verified contender (fastest: {fastest}, {g('verified', fastest)['wall']:.2f} s): "
      f"{verdict(all(dl['wall'] < g('verified', c)['wall'] for c in others))}.")

p("\n### The platform's floor\n")
p("The same 1 GiB through URLSession alone, never touching the disk: what any URLSession-based downloader pays on this")
p("toolchain before it writes a byte (corelibs delivers 16 KiB chunks, each through an OperationQueue hop and a fresh")
p("dispatch timer).\n")
floor = [c for c in ["URLSession, no disk", "URLSession + MD5, no disk"] if ("floor", c) in rows]
if floor:
    ref = curl["wall"]
    p("| contender | median wall s | min–max s | ratio to curl | CPU s | peak RSS MB |")
    p("|---|---|---|---|---|---|")
    for c in floor:
        s = g("floor", c)
        p(f"| {c} | {s['wall']:.2f} | {s['min']:.2f}–{s['max']:.2f} | {s['wall'] / ref:.2f} | {s['cpu']:.2f} | {s['rss']:.0f} |")
    p(f"| dl (writes and verifies) | {dl['wall']:.2f} | {dl['min']:.2f}–{dl['max']:.2f} | {dl['wall'] / ref:.2f} | {dl['cpu']:.2f} | {dl['rss']:.0f} |")

if ("capped", "dl -x1") in rows:
    p("\n## Several connections per file: 64 MiB, 4 MiB/s per connection\n")
    p("nginx `limit_rate 4m`, which caps each request (each connection), as many mirrors and CDNs do.\n")
    p(table("capped", "dl -x1", ["dl -x1", "dl -x4", "aria2c -x4 -s4", "aria2c -x4 -s4 -k1M"]))
    p("\n(aria2c splits a file only into pieces of at least `--min-split-size`, 20 MiB by default: three segments of this")
    p("file; `-k1M`, its smallest, lets it use all four.)\n")
    x1, x4, a4 = g("capped", "dl -x1"), g("capped", "dl -x4"), g("capped", "aria2c -x4 -s4")
    p("")
    p(f"- `dl -x4` ≤ 0.3 × `dl -x1`: {x4['wall'] / x1['wall']:.2f} × — {verdict(x4['wall'] <= 0.3 * x1['wall'])}.")
    p(f"- no slower than `aria2c -x4 -s4`: {x4['wall']:.2f} s vs {a4['wall']:.2f} s ({x4['wall'] / a4['wall']:.2f} ×) — "
      f"{verdict(x4['wall'] <= a4['wall'])}.")
    if ("1g", "dl -x4") in rows:
        u4 = g("1g", "dl -x4")
        p(f"- unthrottled 1 GiB (the first table): `dl -x4` within 10 % of `dl`: {u4['wall']:.2f} s vs {dl['wall']:.2f} s "
          f"({u4['wall'] / dl['wall']:.2f} ×) — {verdict(u4['wall'] <= 1.10 * dl['wall'])}.")
    if killseg:
        served, killed_at, _, ok = killseg
        ratio = int(served) / (64 << 20)
        p(f"- `dl -x4` killed with SIGKILL at {int(killed_at) / (64 << 20):.0%} of the file, then run again: nginx served "
          f"{int(served):,} body bytes, {ratio:.3f} × the file; final MD5 {ok} — ≤ 1.05 ×: {verdict(ratio <= 1.05 and ok == 'ok')}.")

p("\n## Memory\n")
small, big = g("100m", "dl"), g("1g", "dl")
p("| file | dl peak RSS MB (median, max) | curl peak RSS MB |")
p("|---|---|---|")
p(f"| 100 MiB | {small['rss']:.0f}, {small['rssmax']:.0f} | {g('100m', 'curl')['rss']:.0f} |")
p(f"| 1 GiB | {big['rss']:.0f}, {big['rssmax']:.0f} | {curl['rss']:.0f} |")
p("")
p(f"- ≤ 50 MB for 1 GiB: {big['rss']:.0f} MB — {verdict(big['rss'] <= 50)}; ≤ 80 MB at most: {verdict(big['rssmax'] <= 80 and small['rssmax'] <= 80)}; flat in size, 1 GiB ≤ 1.15 × 100 MiB: "
  f"{big['rss'] / small['rss']:.2f} × — {verdict(big['rss'] <= 1.15 * small['rss'])}.")

p("\n## 1,000 × 16 KiB files, 8 at a time\n")
p(table("small", "aria2c -j8", ["dl", "aria2c -j8"]))
s1, s2 = g("small", "dl"), g("small", "aria2c -j8")
p(f"\n- `dl --max-active 8` ≤ 1.0 × `aria2c -j8 -i list`: {s1['wall'] / s2['wall']:.2f} × — {verdict(s1['wall'] <= s2['wall'])}.")

p("\n## Digests of a cached 1 GiB file\n")
p("Whole-process wall time for both (`downloader-bench ALGORITHM FILE` reads 4 MiB blocks). GNU coreutils here uses no")
p("SHA extensions; neither does Downloader (pure Swift).\n")
for algorithm, tool, target in [("md5", "md5sum", 0.95), ("sha256", "sha256sum", 1.0), ("sha1", "sha1sum", 1.0)]:
    p(table(algorithm, tool, [f"Downloader {algorithm}", tool], checked="all digests ok"))
    m1, m2 = g(algorithm, f"Downloader {algorithm}"), g(algorithm, tool)
    p(f"\n- ≤ {target:.2f} × {tool}: {m1['wall'] / m2['wall']:.2f} × — {verdict(m1['wall'] <= target * m2['wall'])}.\n")

p("\n## Verification on vs off, 1 GiB\n")
off = g("verify", "dl --no-md5")
p("| dl | median wall s | CPU s |")
p("|---|---|---|")
p(f"| with MD5 (default) | {dl['wall']:.2f} | {dl['cpu']:.2f} |")
p(f"| `--no-md5` | {off['wall']:.2f} | {off['cpu']:.2f} |")
p(f"\n- verification costs ≤ 5 %: {dl['wall'] / off['wall'] - 1:+.0%} — {verdict(dl['wall'] <= 1.05 * off['wall'])}.")
p(f"- unverified `dl --no-md5` ≤ 1.2 × curl: {off['wall'] / curl['wall']:.2f} × — {verdict(off['wall'] <= 1.2 * curl['wall'])}.")

if ("slowcpu", "curl") in rows:
    p("\n## A slow transfer: 2 MiB at 200 KiB/s\n")
    p("nginx `limit_rate 200k` on one connection, about 10 s; CPU is user + system seconds from /usr/bin/time, and its")
    p("share of one core over the wall time.\n")
    p("| contender | median wall s | CPU s | CPU % of a core | outputs |")
    p("|---|---|---|---|---|")
    for c in ["dl", "curl", "wget", "URLSession, no disk", "URLSession, primed connection"]:
        if ("slowcpu", c) in rows:
            s = g("slowcpu", c)
            p(f"| {c} | {s['wall']:.2f} | {s['cpu']:.2f} | {100 * s['cpu'] / s['wall']:.0f} % | {'all MD5 ok' if s['ok'] else 'FAILED'} |")
    slow = g("slowcpu", "dl")
    p(f"\n- `dl` ≤ 10 % of a core: {100 * slow['cpu'] / slow['wall']:.0f} % — {verdict(slow['cpu'] <= 0.10 * slow['wall'])}.")

if queue:
    p("\n## The manager's waiting queue: 20,000 URLs\n")
    p("`downloader-bench queue 20000`: one slot, held by a local server that never answers, and 20,000 more URLs")
    p("waiting behind it; the time of `enqueue` for all of them, then `suspendAll()`, then `resumeAll()` (release build,")
    p("through the public API).\n")
    p("| operation | median s | min–max s | target |")
    p("|---|---|---|---|")
    for index, name in enumerate(["enqueue × 20,000", "suspendAll()", "resumeAll()"]):
        values = [q[index] for q in queue]
        med = statistics.median(values)
        p(f"| {name} | {med:.3f} | {min(values):.3f}–{max(values):.3f} | < 0.5 s: {verdict(med < 0.5)} |")

if state:
    p("\n## Saved state: 10,000 receipts\n")
    p("`downloader-bench state 10000`: a directory with 10,000 receipts; the time a new manager takes to open it (lock,")
    p("journal, checks), and the journal bytes one change writes (100 removals, each saved on its own).\n")
    opens = [x[0] for x in state]
    p("| measure | median | min–max |")
    p("|---|---|---|")
    p(f"| open a directory with 10,000 receipts | {statistics.median(opens):.3f} s | {min(opens):.3f}–{max(opens):.3f} s |")
    p(f"| bytes written per change | {statistics.median(x[1] for x in state):.0f} B | — |")
    p(f"| the whole journal (what rewriting every receipt would cost per save) | {statistics.median(x[2] for x in state) / 1e6:.1f} MB | — |")

p("\n## Interrupted at 50 % by kill -9, then run again\n")
if kill:
    served, killed_at, gets, ok = kill
    ratio = int(served) / (1 << 30)
    p(f"nginx served {int(served):,} body bytes for the 1 GiB file over {gets} GET requests; the process was killed with "
      f"{int(killed_at):,} bytes on disk; final MD5 {ok}.\n")
    p(f"- bytes served ≤ 1.01 × file size: {ratio:.3f} × — {verdict(ratio <= 1.01 and ok == 'ok')}.")
PY
# Sections measured by other scripts (ab.sh, wan.sh, by hand), kept as written, then the notes.
[[ -f "$HERE/measured.md" ]] && { echo; cat "$HERE/measured.md"; } >> "$WORK/report.md"
[[ -f "$HERE/notes.md" ]] && { echo; cat "$HERE/notes.md"; } >> "$WORK/report.md"
cat "$WORK/report.md"
if [[ -z "${NO_WRITE:-}" ]]; then
    cp "$WORK/report.md" "$ROOT/BENCHMARKS.md"
    log "wrote $ROOT/BENCHMARKS.md"
fi
