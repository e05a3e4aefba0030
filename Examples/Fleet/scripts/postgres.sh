#!/usr/bin/env bash
# A throwaway PostgreSQL cluster on loopback for the fleet's scripts (e2e.sh, chaos.sh, bench.sh). PostgreSQL refuses
# to run as root, so the cluster belongs to Debian's `postgres` user (created by the package). Installs PostgreSQL
# from Debian's packages when no server is found.
#   postgres.sh start DIR PORT   creates the cluster in DIR (trust on loopback) if new, starts it, waits until it answers
#   postgres.sh stop DIR         fast shutdown          postgres.sh kill DIR   SIGKILL the postmaster (a crash)
#   postgres.sh stats DIR PORT   prints rows written and transactions PostgreSQL counted for the database
# The scripts then use DATABASE_URL=postgres://postgres@127.0.0.1:PORT/postgres.
set -euo pipefail

bin() {
    local name="$1" found
    for found in /usr/lib/postgresql/*/bin/"$name" /usr/local/bin/"$name"; do
        [ -x "$found" ] && { echo "$found"; return; }
    done
    command -v "$name"
}

install_if_missing() {
    if ! bin pg_ctl > /dev/null 2>&1 || ! id postgres > /dev/null 2>&1; then
        apt-get update -q > /dev/null && apt-get install -y -q postgresql > /dev/null
    fi
    [ "$(id -u)" = 0 ] || { echo "postgres.sh: run as root (it runs PostgreSQL as the postgres user)" >&2; exit 1; }
}

as_postgres() { runuser -u postgres -- "$@"; }

case "${1:-}" in
start)
    DIR="$2" PORT="$3"
    install_if_missing
    mkdir -p "$DIR"
    chown postgres: "$DIR"
    chmod 700 "$DIR"
    if [ ! -f "$DIR/PG_VERSION" ]; then
        as_postgres "$(bin initdb)" -D "$DIR" -A trust -U postgres --no-sync > "$DIR.initdb.log" 2>&1 \
            || { cat "$DIR.initdb.log" >&2; exit 1; }
    fi
    as_postgres "$(bin pg_ctl)" -D "$DIR" -l "$DIR/server.log" -w -t 60 \
        -o "-c listen_addresses=127.0.0.1 -c port=$PORT -c unix_socket_directories=$DIR -c fsync=on \
            -c max_connections=200 -c shared_buffers=256MB" start > /dev/null \
        || { echo "postgres.sh: PostgreSQL did not start; the end of $DIR/server.log:" >&2
             tail -20 "$DIR/server.log" >&2; exit 1; }
    ;;
stop)
    as_postgres "$(bin pg_ctl)" -D "$2" -m fast -w stop > /dev/null
    ;;
kill)
    PID="$(head -1 "$2/postmaster.pid")"
    CHILDREN="$(pgrep -P "$PID" || true)"
    kill -9 "$PID"
    # The postmaster's children end when they see it gone (killed too, so none lingers); the next start recovers
    # from the WAL. A killed process stays a zombie until its parent reaps it, and the postmaster's parent is
    # whatever adopted it (PID 1 in a container may never reap): PostgreSQL reads a PID that still answers
    # kill(pid, 0) in its lock files as a live postmaster and refuses to start, so wait for "dead or a zombie",
    # then remove both lock files (the data folder's and the socket's).
    [ -n "$CHILDREN" ] && kill -9 $CHILDREN 2> /dev/null || true
    alive() {
        local state
        state="$(awk '{ print $3 }' "/proc/$1/stat" 2> /dev/null)" || return 1
        [ -n "$state" ] && [ "$state" != Z ] && [ "$state" != X ]
    }
    for _ in $(seq 100); do
        busy=0
        for pid in $PID $CHILDREN; do alive "$pid" && busy=1; done
        [ "$busy" = 0 ] && break
        sleep 0.1
    done
    rm -f "$2/postmaster.pid" "$2"/.s.PGSQL.*.lock
    ;;
stats)
    psql -h 127.0.0.1 -p "$3" -U postgres -At -c "SELECT xact_commit + xact_rollback, tup_inserted + tup_updated + \
        tup_deleted, tup_returned + tup_fetched FROM pg_stat_database WHERE datname = 'postgres'"
    ;;
*)
    echo "usage: postgres.sh start DIR PORT | stop DIR | kill DIR | stats DIR PORT" >&2
    exit 2
    ;;
esac
