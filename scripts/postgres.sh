#!/usr/bin/env bash
# A local PostgreSQL with pgvector for hoprag's PostgreSQL store, its tests and CI
# (no Docker here). The server binaries and the extension come from the PyPI package
# `pgserver`, installed once into a virtual environment; this script drives them with
# initdb/pg_ctl directly rather than through pgserver's Python API, which listens on a
# Unix socket only and stops the server when the Python process exits.
#
#   scripts/postgres.sh start  DATA_DIR          init (first time) + start; prints the URL
#   scripts/postgres.sh stop   DATA_DIR          fast shutdown; fine when already stopped
#   scripts/postgres.sh url    DATA_DIR [--socket]  the loopback TCP URL (or the Unix-socket one)
#   scripts/postgres.sh status DATA_DIR          exit 0 when running, 3 when stopped
#   scripts/postgres.sh psql   DATA_DIR [ARGS]   the bundled psql, connected to the database
#
# DATA_DIR holds the cluster (pgdata/), the server log (postgres.log), the TCP port
# (port) and, when the path is short enough, the Unix socket. The port is picked free on
# the first start (or taken from HOPRAG_PG_PORT) and kept, so the URL stays the same.
#
# Environment: HOPRAG_PG_VENV (default ~/.cache/hoprag-pg-venv), HOPRAG_PG_PORT (first
# start only), HOPRAG_PG_DB (default hoprag). The superuser is `postgres`, trusted on
# loopback and the socket only: a development and test server, not a production one.
set -euo pipefail

PGSERVER_VERSION=0.1.4 # PostgreSQL 16 with pgvector 0.6.2 (HNSW since pgvector 0.5)
VENV=${HOPRAG_PG_VENV:-$HOME/.cache/hoprag-pg-venv}
DB=${HOPRAG_PG_DB:-hoprag}
SUPERUSER=postgres
# PostgreSQL refuses to run as root; as root the server runs as this system user.
RUN_USER=hoprag-pg

die() {
    echo "postgres.sh: error: $*" >&2
    exit 1
}
note() { echo "postgres.sh: $*" >&2; }

usage() {
    sed -n '8,12p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

[ $# -ge 2 ] || usage
CMD=$1
DATA_ARG=$2
shift 2
case "$CMD" in start | stop | url | status | psql) ;; *) usage ;; esac
[ -n "$DATA_ARG" ] || die "DATA_DIR is empty"

as_root() { [ "$(id -u)" = 0 ]; }

# Runs a command as the user that owns the cluster.
as_pg() {
    if as_root; then
        runuser -u "$RUN_USER" -- "$@"
    else
        "$@"
    fi
}

# The virtual environment with pgserver, created and filled only when missing.
ensure_venv() {
    local have=""
    if [ -x "$VENV/bin/python" ]; then
        have=$("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("pgserver"))' 2>/dev/null || true)
    fi
    if [ "$have" != "$PGSERVER_VERSION" ]; then
        command -v python3 >/dev/null || die "python3 not found (needed once, to install pgserver into $VENV)"
        if [ ! -x "$VENV/bin/python" ]; then
            note "creating virtual environment $VENV"
            mkdir -p "$(dirname "$VENV")"
            python3 -m venv "$VENV" || die "python3 -m venv $VENV failed (on Debian: apt-get install python3-venv)"
        fi
        note "installing pgserver==$PGSERVER_VERSION into $VENV"
        "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "pgserver==$PGSERVER_VERSION" ||
            die "pip could not install pgserver==$PGSERVER_VERSION into $VENV"
    fi
    # find_spec locates the package without importing it (its import sets up lock files).
    PGBIN=$("$VENV/bin/python" -c 'import importlib.util, os; s = importlib.util.find_spec("pgserver"); print(os.path.join(s.submodule_search_locations[0], "pginstall", "bin"))')
    [ -x "$PGBIN/pg_ctl" ] || die "pgserver in $VENV has no $PGBIN/pg_ctl; remove $VENV and run again"
}

# As root: the server's user exists and can reach the binaries and DATA_DIR. Only the
# search (x) bit is added to directories it cannot pass, e.g. /root (mode 700).
ensure_run_user() {
    as_root || return 0
    if ! id -u "$RUN_USER" >/dev/null 2>&1; then
        note "creating system user $RUN_USER (PostgreSQL does not run as root)"
        useradd --system --no-create-home --shell /usr/sbin/nologin "$RUN_USER" ||
            die "could not create system user $RUN_USER"
    fi
    local target d rest
    for target in "$PGBIN" "$DATA_DIR"; do
        # From / down, so that each test sees its parents already passable.
        d="" rest=${target#/}
        while [ -n "$rest" ]; do
            d="$d/${rest%%/*}"
            if [ "$rest" = "${rest#*/}" ]; then rest=""; else rest=${rest#*/}; fi
            if ! runuser -u "$RUN_USER" -- test -x "$d"; then
                note "chmod o+x $d (so that $RUN_USER can reach $target)"
                chmod o+x "$d"
            fi
        done
    done
}

port_free() { # succeeds when 127.0.0.1:$1 can be bound (as PostgreSQL does, SO_REUSEADDR)
    python3 - "$1" <<'EOF'
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
try:
    s.bind(("127.0.0.1", int(sys.argv[1])))
except OSError:
    sys.exit(1)
EOF
}

pick_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

urlencode() { python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' "$1"; }

# The socket goes in DATA_DIR unless the path would pass the 107-byte limit of
# sun_path; then in a folder under /tmp named after DATA_DIR.
socket_dir() {
    local port=$1
    local p="$DATA_DIR/.s.PGSQL.$port"
    if [ "${#p}" -le 107 ]; then
        echo "$DATA_DIR"
    else
        echo "/tmp/hoprag-pg-$(printf %s "$DATA_DIR" | sha256sum | cut -c1-12)"
    fi
}

is_running() { as_pg "$PGBIN/pg_ctl" status -D "$PGDATA" >/dev/null 2>&1; }

# DATA_DIR must exist and hold a cluster made by `start` (for stop/url/status/psql).
require_cluster() {
    [ -d "$DATA_ARG" ] || die "DATA_DIR $DATA_ARG does not exist (run: $0 start $DATA_ARG)"
    DATA_DIR=$(cd "$DATA_ARG" && pwd -P)
    PGDATA=$DATA_DIR/pgdata
    if [ ! -f "$PGDATA/PG_VERSION" ] || [ ! -f "$DATA_DIR/port" ]; then
        die "$DATA_DIR holds no cluster made by this script (no pgdata/PG_VERSION or port; run: $0 start $DATA_DIR)"
    fi
    PORT=$(cat "$DATA_DIR/port")
    SOCKDIR=$(socket_dir "$PORT")
}

# Two starts (or a start and a stop) on one DATA_DIR at once, e.g. from parallel test
# runs, take turns: the lock is on the folder itself, released when the script exits
# (the server must not inherit it: pg_ctl runs with fd 9 closed).
lock_data_dir() {
    exec 9<"$DATA_DIR"
    flock 9
}

tcp_url() { echo "postgres://$SUPERUSER@127.0.0.1:$PORT/$DB"; }
socket_url() { echo "postgres://$SUPERUSER@$(urlencode "$SOCKDIR"):$PORT/$DB"; }

psql_run() { # bundled psql over the socket, stops at the first error
    "$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$SOCKDIR" -p "$PORT" -U "$SUPERUSER" "$@"
}

ensure_database() {
    if [ "$(psql_run -d postgres -Atc "SELECT 1 FROM pg_database WHERE datname = '$DB'")" != 1 ]; then
        note "creating database $DB"
        psql_run -d postgres -c "CREATE DATABASE \"$DB\""
    fi
    psql_run -d "$DB" -c "SET client_min_messages = warning; CREATE EXTENSION IF NOT EXISTS vector" ||
        die "CREATE EXTENSION vector failed in database $DB"
}

log_tail() {
    echo "---- last lines of $DATA_DIR/postgres.log ----" >&2
    tail -n 20 "$DATA_DIR/postgres.log" >&2 2>/dev/null || true
}

cmd_start() {
    if [ -e "$DATA_ARG" ] && [ ! -d "$DATA_ARG" ]; then
        die "DATA_DIR $DATA_ARG exists and is not a directory"
    fi
    mkdir -p "$DATA_ARG" || die "cannot create DATA_DIR $DATA_ARG"
    DATA_DIR=$(cd "$DATA_ARG" && pwd -P)
    PGDATA=$DATA_DIR/pgdata
    lock_data_dir
    # Refuse a folder that holds something else: start chowns it to the server's user.
    if [ ! -f "$DATA_DIR/port" ] && [ -n "$(ls -A "$DATA_DIR")" ]; then
        die "DATA_DIR $DATA_DIR is not empty and was not made by this script; pass a new or empty folder"
    fi
    ensure_venv
    ensure_run_user

    if [ -f "$DATA_DIR/port" ]; then
        PORT=$(cat "$DATA_DIR/port")
        [[ "$PORT" =~ ^[0-9]+$ ]] || die "$DATA_DIR/port does not hold a port number: '$PORT'"
    else
        PORT=${HOPRAG_PG_PORT:-$(pick_port)}
        if ! [[ "$PORT" =~ ^[0-9]+$ ]] || [ "$PORT" -lt 1 ] || [ "$PORT" -gt 65535 ]; then
            die "HOPRAG_PG_PORT is not a port number: '$PORT'"
        fi
        echo "$PORT" >"$DATA_DIR/port"
    fi
    SOCKDIR=$(socket_dir "$PORT")
    mkdir -p "$SOCKDIR"
    if as_root; then chown "$RUN_USER:" "$DATA_DIR" "$SOCKDIR"; fi

    if [ ! -f "$PGDATA/PG_VERSION" ]; then
        note "initialising a cluster in $PGDATA"
        # C locale: no dependence on the locales the machine has; UTF8 for passages.
        LC_ALL=C as_pg "$PGBIN/initdb" -D "$PGDATA" -U "$SUPERUSER" --auth=trust \
            --encoding=UTF8 --locale=C >"$DATA_DIR/initdb.log" 2>&1 || {
            cat "$DATA_DIR/initdb.log" >&2
            rm -rf "$PGDATA"
            die "initdb failed (output above)"
        }
        echo "include_if_exists = 'hoprag.conf'" | as_pg tee -a "$PGDATA/postgresql.conf" >/dev/null
    fi

    if is_running; then
        note "already running (port $PORT, data $PGDATA)"
    else
        port_free "$PORT" ||
            die "port $PORT on 127.0.0.1 (recorded in $DATA_DIR/port) is in use by another process; free it, or write another port into that file"
        # Written at every start from DATA_DIR/port, the one record of the port.
        printf "listen_addresses = '127.0.0.1'\nport = %s\nunix_socket_directories = '%s'\n" \
            "$PORT" "$SOCKDIR" | as_pg tee "$PGDATA/hoprag.conf" >/dev/null
        note "starting PostgreSQL on 127.0.0.1:$PORT (socket in $SOCKDIR, log $DATA_DIR/postgres.log)"
        LC_ALL=C as_pg "$PGBIN/pg_ctl" start -D "$PGDATA" -l "$DATA_DIR/postgres.log" -w -t 120 >/dev/null 9<&- || {
            log_tail
            die "the server did not start (log above)"
        }
    fi
    ensure_database
    tcp_url
}

cmd_stop() {
    require_cluster
    lock_data_dir
    ensure_venv
    if ! is_running; then
        note "not running ($PGDATA)"
        return 0
    fi
    as_pg "$PGBIN/pg_ctl" stop -D "$PGDATA" -m fast -w -t 120 >/dev/null || {
        log_tail
        die "the server did not stop within 120 s"
    }
    note "stopped ($PGDATA)"
}

cmd_url() {
    require_cluster
    ensure_venv
    is_running || die "no server running on $DATA_DIR (run: $0 start $DATA_DIR)"
    case "${1:-}" in
    "") tcp_url ;;
    --socket) socket_url ;;
    *) die "url: unknown option $1 (only --socket)" ;;
    esac
}

cmd_status() {
    require_cluster
    ensure_venv
    if is_running; then
        echo "running: $(tcp_url)"
    else
        echo "stopped: $DATA_DIR"
        exit 3
    fi
}

cmd_psql() {
    require_cluster
    ensure_venv
    is_running || die "no server running on $DATA_DIR (run: $0 start $DATA_DIR)"
    exec "$PGBIN/psql" -X -h "$SOCKDIR" -p "$PORT" -U "$SUPERUSER" -d "$DB" "$@"
}

"cmd_$CMD" "$@"
