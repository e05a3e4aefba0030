#!/usr/bin/env bash
# Tests/Reliability/real-servers.sh — `dl` against servers nobody here wrote: nginx, Apache 2.4 and lighttpd from the
# package manager, each on a loopback port serving the same files. For each server: a whole download, a resume after
# `kill -9`, four connections (-x 4), a rerun of a finished command (a HEAD, no body), and the Content-Encoding cases
# (Apache `AddEncoding gzip .gz` on a .tar.gz with ranges; nginx `gzip_static always`). Prints one line per case and
# exits 1 if any failed. Installs the servers with apt-get when they are missing.
#
#   Tests/Reliability/real-servers.sh            (DL=path/to/dl to use another build; SIZE_MB=64 by default)
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SIZE_MB=${SIZE_MB:-64}
if ! command -v nginx >/dev/null || ! command -v apache2 >/dev/null || ! command -v lighttpd >/dev/null; then
    apt-get install -y -q nginx-light apache2 lighttpd >/dev/null 2>&1 ||
        { apt-get update -q >/dev/null && apt-get install -y -q nginx-light apache2 lighttpd >/dev/null; }
fi
if [ -z "${DL:-}" ]; then
    DL="$("$ROOT/Examples/dl/build-release.sh")"  # dl as shipped
fi
WORK=$(mktemp -d /tmp/downloader-real-servers.XXXXXX)
chmod 755 "$WORK"
mkdir -m 777 "$WORK/logs"
PIDS=()
cleanup() { for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT

# The files every server serves.
DOCS="$WORK/docs"
mkdir -p "$DOCS/gz"
head -c $((SIZE_MB << 20)) /dev/urandom > "$DOCS/big.bin"
seq 1 200000 > "$WORK/numbers.txt"
tar -C "$WORK" -cf "$WORK/data.tar" numbers.txt
gzip -9 -c "$WORK/data.tar" > "$DOCS/data.tar.gz"
gzip -9 -c "$WORK/numbers.txt" > "$DOCS/gz/numbers.txt.gz"
chmod -R a+rX "$DOCS"
BIG_MD5=$(md5sum < "$DOCS/big.bin" | cut -d' ' -f1)
TAR_MD5=$(md5sum < "$WORK/data.tar" | cut -d' ' -f1)
TARGZ_MD5=$(md5sum < "$DOCS/data.tar.gz" | cut -d' ' -f1)
TEXT_MD5=$(md5sum < "$WORK/numbers.txt" | cut -d' ' -f1)

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 1 100); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.1; done; return 1; }

start_nginx() {
    cat > "$WORK/nginx.conf" <<EOF
daemon off; pid $WORK/nginx.pid; error_log $WORK/logs/nginx-error.log; user nobody nogroup;
events {}
http { log_format sent '\$request_method \$status \$body_bytes_sent'; access_log $WORK/logs/nginx-access.log sent; types { application/octet-stream bin; text/plain txt; application/gzip gz; }
  server { listen 127.0.0.1:$1; root $DOCS; location /gz/ { gzip_static always; } } }
EOF
    nginx -c "$WORK/nginx.conf" & PIDS+=($!)
}
start_apache() {
    cat > "$WORK/apache.conf" <<EOF
LoadModule mpm_event_module /usr/lib/apache2/modules/mod_mpm_event.so
LoadModule authz_core_module /usr/lib/apache2/modules/mod_authz_core.so
LoadModule mime_module /usr/lib/apache2/modules/mod_mime.so
User nobody
Group nogroup
Listen 127.0.0.1:$1
ServerName localhost
PidFile $WORK/apache.pid
ErrorLog $WORK/logs/apache-error.log
DocumentRoot $DOCS
TypesConfig /etc/mime.types
AddEncoding gzip .gz
<Directory $DOCS>
  Require all granted
</Directory>
EOF
    apache2 -f "$WORK/apache.conf" -DFOREGROUND & PIDS+=($!)
}
start_lighttpd() {
    cat > "$WORK/lighttpd.conf" <<EOF
server.document-root = "$DOCS"
server.bind = "127.0.0.1"
server.port = $1
server.errorlog = "$WORK/logs/lighttpd-error.log"
server.username = "nobody"
server.groupname = "nogroup"
mimetype.assign = (".bin" => "application/octet-stream", ".gz" => "application/gzip", ".txt" => "text/plain")
EOF
    lighttpd -D -f "$WORK/lighttpd.conf" & PIDS+=($!)
}

FAILED=0
report() {  # server case expected actual detail
    if [ "$3" = "$4" ]; then echo "ok    $1 $2 $5"; else echo "FAIL  $1 $2: expected $3, got $4 $5"; FAILED=1; fi
}
md5_of() { [ -f "$1" ] && md5sum < "$1" | cut -d' ' -f1 || echo missing; }

for server in nginx apache lighttpd; do
    port=$(free_port)
    "start_$server" "$port"
    wait_port "$port" || { echo "FAIL  $server did not start"; FAILED=1; continue; }
    base="http://127.0.0.1:$port"
    out="$WORK/out-$server"

    "$DL" -q -P "$out/whole" "$base/big.bin" > /dev/null 2>&1
    report "$server" "whole download" "$BIG_MD5" "$(md5_of "$out/whole/big.bin")" ""

    "$DL" -q --limit-rate 16M -P "$out/killed" "$base/big.bin" > /dev/null 2>&1 &
    pid=$!
    sleep 1.5  # a moment into the transfer; the kill may land anywhere, which is the point
    kill -9 "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    partial=$(du -b "$out/killed/.dl/partial" 2>/dev/null | tail -1 | cut -f1)
    "$DL" -q -P "$out/killed" "$base/big.bin" > /dev/null 2>&1
    report "$server" "kill -9 then resume" "$BIG_MD5" "$(md5_of "$out/killed/big.bin")" "(partial area ${partial:-0} B)"

    "$DL" -q -x 4 -P "$out/x4" "$base/big.bin" > /dev/null 2>&1
    report "$server" "-x 4" "$BIG_MD5" "$(md5_of "$out/x4/big.bin")" ""

    before=$(cat "$WORK/logs/nginx-access.log" 2>/dev/null | wc -l)
    "$DL" -q -P "$out/whole" "$base/big.bin" > /dev/null 2>&1
    sent=""
    if [ "$server" = nginx ]; then
        sent="(requests: $(tail -n +$((before + 1)) "$WORK/logs/nginx-access.log" | tr '\n' ';'))"
    fi
    report "$server" "rerun of a finished command" "$BIG_MD5" "$(md5_of "$out/whole/big.bin")" "$sent"

    log="$WORK/$server-targz.log"
    "$DL" -P "$out/enc" "$base/data.tar.gz" > /dev/null 2> "$log"
    got=$(md5_of "$out/enc/data.tar.gz")
    case "$got" in
    "$TARGZ_MD5") echo "ok    $server .tar.gz as stored (no Content-Encoding sent)" ;;
    "$TAR_MD5") echo "ok    $server .tar.gz labelled Content-Encoding gzip: saved decoded ($(grep -c 'Content-Encoding' "$log") notice)" ;;
    *) echo "FAIL  $server .tar.gz: $got"; cat "$log"; FAILED=1 ;;
    esac

    if [ "$server" = nginx ]; then
        "$DL" -q -P "$out/static" "$base/gz/numbers.txt" > /dev/null 2>&1
        report "$server" "gzip_static always: the decoded text" "$TEXT_MD5" "$(md5_of "$out/static/numbers.txt")" ""
    fi
done
exit $FAILED
