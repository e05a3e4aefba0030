#!/usr/bin/env bash
# Benchmarks/restart.sh SIZE [FRACTION] — restart at scale (issue #34): `dl -q -j 16 -P OUT -i LIST` over SIZE URLs of
# 1 KiB (loopback nginx, one file under every path, files on a tmpfs), killed with SIGKILL once FRACTION (default
# 0.5) of the list has been answered, then the same command again. Prints: files delivered before the kill, the
# state folder then (journal size and lines), `dl --list` on it (time, peak RSS), the rerun's wall time and peak RSS,
# the seconds from the rerun's start to its first GET (and the line of that file: the rerun reads the list from where
# the first run's reading stopped, then its beginning), and nginx's count of the rerun's GETs and HEADs of files the
# first run delivered (the extended-attribute rule allows one HEAD each and no GET). DL=PATH picks the binary.
set -euo pipefail
cd "$(dirname "$0")"
SIZE=${1:-100000}
FRACTION=${2:-0.5}
source ./nginx-workspace.sh
if [ -z "${DL:-}" ]; then
    DL=$(../Examples/dl/build-release.sh 2> /dev/null)  # dl as shipped
fi

make_workspace restart
serve_one_file "log_format times '\$msec \$request_method \$request_uri \$status'; access_log $WORK/logs/access.log times buffer=64k flush=1s;"
mkdir -p "$WORK/mnt"
mount -t tmpfs -o size=16g tmpfs "$WORK/mnt"
OUT=$WORK/mnt/out
trap 'kill $NGINX_PID 2> /dev/null; umount "$WORK/mnt" 2> /dev/null; rm -rf "$WORK"' EXIT
sleep 1
LIST=$WORK/list.txt
python3 -c "import sys; sys.stdout.write(''.join(f'http://127.0.0.1:$NGINX_PORT/f/{i}.bin\n' for i in range($SIZE)))" > "$LIST"
LOG=$WORK/logs/access.log

# The first run, killed once FRACTION of the list was answered (nginx's log, flushed every second).
target=$(python3 -c "print(int($SIZE * $FRACTION))")
"$DL" -q -j 16 -P "$OUT" -i "$LIST" > /dev/null 2> "$WORK/first.err" &
DL_PID=$!
while [ "$(wc -l < "$LOG" 2> /dev/null || echo 0)" -lt "$target" ]; do
    kill -0 $DL_PID 2> /dev/null || { echo "the first run ended before the kill" >&2; exit 1; }
    sleep 0.2
done
kill -9 $DL_PID
wait $DL_PID 2> /dev/null || true
sleep 1.5  # nginx's log buffer
find "$OUT" -maxdepth 1 -name '*.bin' -printf '/f/%f\n' | sort > "$WORK/delivered.txt"
first_lines=$(wc -l < "$LOG")
echo "killed after $first_lines requests; delivered: $(wc -l < "$WORK/delivered.txt") files"
echo "state folder: journal $(stat -c %s "$OUT/.dl/journal" 2> /dev/null || echo 0) bytes, $(wc -l < "$OUT/.dl/journal" 2> /dev/null || echo 0) lines; partial files: $(ls "$OUT/.dl/partial" 2> /dev/null | wc -l); list position: line $(awk '{ print $8 + 1 }' "$OUT/.dl/list-position" 2> /dev/null || echo none)"
/usr/bin/time -f "%e %M" -o "$WORK/list.time" "$DL" --list --dir "$OUT" > "$WORK/list.out" 2>&1 || true
read -r wall kb < "$WORK/list.time"
echo "dl --list: $wall s, $((kb / 1024)) MB, $(wc -l < "$WORK/list.out") lines"

# The rerun: the same command.
start=$(date +%s.%N)
/usr/bin/time -f "%e %M %U %S" -o "$WORK/rerun.time" "$DL" -q -j 16 -P "$OUT" -i "$LIST" > /dev/null 2> "$WORK/rerun.err" \
    || { echo "the rerun failed:" >&2; tail -3 "$WORK/rerun.err" >&2; }
read -r wall kb user sys < "$WORK/rerun.time"
sleep 1.5
tail -n +"$((first_lines + 1))" "$LOG" > "$WORK/rerun.log"
first_get=$(awk '$2 == "GET" { print $1; exit }' "$WORK/rerun.log")
first_path=$(awk '$2 == "GET" { print $3; exit }' "$WORK/rerun.log")
echo "rerun: $wall s, $((kb / 1024)) MB peak RSS, CPU $(echo "$user + $sys" | bc) s; first GET $(echo "$first_get - $start" | bc) s after the start ($first_path)"
awk 'NR == FNR { delivered[$1] = 1; next } { if ($3 in delivered) n[$2]++; else m[$2]++ }
    END { printf "rerun requests for delivered files: %d GET, %d HEAD; for the rest: %d GET, %d HEAD\n", n["GET"], n["HEAD"], m["GET"], m["HEAD"] }' \
    "$WORK/delivered.txt" "$WORK/rerun.log"
echo "files now: $(find "$OUT" -maxdepth 1 -name '*.bin' | wc -l) of $SIZE; state folder left: $([ -d "$OUT/.dl" ] && echo yes || echo no)"
