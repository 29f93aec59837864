#!/usr/bin/env bash
# A throwaway PostgreSQL server for the `postgres`-marked tests.
#
#   eval "$(.ci/postgres.sh)"        # start (or reuse) the server; prints `export REFLECTION_GRAPH_PG_DSN=...`
#   .ci/postgres.sh stop             # stop it (the data directory is kept, so `start` is fast next time)
#   .ci/postgres.sh purge            # stop it and delete its data directory
#   .ci/postgres.sh status           # say whether it runs, and its DSN
#
# Idempotent: running `start` twice reuses the running server and prints the same DSN. Only the `export` lines
# go to stdout; everything else goes to stderr, so `eval "$(...)"` is safe.
#
# Where: $REFLECTION_GRAPH_PG_DIR (default ${TMPDIR:-/tmp}/reflection-graph-pg). The cluster listens on
# 127.0.0.1 only, on a free port, with `trust` authentication: it is a test server, never expose it.
# Binaries: `pg_ctl` on PATH, else /usr/lib/postgresql/*/bin, else Debian's `postgresql` package is installed
# with apt-get (needs root). As root, the cluster is owned by and run as the `postgres` user.
set -euo pipefail

MODE="${1:-start}"
BASE="${REFLECTION_GRAPH_PG_DIR:-${TMPDIR:-/tmp}/reflection-graph-pg}"
DATA="$BASE/data"
PORT_FILE="$BASE/port"
LOG="$BASE/server.log"
DB="${REFLECTION_GRAPH_PG_DB:-reflection_graph}"

log() { echo "postgres.sh: $*" >&2; }

find_bindir() {
    local ctl
    if ctl="$(command -v pg_ctl 2>/dev/null)"; then
        dirname "$(readlink -f "$ctl")"
        return 0
    fi
    local dir
    dir="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)"
    if [[ -n "$dir" && -x "$dir/pg_ctl" ]]; then
        echo "$dir"
        return 0
    fi
    return 1
}

BINDIR="$(find_bindir || true)"
if [[ -z "$BINDIR" ]]; then
    if [[ "$MODE" != "start" ]]; then
        log "PostgreSQL is not installed; nothing to $MODE"
        exit 0
    fi
    if [[ "$(id -u)" != 0 ]]; then
        log "pg_ctl not found and not root: install PostgreSQL (apt-get install postgresql) and rerun"
        exit 1
    fi
    log "installing Debian's postgresql package"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq postgresql >&2
    BINDIR="$(find_bindir)" || { log "postgresql installed but pg_ctl not found"; exit 1; }
fi

# As root, run the server as `postgres` (initdb refuses to run as root).
if [[ "$(id -u)" == 0 ]]; then
    id postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres
    RUN_AS=(runuser -u postgres --)
    OWNER=postgres
else
    RUN_AS=()
    OWNER="$(id -un)"
fi
as_owner() { "${RUN_AS[@]}" "$@"; }

running() { [[ -f "$DATA/postmaster.pid" ]] && as_owner "$BINDIR/pg_ctl" -D "$DATA" status >/dev/null 2>&1; }

dsn() { echo "postgresql://postgres@127.0.0.1:$(cat "$PORT_FILE")/$DB?sslmode=disable"; }

free_port() {
    python3 - <<'EOF'
import socket
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    print(s.getsockname()[1])
EOF
}

start() {
    mkdir -p "$BASE"
    chown "$OWNER" "$BASE"
    chmod 700 "$BASE"
    if [[ ! -f "$DATA/PG_VERSION" ]]; then
        log "initdb $DATA"
        rm -rf "$DATA"
        as_owner "$BINDIR/initdb" -D "$DATA" -U postgres --auth=trust --encoding=UTF8 --no-instructions >&2
    fi
    if running; then
        log "already running on port $(cat "$PORT_FILE")"
    else
        local port
        port="$(free_port)"
        echo "$port" >"$PORT_FILE"
        chown "$OWNER" "$PORT_FILE"
        log "starting on 127.0.0.1:$port (log: $LOG)"
        # fsync off: a disposable test cluster; the durability tests kill clients, never this server.
        as_owner "$BINDIR/pg_ctl" -D "$DATA" -l "$LOG" -w -t 60 \
            -o "-h 127.0.0.1 -p $port -k $BASE -c fsync=off -c max_connections=200" start >&2
    fi
    local port
    port="$(cat "$PORT_FILE")"
    local psql=("$BINDIR/psql" -h 127.0.0.1 -p "$port" -U postgres -d postgres -tAq)
    if [[ "$("${psql[@]}" -c "SELECT 1 FROM pg_database WHERE datname = '$DB'")" != 1 ]]; then
        log "creating database $DB"
        "${psql[@]}" -c "CREATE DATABASE \"$DB\"" >&2
    fi
    echo "export REFLECTION_GRAPH_PG_DSN='$(dsn)'"
    # The memory tests read this name.
}

stop() {
    if running; then
        as_owner "$BINDIR/pg_ctl" -D "$DATA" -m fast -w stop >&2
        log "stopped"
    else
        log "not running"
    fi
}

case "$MODE" in
    start) start ;;
    stop) stop ;;
    purge)
        stop
        rm -rf "$BASE"
        log "removed $BASE"
        ;;
    status)
        if running; then
            log "running: $(dsn)"
        else
            log "not running"
            exit 3
        fi
        ;;
    *)
        log "usage: $0 [start|stop|purge|status]"
        exit 2
        ;;
esac
