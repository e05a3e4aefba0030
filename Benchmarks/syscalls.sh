#!/usr/bin/env bash
# Benchmarks/syscalls.sh [COUNT] — the system calls a small file costs (issue #52): `strace -f -c` of
# `dl -q -j 16 -P OUT -i LIST` and of the platform's floor (`urlsession-many LIST 16`: URLSession alone, bodies
# discarded, no disk) over COUNT (default 2,000) 1 KiB files from loopback nginx, written to a tmpfs. Prints, per
# system call, the calls per file of each and the difference (dl's own). DL=PATH names another release dl;
# KEEP_STRACE=DIR keeps both `strace -c` tables there.
# Counts, not times: they do not depend on the machine's load (the futex and epoll counts do a little: they are
# wake-ups, and a busier machine merges some).
set -euo pipefail
cd "$(dirname "$0")"
COUNT=${1:-2000}
source ./nginx-workspace.sh
swift build -c release --product urlsession-many > /dev/null
if [ -z "${DL:-}" ]; then
    DL=$(../Examples/dl/build-release.sh 2> /dev/null)  # dl as shipped
fi
FLOOR=$(swift build -c release --show-bin-path)/urlsession-many

make_workspace syscalls
serve_one_file
mkdir -p "$WORK/mnt"
mount -t tmpfs -o size=2g tmpfs "$WORK/mnt"
trap 'kill $NGINX_PID 2> /dev/null; umount "$WORK/mnt" 2> /dev/null; [ -n "${KEEP_STRACE:-}" ] && cp "$WORK"/*.strace "$KEEP_STRACE"/; rm -rf "$WORK"' EXIT
sleep 1
python3 -c "import sys; sys.stdout.write(''.join(f'http://127.0.0.1:$NGINX_PORT/f/{i}.bin\n' for i in range($COUNT)))" \
    > "$WORK/list.txt"

strace -f -c -o "$WORK/dl.strace" "$DL" -q -j 16 -P "$WORK/mnt/out" -i "$WORK/list.txt" > /dev/null
files=$(find "$WORK/mnt/out" -maxdepth 1 -type f | wc -l)
[ "$files" = "$COUNT" ] || echo "dl delivered $files files of $COUNT" >&2
strace -f -c -o "$WORK/floor.strace" "$FLOOR" "$WORK/list.txt" 16 > /dev/null

# strace -c's table: "% time seconds usecs/call calls errors syscall" (errors may be empty).
python3 - "$WORK/dl.strace" "$WORK/floor.strace" "$COUNT" <<'PY'
import sys
def table(path):
    counts = {}
    for line in open(path):
        parts = line.split()
        if len(parts) < 5 or not parts[0][0].isdigit() or parts[-1] == "total":
            continue
        counts[parts[-1]] = int(parts[3])
    return counts
dl, floor, n = table(sys.argv[1]), table(sys.argv[2]), int(sys.argv[3])
rows = sorted(set(dl) | set(floor), key=lambda name: -(dl.get(name, 0) - floor.get(name, 0)))
print(f"| system call | dl per file | floor per file | dl's own per file |")
print("|---|---|---|---|")
for name in rows:
    own = (dl.get(name, 0) - floor.get(name, 0)) / n
    if abs(own) < 0.05 and dl.get(name, 0) / n < 0.05:
        continue
    print(f"| `{name}` | {dl.get(name, 0) / n:.2f} | {floor.get(name, 0) / n:.2f} | {own:+.2f} |")
total = (sum(dl.values()) - sum(floor.values())) / n
print(f"| all | {sum(dl.values()) / n:.1f} | {sum(floor.values()) / n:.1f} | {total:+.1f} |")
PY
