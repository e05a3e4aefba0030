#!/usr/bin/env bash
# End-to-end check of downloader-server (issue #35), as its users would drive it: builds it, serves files from a
# local nginx (loopback only), then
#   1. adds a file with curl (aria2.addUri with a checksum) and waits until it is complete and identical;
#   2. drives a large, rate-limited file with aria2p (a real aria2 client from PyPI): add, list, pause, resume, stats,
#      and its WebSocket listener gets aria2's notifications;
#   3. sends SIGTERM mid-download: the process exits within 2 s with the download saved as interrupted;
#   4. starts again: the download continues by Range (nginx's log shows it); kill -9 in the middle, starts again:
#      it continues again and completes identical, with at most 1.05 times the file fetched;
#   5. loads the page at / in headless chromium: screenshot, and the DOM shows the finished downloads; then clicks
#      its controls (page-check.py over the DevTools protocol): add a URL, pause, resume, pause, remove;
#   6. checks that bad requests get JSON-RPC errors and aria2c's HTTP statuses (404, 413), JSON-RPC over GET,
#      /healthz, /metrics (with the bearer secret), the secret out of the process list and the log, that
#      /api/downloads needs the secret and that a request from another origin's page is refused, and that the server
#      still answers; then every call of aria2p's API and its command line (aria2p-api-check.py), the last
#      aria2.shutdown: exit 0. The secret is given as a flag first, then by DOWNLOADER_RPC_SECRET;
#   6b. 1,500 idle connections against `ulimit -n 1024`: the server stays up and answers once they go;
#   7. soak.py: a seeded soak (random calls, page polling, floods, SIGTERM and kill -9 restarts) for SOAK_SECONDS
#      (30 by default; 600 by hand), then every download finished and every file identical (SOAK_SEED replays).
# Installs what it needs (nginx, chromium, aria2p) when missing. Usage: Examples/Server/e2e.sh
set -euo pipefail
cd "$(dirname "$0")"

fail() { echo "e2e: FAIL: $*" >&2; exit 1; }
step() { echo "== $*"; }

step "tools"
if ! command -v nginx > /dev/null || ! command -v chromium > /dev/null; then
    apt-get update -q > /dev/null && apt-get install -y -q nginx chromium > /dev/null
fi
python3 -c "import aria2p" 2> /dev/null || pip install -q aria2p 2> /dev/null
python3 -c "import aria2p"

step "build"
# EXAMPLES_SCRATCH_PATH (CI): one build folder for the example packages, which share most of their dependencies.
SCRATCH=()
if [ -n "${EXAMPLES_SCRATCH_PATH:-}" ]; then SCRATCH=(--scratch-path "$EXAMPLES_SCRATCH_PATH"); fi
swift build "${SCRATCH[@]}" -Xswiftc -warnings-as-errors
SERVER="$(swift build "${SCRATCH[@]}" --show-bin-path)/downloader-server"

WORK="$(mktemp -d /tmp/downloader-server-e2e.XXXXXX)"
chmod 755 "$WORK"
SERVER_PID=""
NGINX_PID=""
cleanup() {
    [ -n "$SERVER_PID" ] && kill -9 "$SERVER_PID" 2> /dev/null || true
    [ -n "$NGINX_PID" ] && kill "$NGINX_PID" 2> /dev/null || true
    if [ "${KEEP_WORK:-0}" = 1 ]; then echo "e2e: kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

step "nginx on loopback"
mkdir -p "$WORK/www/slow" "$WORK/dl" "$WORK/nginx"
head -c $((3 << 20)) /dev/urandom > "$WORK/www/small.bin"
head -c $((48 << 20)) /dev/urandom > "$WORK/www/slow/big.bin"
head -c $((24 << 20)) /dev/urandom > "$WORK/www/slow/page.bin"
head -c $((24 << 20)) /dev/urandom > "$WORK/www/slow/api.bin"
mkdir -p "$WORK/www/soak"
for i in $(seq 20); do head -c $(((i % 8 + 1) << 20)) /dev/urandom > "$WORK/www/soak/s$i.bin"; done
chmod -R a+rX "$WORK/www"
NGINX_PORT="$(free_port)"
cat > "$WORK/nginx/nginx.conf" << EOF
worker_processes 1;
daemon off;
pid $WORK/nginx/nginx.pid;
error_log $WORK/nginx/error.log;
events {}
http {
    log_format ranges '\$request "\$http_range" \$status \$body_bytes_sent';
    access_log $WORK/nginx/access.log ranges;
    client_body_temp_path $WORK/nginx; proxy_temp_path $WORK/nginx; fastcgi_temp_path $WORK/nginx;
    uwsgi_temp_path $WORK/nginx; scgi_temp_path $WORK/nginx;
    server {
        listen 127.0.0.1:$NGINX_PORT;
        root $WORK/www;
        location /slow/ { limit_rate 4m; }
        location /soak/ { limit_rate 2m; }
    }
}
EOF
nginx -c "$WORK/nginx/nginx.conf" &
NGINX_PID=$!
for _ in $(seq 100); do curl -sf -o /dev/null "http://127.0.0.1:$NGINX_PORT/small.bin" && break; sleep 0.1; done
SMALL="http://127.0.0.1:$NGINX_PORT/small.bin"
BIG="http://127.0.0.1:$NGINX_PORT/slow/big.bin"
SMALL_SHA="$(sha256sum "$WORK/www/small.bin" | cut -d' ' -f1)"
BIG_SHA="$(sha256sum "$WORK/www/slow/big.bin" | cut -d' ' -f1)"

SECRET="e2e-secret"
start_server() {
    if [ "${SECRET_BY_ENV:-0}" = 1 ]; then
        DOWNLOADER_RPC_SECRET="$SECRET" "$SERVER" --port 0 --dir "$WORK/dl" > "$WORK/server.out" 2>> "$WORK/server.log" &
    else
        "$SERVER" --port 0 --dir "$WORK/dl" --rpc-secret "$SECRET" > "$WORK/server.out" 2>> "$WORK/server.log" &
    fi
    SERVER_PID=$!
    for _ in $(seq 300); do
        PORT="$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\)/.*|\1|p' "$WORK/server.out")"
        [ -n "$PORT" ] && return 0
        kill -0 "$SERVER_PID" 2> /dev/null || fail "downloader-server exited at start: $(tail -5 "$WORK/server.log")"
        sleep 0.1
    done
    fail "downloader-server did not start"
}
rpc() {  # rpc METHOD [PARAMS...]: prints the answer
    local method="$1"; shift
    local params="\"token:$SECRET\""
    for p in "$@"; do params="$params,$p"; done
    curl -sS "http://127.0.0.1:$PORT/jsonrpc" -d "{\"jsonrpc\":\"2.0\",\"id\":\"e2e\",\"method\":\"$method\",\"params\":[$params]}"
}
field() { python3 -c "import json,sys; r=json.load(sys.stdin); print(eval('r' + sys.argv[1]))" "$1"; }
wait_complete() {  # wait_complete GID SECONDS
    for _ in $(seq $(($2 * 10))); do
        status="$(rpc aria2.tellStatus "\"$1\"" '["status"]' | field "['result']['status']")"
        [ "$status" = complete ] && return 0
        [ "$status" = error ] && fail "$1 failed: $(rpc aria2.tellStatus "\"$1\"")"
        sleep 0.1
    done
    fail "$1 not complete after $2 s: $(rpc aria2.tellStatus "\"$1\"")"
}

step "1. curl: aria2.addUri with a checksum"
start_server
echo "server on port $PORT"
# The flag's value is blanked from the process list once read (as curl does with passwords).
! tr '\0' ' ' < "/proc/$SERVER_PID/cmdline" | grep -q "$SECRET" || fail "the secret is in the process list"
SMALL_GID="$(rpc aria2.addUri "[\"$SMALL\"]" "{\"checksum\":\"sha-256=$SMALL_SHA\",\"out\":\"small-copy.bin\"}" | field "['result']")"
echo "gid $SMALL_GID"
wait_complete "$SMALL_GID" 60
cmp "$WORK/www/small.bin" "$WORK/dl/small-copy.bin" || fail "small-copy.bin differs"

step "2. aria2p: add, list, pause, resume, stats"
python3 aria2p-check.py "$PORT" "$SECRET" "$BIG" "$BIG_SHA" > "$WORK/aria2p.log" || fail "aria2p: $(cat "$WORK/aria2p.log")"
cat "$WORK/aria2p.log"
BIG_GID="$(tail -1 "$WORK/aria2p.log")"
echo "gid $BIG_GID"

step "3. SIGTERM mid-download"
for _ in $(seq 300); do
    done_bytes="$(rpc aria2.tellStatus "\"$BIG_GID\"" '["completedLength"]' | field "['result']['completedLength']")"
    [ "$done_bytes" -ge $((8 << 20)) ] && break
    sleep 0.1
done
[ "$done_bytes" -ge $((8 << 20)) ] || fail "big.bin did not reach 8 MiB"
[ "$done_bytes" -lt $((48 << 20)) ] || fail "big.bin finished before the signal (nginx's limit_rate did not hold)"
sent="$(date +%s%N)"
kill -TERM "$SERVER_PID"
status=0
wait "$SERVER_PID" || status=$?
SERVER_PID=""
took_ms=$((($(date +%s%N) - sent) / 1000000))
echo "exit $status after $took_ms ms, at $done_bytes+ bytes"
[ "$status" = 0 ] || fail "exit status $status after SIGTERM"
[ "$took_ms" -le 2000 ] || fail "SIGTERM took $took_ms ms (more than 2 s)"
grep -q '"interrupted":true' "$WORK/dl/.downloader/journal" || fail "the journal does not say the download was interrupted"
: > "$WORK/nginx/access.log.mark"
lines_before="$(wc -l < "$WORK/nginx/access.log")"

step "4. start again (the secret from DOWNLOADER_RPC_SECRET): it continues by Range; kill -9, start: again"
SECRET_BY_ENV=1 start_server
for _ in $(seq 300); do
    now_bytes="$(rpc aria2.tellStatus "\"$BIG_GID\"" '["completedLength"]' | field "['result']['completedLength']")"
    [ "$now_bytes" -ge $((done_bytes + (8 << 20))) ] && break
    sleep 0.1
done
[ "$now_bytes" -ge $((done_bytes + (8 << 20))) ] || fail "big.bin did not continue after the restart"
kill -9 "$SERVER_PID"
wait "$SERVER_PID" 2> /dev/null || true
SERVER_PID=""
echo "kill -9 at $now_bytes+ bytes"
SECRET_BY_ENV=1 start_server
wait_complete "$BIG_GID" 120
cmp "$WORK/www/slow/big.bin" "$WORK/dl/big.bin" || fail "big.bin differs"
tail -n +"$((lines_before + 1))" "$WORK/nginx/access.log" | grep big.bin | tee "$WORK/after-restart.log"
grep -E 'GET .*"bytes=0-' "$WORK/after-restart.log" && fail "a restart fetched big.bin from byte 0"
grep -Eq '"bytes=[1-9][0-9]*-' "$WORK/after-restart.log" || fail "the restart did not continue by Range"
served="$(awk '/big.bin/ { s += $NF } END { print s }' "$WORK/nginx/access.log")"
echo "nginx served $served bytes of big.bin for $((48 << 20))"
[ "$served" -le $(((48 << 20) + (48 << 20) / 20)) ] || fail "more than 1.05 times the file was fetched"

step "5. the page at / in headless chromium"
# The server has a secret, so the page takes it from its fragment (never sent to a server).
PAGE="http://127.0.0.1:$PORT/#token=$SECRET"
CHROMIUM=(chromium --headless --no-sandbox --disable-gpu --virtual-time-budget=5000 --window-size=1100,400)
"${CHROMIUM[@]}" --screenshot="$WORK/page.png" "$PAGE" 2> "$WORK/chromium.log" \
    || fail "chromium: $(tail -3 "$WORK/chromium.log")"
[ -s "$WORK/page.png" ] || fail "no screenshot"
"${CHROMIUM[@]}" --dump-dom "$PAGE" 2>> "$WORK/chromium.log" > "$WORK/page.html"
grep -q "id=\"gid-$BIG_GID\" data-state=\"complete\"" "$WORK/page.html" || fail "the page does not show big.bin completed"
grep -q ">big.bin<" "$WORK/page.html" || fail "the page does not name big.bin"
grep -q "2 of 2 complete" "$WORK/page.html" || fail "the page's summary is wrong"
cp "$WORK/page.png" "${SCREENSHOT:-/tmp/downloader-server-page.png}"
echo "screenshot: ${SCREENSHOT:-/tmp/downloader-server-page.png}"
# The page's own controls, clicked in chromium: add a URL, pause, resume, pause, remove.
python3 page-check.py chromium "$PAGE" "http://127.0.0.1:$NGINX_PORT/slow/page.bin" "$WORK" \
    || fail "the page's controls (chromium: $(tail -3 "$WORK/page-check-chromium.log"))"
[ ! -e "$WORK/dl/page.bin" ] || fail "page.bin is still there after Remove"

step "6. bad requests, then a clean stop"
rpc aria2.noSuchMethod | grep -q '"code":-32601' || fail "an unknown method is not -32601"
curl -sS "http://127.0.0.1:$PORT/jsonrpc" -d '{"jsonrpc":' | grep -q '"code":-32700' || fail "bad JSON is not -32700"
rpc aria2.tellStatus '"zz"' | grep -q '"code":1' || fail "a bad GID is not refused"
rpc aria2.addUri '"not an array"' | grep -q '"code":-32602' || fail "bad params are not -32602"
code="$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/api/downloads")"
[ "$code" = 401 ] || fail "/api/downloads without the secret answered $code"
code="$(curl -s -o /dev/null -w '%{http_code}' -H "Origin: http://evil.example" "http://127.0.0.1:$PORT/jsonrpc" \
    -d "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"aria2.addUri\",\"params\":[\"token:$SECRET\",[\"$SMALL\"]]}")"
[ "$code" = 403 ] || fail "a request from another origin's page answered $code"
http() { curl -s -o /dev/null -w '%{http_code}' "$@"; }
[ "$(http "http://127.0.0.1:$PORT/jsonrpc" -d '{"jsonrpc":"2.0","id":1,"method":"aria2.none"}')" = 404 ] \
    || fail "an unknown method is not 404 (aria2c's status)"
head -c $((3 << 20)) /dev/zero > "$WORK/huge.json"
[ "$(http "http://127.0.0.1:$PORT/jsonrpc" --data-binary @"$WORK/huge.json")" = 413 ] || fail "3 MiB body not 413"
params="$(printf '["token:%s"]' "$SECRET" | base64 -w0 | sed 's/=/%3D/g')"
curl -sS "http://127.0.0.1:$PORT/jsonrpc?method=aria2.getVersion&id=get&params=$params" | grep -q '"id":"get"' \
    || fail "JSON-RPC over GET"
[ "$(http "http://127.0.0.1:$PORT/healthz")" = 200 ] || fail "/healthz"
[ "$(http "http://127.0.0.1:$PORT/metrics")" = 401 ] || fail "/metrics without the secret"
curl -sS -H "Authorization: Bearer $SECRET" "http://127.0.0.1:$PORT/metrics" > "$WORK/metrics.txt"
grep -q 'downloader_downloads{state="completed"} 2' "$WORK/metrics.txt" || fail "/metrics: $(head -20 "$WORK/metrics.txt")"
grep -q '^hb_requests' "$WORK/metrics.txt" || fail "/metrics lacks Hummingbird's request counts"
grep -q 'authentication failed' "$WORK/server.log" || fail "a wrong token was not logged"
! grep -q "$SECRET" "$WORK/server.log" || fail "the secret reached the log"
rpc aria2.getVersion | grep -q '"version"' || fail "the server stopped answering"
# Every call aria2p's API has and its command line's commands; the last is aria2.shutdown, which stops the server.
python3 aria2p-api-check.py "$PORT" "$SECRET" "http://127.0.0.1:$NGINX_PORT/slow/api.bin" \
    || fail "aria2p's API and command line"
status=0
wait "$SERVER_PID" || status=$?
SERVER_PID=""
[ "$status" = 0 ] || fail "exit status $status at the final stop"
step "6b. a flood: 1,500 idle connections against a descriptor limit of 1,024"
mkdir -p "$WORK/flood"
(ulimit -n 1024 && exec "$SERVER" --port 0 --dir "$WORK/flood") > "$WORK/flood.out" 2> "$WORK/flood.log" &
FLOOD_PID=$!
for _ in $(seq 300); do
    FLOOD_PORT="$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\)/.*|\1|p' "$WORK/flood.out")"
    [ -n "$FLOOD_PORT" ] && break
    sleep 0.1
done
[ -n "$FLOOD_PORT" ] || fail "the flood's server did not start"
python3 - "$FLOOD_PORT" << 'PYTHON' || fail "flood: $(tail -3 "$WORK/flood.log")"
import resource, socket, sys, time, urllib.request
resource.setrlimit(resource.RLIMIT_NOFILE, (4096, 4096))
port = int(sys.argv[1])
held = []
for _ in range(1500):
    s = socket.socket()
    s.setblocking(False)
    s.connect_ex(("127.0.0.1", port))  # beyond the cap they wait in the backlog (or are refused): both are fine
    held.append(s)
time.sleep(2)
for s in held:
    s.close()
deadline = time.time() + 60
while time.time() < deadline:
    try:
        if urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5).status == 200:
            print(f"flood: 1,500 connections held and closed; /healthz answers")
            sys.exit(0)
    except OSError:
        time.sleep(0.2)
sys.exit("/healthz did not answer after the flood")
PYTHON
kill -0 "$FLOOD_PID" 2> /dev/null || fail "the server died in the flood: $(tail -3 "$WORK/flood.log")"
kill -TERM "$FLOOD_PID"
wait "$FLOOD_PID" || fail "the flood's server did not exit 0"

step "7. a seeded soak: random calls, polling, floods, SIGTERM and kill -9 restarts (${SOAK_SECONDS:-30} s)"
python3 soak.py "$SERVER" "$WORK" "http://127.0.0.1:$NGINX_PORT/soak" "$WORK/www/soak" "${SOAK_SECONDS:-30}" \
    || fail "soak (server log: $(tail -5 "$WORK/soak-server.log"))"
echo "e2e: PASS"
