#!/usr/bin/env bash
# The fleet's numbers for BENCHMARKS.md (issue #49), release builds, PostgreSQL from Debian's packages and nginx on
# loopback, started here (about 10 minutes):
#   1. 20,000 URLs (1-48 KiB), 3 workers, one SIGKILLed and started again, one SIGSTOPped past its lease, PostgreSQL
#      restarted: fleet_run.py's checks (one result per URL, every file identical, GETs ≤ 1.05×), and the rows and
#      transactions PostgreSQL counted per second;
#   2. the queue's overhead: the same 20,000 URLs by `dl -j 16 -i LIST` and by `add` + one `work -j 16`, interleaved;
#   3. a server that caps each connection (nginx limit_rate 128k): 48 files of 1 MiB by one worker, then three;
#   4. 1,000,000 URLs through `add`: time and peak memory, then the same list again (adds nothing).
# Usage: Examples/Fleet/scripts/bench.sh [RUNS [PARTS]]  (RUNS interleaved rounds for 2 and 3, default 3; PARTS
# the parts to run, default "1 2 3 4")
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-3}
PARTS=${2:-"1 2 3 4"}
part() { [[ " $PARTS " == *" $1 "* ]]; }
command -v nginx > /dev/null || { apt-get update -q > /dev/null && apt-get install -y -q nginx > /dev/null; }
swift build -c release -Xswiftc -warnings-as-errors > /dev/null
FLEET="$(swift build -c release --show-bin-path)/downloader-fleet"
(cd ../dl && swift build -c release --product dl --scratch-path .build-release > /dev/null)
DL="$(cd ../dl && swift build -c release --scratch-path .build-release --show-bin-path)/dl"

WORK="$(mktemp -d /tmp/downloader-fleet-bench.XXXXXX)"
chmod 755 "$WORK"
cleanup() {
    [ -n "${NGINX_PID:-}" ] && kill "$NGINX_PID" 2> /dev/null || true
    scripts/postgres.sh stop "$WORK/pg" 2> /dev/null || true
    umount "$WORK/mnt" 2> /dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
PG_PORT="$(free_port)"
scripts/postgres.sh start "$WORK/pg" "$PG_PORT"
DB="postgres://postgres@127.0.0.1:$PG_PORT/postgres"
export DATABASE_URL="$DB"

mkdir -p "$WORK/www/capped" "$WORK/nginx" "$WORK/runs" "$WORK/mnt"
# Outputs on a tmpfs: on ext4, creating thousands of files right after thousands were deleted costs more in the
# kernel's inode allocator than the downloads (Benchmarks/lists.sh), and swings from run to run.
mount -t tmpfs -o size=8g tmpfs "$WORK/mnt"
python3 - "$WORK/www" << 'PY'
import os, random, sys
rng = random.Random(49)
for i in range(20000):
    with open(f"{sys.argv[1]}/f{i:05d}.bin", "wb") as out:
        out.write(rng.randbytes(rng.randint(1024, 48 << 10)))
for i in range(48):
    with open(f"{sys.argv[1]}/capped/c{i:03d}.bin", "wb") as out:
        out.write(rng.randbytes(1 << 20))
PY
chmod -R a+rX "$WORK/www"
NGINX_PORT="$(free_port)"
BASE="http://127.0.0.1:$NGINX_PORT"
cat > "$WORK/nginx/nginx.conf" << CONF
worker_processes 2;
daemon off;
pid $WORK/nginx/nginx.pid;
error_log $WORK/nginx/error.log;
events { worker_connections 4096; }
http {
    sendfile on;
    log_format requests '\$request_method \$request_uri \$status \$body_bytes_sent';
    access_log $WORK/nginx/access.log requests;
    client_body_temp_path $WORK/nginx; proxy_temp_path $WORK/nginx; fastcgi_temp_path $WORK/nginx;
    uwsgi_temp_path $WORK/nginx; scgi_temp_path $WORK/nginx;
    server {
        listen 127.0.0.1:$NGINX_PORT backlog=4096;
        root $WORK/www;
        location /capped/ { limit_rate 128k; }  # nginx sends the first second's worth at once
    }
}
CONF
nginx -c "$WORK/nginx/nginx.conf" &
NGINX_PID=$!
for _ in $(seq 50); do curl -sf -o /dev/null "$BASE/f00000.bin" && break; sleep 0.1; done
stats() { scripts/postgres.sh stats "$WORK/pg" "$PG_PORT"; }
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

if part 1; then
echo "== 1. 20,000 URLs, 3 workers, SIGKILL, SIGSTOP past the lease, PostgreSQL restarted"
before=$(stats); start=$(date +%s.%N)
python3 scripts/fleet_run.py --fleet "$FLEET" --db "$DB" --pg "$WORK/pg" --pgport "$PG_PORT" \
    --postgres-sh scripts/postgres.sh --www "$WORK/www" --base "$BASE" --access-log "$WORK/nginx/access.log" \
    --work "$WORK/mnt/runs" --scenario e2e --urls 20000 --shard-size 1000 -j 16 --lease 10 --seed 20000 --deadline 600
after=$(stats); end=$(date +%s.%N)
python3 - "$before" "$after" "$start" "$end" << 'PY'
import sys
b = [int(x) for x in sys.argv[1].split("|")]; a = [int(x) for x in sys.argv[2].split("|")]
t = float(sys.argv[4]) - float(sys.argv[3])
print(f"PostgreSQL over {t:.1f} s (the checks' queries included): {(a[0]-b[0])/t:.0f} transactions/s, "
      f"{(a[1]-b[1])/t:.0f} rows written/s, {(a[2]-b[2])/t:.0f} rows read/s")
PY

fi

if part 2; then
echo "== 2. the queue's overhead: dl -j 16 -i LIST against add + one work -j 16 (20,000 URLs; $RUNS rounds)"
python3 -c "import sys; sys.stdout.write(''.join(f'$BASE/f{i:05d}.bin?r=R\n' for i in range(20000)))" > "$WORK/list.tmpl"
: > "$WORK/dl.times"; : > "$WORK/fleet.times"; : > "$WORK/fleet.pg"
for run in $(seq "$RUNS"); do
    sed "s/R\$/dl$run/" "$WORK/list.tmpl" > "$WORK/list"
    rm -rf "$WORK/mnt/out"; mkdir -p "$WORK/mnt/out"
    /usr/bin/time -f "%e" -o "$WORK/t" "$DL" -q -j 16 -P "$WORK/mnt/out" -i "$WORK/list" > /dev/null
    cat "$WORK/t" >> "$WORK/dl.times"
    sed "s/R\$/fleet$run/" "$WORK/list.tmpl" > "$WORK/list"
    rm -rf "$WORK/mnt/out"; mkdir -p "$WORK/mnt/out"
    before=$(stats)
    /usr/bin/time -f "%e" -o "$WORK/t" bash -c "'$FLEET' add --job over$run '$WORK/list' > /dev/null && \
        '$FLEET' work --job over$run --dir '$WORK/mnt/out' -j 16 --exit-when-done 2> '$WORK/work.log'"
    after=$(stats)
    cat "$WORK/t" >> "$WORK/fleet.times"
    echo "$before $after $(cat "$WORK/t")" >> "$WORK/fleet.pg"
    echo "round $run: dl $(tail -1 "$WORK/dl.times") s, fleet $(cat "$WORK/t") s"
done
dl_median=$(median < "$WORK/dl.times"); fleet_median=$(median < "$WORK/fleet.times")
echo "dl: $(tr '\n' ' ' < "$WORK/dl.times")-> median $dl_median s; fleet: $(tr '\n' ' ' < "$WORK/fleet.times")-> median $fleet_median s; ratio $(echo "scale=3; $fleet_median / $dl_median" | bc)"
python3 - "$WORK/fleet.pg" << 'PY'
import sys
for line in open(sys.argv[1]):
    b, a, t = line.split(); b = [int(x) for x in b.split("|")]; a = [int(x) for x in a.split("|")]; t = float(t)
    print(f"  PostgreSQL during one worker's run: {(a[0]-b[0])/t:.0f} transactions/s, {(a[1]-b[1])/t:.0f} rows written/s")
PY

fi

if part 3; then
echo "== 3. a server capping each connection at 128 KiB/s: 48 × 1 MiB, one worker against three (-j 8 each)"
python3 -c "import sys; sys.stdout.write(''.join(f'$BASE/capped/c{i:03d}.bin?r=R\n' for i in range(48)))" > "$WORK/capped.tmpl"
: > "$WORK/one.times"; : > "$WORK/three.times"
for run in $(seq "$RUNS"); do
    for workers in 1 3; do
        sed "s/R\$/w$workers-$run/" "$WORK/capped.tmpl" > "$WORK/list"
        job="capped-$workers-$run"
        "$FLEET" add --job "$job" --shard-size 16 "$WORK/list" > /dev/null
        begin=$(date +%s.%N)
        pids=()
        for w in $(seq "$workers"); do
            rm -rf "$WORK/mnt/cap$w"; mkdir -p "$WORK/mnt/cap$w"
            "$FLEET" work --job "$job" --dir "$WORK/mnt/cap$w" -j 8 --exit-when-done 2> "$WORK/cap$w.log" &
            pids+=($!)
        done
        wait "${pids[@]}"
        took=$(echo "$(date +%s.%N) - $begin" | bc)
        if [ "$workers" = 1 ]; then echo "$took" >> "$WORK/one.times"; else echo "$took" >> "$WORK/three.times"; fi
        echo "round $run: $workers worker(s) $took s; $("$FLEET" status --job "$job" | head -1)"
    done
done
one=$(median < "$WORK/one.times"); three=$(median < "$WORK/three.times")
echo "one worker: median $one s; three workers: median $three s; ratio $(echo "scale=3; $three / $one" | bc)"

fi

if part 4; then
echo "== 4. 1,000,000 URLs through add"
python3 -c "import sys; sys.stdout.write(''.join(f'http://files.example/{i:07d}.bin\n' for i in range(1000000)))" > "$WORK/million"
/usr/bin/time -f "%e s, peak RSS %M KB" "$FLEET" add --job million "$WORK/million"
/usr/bin/time -f "%e s, peak RSS %M KB (again: adds nothing)" "$FLEET" add --job million "$WORK/million"
"$FLEET" status --job million | head -1
fi
