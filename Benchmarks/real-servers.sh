#!/usr/bin/env bash
# Benchmarks/real-servers.sh DL — tries a dl binary against Apache 2.4 and lighttpd (Debian's packages, installed
# when missing) on loopback, as a user would meet them: for each server
#   1. a 96 MiB and a 300 KB file, both identical to the served ones;
#   2. kill -9 at about 1.5 s into a rate-limited download, then the same command: identical;
#   3. kill -9 as in 2, then the file is replaced by another (a new mtime, so new validators), then the same command:
#      identical to the new file (one warning that the resource changed);
#   4. -x4 (segments): identical.
# Each server logs Range and If-Range per request (logs/), which is where the Apache case of 6aa660e showed: a
# Last-Modified date of the second before went out in If-Range, and Apache answered the whole file.
# Not run by CI (it installs two servers): by hand, before calling a transfer change done.
set -uo pipefail
DL=${1:?usage: real-servers.sh PATH-TO-dl}
source "$(dirname "$0")/nginx-workspace.sh"

if ! command -v apache2 > /dev/null || ! command -v lighttpd > /dev/null; then
    apt-get update -q > /dev/null && apt-get install -y -q apache2 lighttpd > /dev/null
fi
make_workspace real-servers
head -c $((96 << 20)) /dev/urandom > "$WORK/docs/big.bin"
head -c 300000 /dev/urandom > "$WORK/docs/small.bin"
cp "$WORK/docs/big.bin" "$WORK/docs/change.bin"
chmod 644 "$WORK"/docs/*
LIGHTTPD_PORT=$(free_port)
APACHE_PORT=$(free_port)

cat > "$WORK/lighttpd.conf" << EOF
server.document-root = "$WORK/docs"
server.bind = "127.0.0.1"
server.port = $LIGHTTPD_PORT
server.errorlog = "$WORK/logs/lighttpd-error.log"
server.modules += ( "mod_accesslog" )
accesslog.filename = "$WORK/logs/lighttpd-access.log"
accesslog.format = "%h \"%r\" %>s %b \"%{Range}i\" \"%{If-Range}i\""
EOF
cat > "$WORK/apache.conf" << EOF
ServerRoot "/etc/apache2"
Listen 127.0.0.1:$APACHE_PORT
PidFile $WORK/logs/apache.pid
LoadModule mpm_event_module /usr/lib/apache2/modules/mod_mpm_event.so
LoadModule authz_core_module /usr/lib/apache2/modules/mod_authz_core.so
LoadModule mime_module /usr/lib/apache2/modules/mod_mime.so
User www-data
Group www-data
ServerName localhost
DocumentRoot "$WORK/docs"
<Directory "$WORK/docs">
  Require all granted
</Directory>
ErrorLog $WORK/logs/apache-error.log
LogFormat "%h \"%r\" %>s %b \"%{Range}i\" \"%{If-Range}i\"" ranges
CustomLog $WORK/logs/apache-access.log ranges
TypesConfig /etc/mime.types
EOF
lighttpd -f "$WORK/lighttpd.conf"
apache2 -f "$WORK/apache.conf" -k start
stop_servers() {
    apache2 -f "$WORK/apache.conf" -k stop 2> /dev/null
    pkill -f "lighttpd -f $WORK/lighttpd.conf" 2> /dev/null
}
trap stop_servers EXIT
sleep 1

FAILED=0
# Sets RESULT to the exit status and whether FILE is identical to EXPECTED; any failure marks the run failed.
check() {
    local verdict=identical
    [ "$1" = 0 ] || FAILED=1
    cmp -s "$2" "$3" || { FAILED=1; verdict=DIFFERENT; }
    RESULT="rc=$1 $verdict"
}
# Starts DL in the background, kills it with SIGKILL after 1.5 s.
killed_run() {
    "$DL" -q --limit-rate 20M -P "$1" "$2" > /dev/null 2>&1 &
    local pid=$!
    sleep 1.5
    kill -9 "$pid"
    wait "$pid" 2> /dev/null
}
try() {
    local name=$1 base=http://127.0.0.1:$2 out=$WORK/$1 rc
    "$DL" -q -P "$out/plain" "$base/big.bin" "$base/small.bin" > /dev/null 2> "$out.plain.err"
    rc=$?
    check $rc "$out/plain/small.bin" "$WORK/docs/small.bin"
    check $rc "$out/plain/big.bin" "$WORK/docs/big.bin"
    echo "$name: plain: $RESULT"
    killed_run "$out/resume" "$base/big.bin"
    "$DL" -q -P "$out/resume" "$base/big.bin" > /dev/null 2> "$out.resume.err"
    check $? "$out/resume/big.bin" "$WORK/docs/big.bin"
    echo "$name: kill -9, then again: $RESULT"
    cp "$WORK/docs/big.bin" "$WORK/docs/change.bin"
    touch -d '1 hour ago' "$WORK/docs/change.bin"
    killed_run "$out/change" "$base/change.bin"
    head -c $((96 << 20)) /dev/urandom > "$WORK/docs/change.new" && chmod 644 "$WORK/docs/change.new"
    mv "$WORK/docs/change.new" "$WORK/docs/change.bin"
    "$DL" -q -P "$out/change" "$base/change.bin" > /dev/null 2> "$out.change.err"
    check $? "$out/change/change.bin" "$WORK/docs/change.bin"
    echo "$name: kill -9, file replaced, then again: $RESULT ($(grep -c . "$out.change.err") messages)"
    "$DL" -q -x4 -P "$out/segments" "$base/big.bin" > /dev/null 2> "$out.segments.err"
    check $? "$out/segments/big.bin" "$WORK/docs/big.bin"
    echo "$name: -x4: $RESULT"
}
try apache "$APACHE_PORT"
try lighttpd "$LIGHTTPD_PORT"
echo "logs: $WORK/logs"
exit $FAILED
