#!/usr/bin/env bash
# End-to-end check of downloader-fleet (issue #49): PostgreSQL from Debian's packages in a temporary cluster on
# loopback (as the postgres user: it refuses root), nginx serving 2,000 files at 64 KiB/s per connection, the fleet's
# unit tests, then scripts/fleet_run.py:
#   - e2e: three workers on one job; one killed with SIGKILL and started again, one stopped past its lease and
#     continued, PostgreSQL stopped and started mid-run → one result per URL, every file identical, the 404 failed,
#     status agrees, GETs ≤ 1.05× the files, and the stopped worker, once continued, starts no request of the
#     shard it held that another worker fetched (nginx logs each worker's User-Agent); then SIGTERM: exit within 5 s,
#     the shard free at once;
#   - chaos: FLEET_CHAOS_TRIALS seeded trials (default 2) of random SIGKILL/SIGSTOP/PostgreSQL stops and kills.
# Installs what it needs when missing. Usage: Examples/Fleet/e2e.sh   (KEEP_WORK=1 keeps the folder;
# FLEET_CHAOS_TRIALS=N for more trials, FLEET_SEED=S to replay one chaos trial.)
set -euo pipefail
cd "$(dirname "$0")"

step() { echo "== [${SECONDS}s] $*"; }

step "tools: nginx, PostgreSQL, psql"
if ! command -v nginx > /dev/null || ! command -v psql > /dev/null; then
    apt-get update -q > /dev/null && apt-get install -y -q nginx postgresql-client > /dev/null
fi

step "build and unit tests"
# EXAMPLES_SCRATCH_PATH (CI): one build folder for the example packages, which share most of their dependencies.
SCRATCH=()
if [ -n "${EXAMPLES_SCRATCH_PATH:-}" ]; then SCRATCH=(--scratch-path "$EXAMPLES_SCRATCH_PATH"); fi
swift build "${SCRATCH[@]}" --build-tests -Xswiftc -warnings-as-errors
swift test "${SCRATCH[@]}" --skip-build
FLEET="$(swift build "${SCRATCH[@]}" --show-bin-path)/downloader-fleet"

WORK="$(mktemp -d /tmp/downloader-fleet-e2e.XXXXXX)"
chmod 755 "$WORK"
NGINX_PID=""
cleanup() {
    [ -n "$NGINX_PID" ] && kill "$NGINX_PID" 2> /dev/null || true
    scripts/postgres.sh stop "$WORK/pg" 2> /dev/null || true
    if [ "${KEEP_WORK:-0}" = 1 ]; then echo "e2e: kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

step "PostgreSQL on loopback"
PG_PORT="$(free_port)"
scripts/postgres.sh start "$WORK/pg" "$PG_PORT"
DB="postgres://postgres@127.0.0.1:$PG_PORT/postgres"

step "nginx on loopback: 2,000 files of 1-48 KiB at 64 KiB/s per connection"
mkdir -p "$WORK/www" "$WORK/nginx" "$WORK/runs"
python3 - "$WORK/www" << 'PY'
import os, random, sys
rng = random.Random(49)
for i in range(2000):
    with open(f"{sys.argv[1]}/f{i:05d}.bin", "wb") as out:
        out.write(rng.randbytes(rng.randint(1024, 48 << 10)))
PY
chmod -R a+rX "$WORK/www"
NGINX_PORT="$(free_port)"
cat > "$WORK/nginx/nginx.conf" << CONF
worker_processes 1;
daemon off;
pid $WORK/nginx/nginx.pid;
error_log $WORK/nginx/error.log;
events { worker_connections 1024; }
http {
    log_format requests '\$request_method \$request_uri \$status \$body_bytes_sent \$msec \$request_time "\$http_user_agent"';
    access_log $WORK/nginx/access.log requests;
    client_body_temp_path $WORK/nginx; proxy_temp_path $WORK/nginx; fastcgi_temp_path $WORK/nginx;
    uwsgi_temp_path $WORK/nginx; scgi_temp_path $WORK/nginx;
    server {
        listen 127.0.0.1:$NGINX_PORT;
        root $WORK/www;
        limit_rate 64k;
    }
}
CONF
nginx -c "$WORK/nginx/nginx.conf" &
NGINX_PID=$!
for _ in $(seq 50); do curl -sf -o /dev/null "http://127.0.0.1:$NGINX_PORT/f00000.bin" && break; sleep 0.1; done

RUN=(scripts/fleet_run.py --fleet "$FLEET" --db "$DB" --pg "$WORK/pg" --pgport "$PG_PORT"
    --postgres-sh scripts/postgres.sh --www "$WORK/www" --base "http://127.0.0.1:$NGINX_PORT"
    --access-log "$WORK/nginx/access.log" --work "$WORK/runs")

step "e2e: 2,000 URLs, 3 workers, SIGKILL, SIGSTOP past the lease, PostgreSQL restarted; then SIGTERM"
python3 "${RUN[@]}" --scenario e2e --urls 2000 --seed 49

step "chaos: seeded random kills, stops and database restarts"
if [ -n "${FLEET_SEED:-}" ]; then
    python3 "${RUN[@]}" --scenario chaos --urls 400 --shard-size 40 --seed "$FLEET_SEED"
else
    python3 "${RUN[@]}" --scenario chaos --urls 400 --shard-size 40 --trials "${FLEET_CHAOS_TRIALS:-2}"
fi
step "done"
