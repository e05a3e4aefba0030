# Benchmarks/nginx-workspace.sh — sourced by ab.sh, wan.sh, lists.sh and restart.sh: a scratch folder WORK with
# WORK/docs served by nginx on loopback (sendfile, no access log), a free port, and the median of a list of numbers.
#
#   source nginx-workspace.sh; make_workspace NAME; (fill $WORK/docs); serve_docs; … NGINX_PORT, NGINX_PID

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# The median of the numbers on standard input, separated by blanks or newlines.
median() { tr ' ' '\n' | grep -v '^$' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# Creates WORK (/tmp/downloader-NAME.XXXXXX) with docs/ and logs/ that nginx's worker may read and write.
make_workspace() {
    # nginx-light where the distribution still has it, else nginx (Debian 12's package lists may need an update).
    command -v nginx > /dev/null || apt-get install -y -q nginx-light > /dev/null 2>&1 \
        || { apt-get update -q > /dev/null && apt-get install -y -q nginx > /dev/null; }
    WORK=$(mktemp -d "/tmp/downloader-$1.XXXXXX")
    chmod 755 "$WORK"
    mkdir -p "$WORK/docs" "$WORK/logs"
    chmod 777 "$WORK/logs"
}

# Starts nginx serving WORK/docs on a free loopback port: sets NGINX_PORT and NGINX_PID.
serve_docs() {
    chmod -R a+rX "$WORK/docs"
    NGINX_PORT=$(free_port)
    cat > "$WORK/nginx.conf" <<CONF
daemon off; pid $WORK/nginx.pid; error_log $WORK/logs/error.log; user nobody nogroup; worker_processes 1;
events {}
http { access_log off; sendfile on; server { listen 127.0.0.1:$NGINX_PORT; root $WORK/docs; } }
CONF
    nginx -c "$WORK/nginx.conf" &
    NGINX_PID=$!
}

# Starts nginx serving one 1 KiB file (WORK/docs/one.bin) under every path, for lists of many small files: sets
# NGINX_PORT and NGINX_PID. $1, if given, is an access log line for the http block (default: none).
serve_one_file() {
    head -c 1024 /dev/urandom > "$WORK/docs/one.bin"
    chmod -R a+rX "$WORK/docs"
    NGINX_PORT=$(free_port)
    cat > "$WORK/nginx.conf" <<CONF
daemon off; pid $WORK/nginx.pid; error_log $WORK/logs/error.log; user nobody nogroup; worker_processes 1;
worker_rlimit_nofile 65536;
events { worker_connections 4096; }
http { ${1:-access_log off;} sendfile on; keepalive_requests 1000000;
  server { listen 127.0.0.1:$NGINX_PORT; root $WORK/docs; location / { try_files /one.bin =404; } } }
CONF
    nginx -c "$WORK/nginx.conf" &
    NGINX_PID=$!
}
