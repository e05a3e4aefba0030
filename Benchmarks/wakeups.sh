#!/usr/bin/env bash
# Benchmarks/wakeups.sh [COUNT] [TOP] — the thread wake-ups a small file costs (issue #52): `perf record -e
# sched:sched_waking --call-graph dwarf` of `list-harness` (what `dl -q -j 16 -i LIST` does with the library) and of
# the platform's floor (`urlsession-many LIST 16`: URLSession alone) over COUNT (default 1,000) 1 KiB files from
# loopback nginx, written to a tmpfs. Prints the wake-ups and context switches per file of each (`perf stat`, exact),
# and the TOP (default 20) call sites that the library adds most (its count, the floor's and the difference), per file,
# by their first three frames in user space
# (from the recorded stacks: perf drops some of those events when its buffer fills, so these per-file figures are a
# little low). HARNESS=PATH names another list-harness. Counts, not times; they move with the machine's load (a busy
# machine merges some wake-ups): run it a few times.
set -euo pipefail
cd "$(dirname "$0")"
COUNT=${1:-1000}
TOP=${2:-20}
source ./nginx-workspace.sh
swift build -c release --product urlsession-many > /dev/null
swift build -c release --product list-harness > /dev/null
BIN=$(swift build -c release --show-bin-path)
HARNESS=${HARNESS:-$BIN/list-harness}
command -v perf > /dev/null || { echo "wakeups.sh: needs perf (linux-perf)" >&2; exit 1; }

make_workspace wakeups
serve_one_file
mkdir -p "$WORK/mnt"
mount -t tmpfs -o size=2g tmpfs "$WORK/mnt"
trap 'kill $NGINX_PID 2> /dev/null; umount "$WORK/mnt" 2> /dev/null; rm -rf "$WORK"' EXIT
sleep 1
python3 -c "import sys; sys.stdout.write(''.join(f'http://127.0.0.1:$NGINX_PORT/f/{i}.bin\n' for i in range($COUNT)))" \
    > "$WORK/list.txt"

for run in library floor; do
    rm -rf "$WORK/mnt/out"
    if [ $run = library ]; then command=("$HARNESS" "$WORK/mnt/out" "$WORK/list.txt" 16)
    else command=("$BIN/urlsession-many" "$WORK/list.txt" 16); fi
    perf stat -x, -e sched:sched_waking,sched:sched_switch -o "$WORK/$run.stat" "${command[@]}" > /dev/null
    awk -F, -v n="$COUNT" -v run=$run '/sched_waking/ {w = $1 / n} /sched_switch/ {s = $1 / n}
        END {printf "%-8s %6.2f wake-ups, %6.2f context switches per file\n", run, w, s}' "$WORK/$run.stat"
done
rm -rf "$WORK/mnt/out"
record=(perf record -q -e sched:sched_waking --call-graph dwarf,16384)
"${record[@]}" -o "$WORK/library.data" "$HARNESS" "$WORK/mnt/out" "$WORK/list.txt" 16 > /dev/null
"${record[@]}" -o "$WORK/floor.data" "$BIN/urlsession-many" "$WORK/list.txt" 16 > /dev/null

# Each event's stack, without the kernel's, libc's and the semaphore frames under the waking call.
python3 - "$WORK" "$COUNT" "$TOP" <<'PY'
import collections, re, subprocess, sys
work, count, top = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
skip = re.compile(r'kernel|libc\.so|ld-linux|unknown|futex_wake|__new_sem_post|_dispatch_sema4|'
                  r'_dispatch_semaphore_signal_slow|_dispatch_root_queue_poke')
def sites(name):
    out = subprocess.run(['perf', 'script', '-i', f'{work}/{name}.data', '-F', 'ip,sym,dso', '--max-stack', '40'],
                         capture_output=True, text=True).stdout
    counter, events = collections.Counter(), 0
    for event in out.split('\n\n'):
        lines = [line.strip() for line in event.strip().split('\n') if line.strip()]
        if not lines:
            continue
        events += 1
        frames = []
        for line in lines:
            if skip.search(line):
                continue
            parts = line.split(None, 1)
            if len(parts) == 2:
                frames.append(parts[1].rsplit(' (', 1)[0])
            if len(frames) == 3:
                break
        counter[tuple(frames)] += 1
    return events, counter
library, sites_library = sites('library')
floor, sites_floor = sites('floor')
print(f'recorded wake-ups per file: library {library / count:.2f}, URLSession alone {floor / count:.2f}')
mangled = sorted({frame for sites in (sites_library, sites_floor) for site in sites for frame in site
                  if frame.startswith('$s')})
demangled = subprocess.run(['swift', 'demangle', '--simplified', '--compact'], input='\n'.join(mangled),
                           capture_output=True, text=True).stdout.split('\n')
names = dict(zip(mangled, demangled))
print(f'the {top} waking call sites the library adds most, per file (library, URLSession alone, difference):')
difference = collections.Counter({site: sites_library[site] - sites_floor[site]
                                  for site in set(sites_library) | set(sites_floor)})
for site, n in difference.most_common(top):
    print(f'{sites_library[site] / count:6.2f} {sites_floor[site] / count:6.2f} {n / count:+6.2f}  '
          + ' <- '.join(names.get(frame, frame)[:70] for frame in site))
PY
