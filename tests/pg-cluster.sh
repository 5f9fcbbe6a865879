#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for the Postgres tests.
#
#   tests/pg-cluster.sh start [DIR] [ENV_FILE]
#       Creates a cluster in DIR (default: a new temporary directory), starts it on a free
#       port on 127.0.0.1 with trust authentication, and prints
#           TEST_DATABASE_URL=postgresql://postgres@127.0.0.1:PORT/postgres
#           PG_CLUSTER_DIR=DIR
#       With ENV_FILE, also writes those two lines there (as `export` lines).
#   tests/pg-cluster.sh restart DIR [MODE]
#       Restarts the server in DIR (pg_ctl restart -m MODE, default fast) with the options it
#       had, so on the same port.
#   tests/pg-cluster.sh stop [DIR]
#       Stops the cluster in DIR (default: $PG_CLUSTER_DIR) and removes DIR.
#
# Run as root, the server runs as the `postgres` user (Postgres refuses to run as root).
# The cluster is for tests only: fsync is off.
set -euo pipefail

PG_BIN="${PG_BIN:-}"
if [[ -z "$PG_BIN" ]]; then
    for candidate in /usr/lib/postgresql/*/bin; do
        [[ -x "$candidate/pg_ctl" ]] && PG_BIN="$candidate"
    done
fi
if [[ -z "$PG_BIN" || ! -x "$PG_BIN/initdb" || ! -x "$PG_BIN/pg_ctl" ]]; then
    echo "pg-cluster: PostgreSQL server binaries not found (looked in /usr/lib/postgresql/*/bin)." >&2
    echo "pg-cluster: install them with: apt-get install -y postgresql" >&2
    exit 2
fi

as_server() {
    if [[ "$(id -u)" == 0 ]]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

free_port() {
    if command -v python3 >/dev/null 2>&1; then
        python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
    else
        echo $(( 20000 + RANDOM % 30000 ))
    fi
}

start() {
    local dir="${1:-}" env_file="${2:-}"
    if [[ -z "$dir" ]]; then
        dir="$(mktemp -d /tmp/pg-cluster.XXXXXX)"
    fi
    mkdir -p "$dir/sock"
    if [[ "$(id -u)" == 0 ]]; then
        if ! id postgres >/dev/null 2>&1; then
            echo "pg-cluster: running as root needs the postgres user; install it with: apt-get install -y postgresql" >&2
            exit 2
        fi
        chown -R postgres:postgres "$dir"
    fi
    chmod 700 "$dir"
    if [[ ! -f "$dir/data/PG_VERSION" ]]; then
        as_server "$PG_BIN/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 --locale=C \
            --no-sync >"$dir/initdb.log" 2>&1 || {
            cat "$dir/initdb.log" >&2
            echo "pg-cluster: initdb failed in $dir" >&2
            exit 1
        }
        cat >>"$dir/data/postgresql.conf" <<'CONF'
fsync = off
synchronous_commit = off
full_page_writes = off
max_connections = 200
log_min_messages = warning
log_line_prefix = '%m [%p] '
CONF
    fi
    local port tries=0
    while :; do
        port="$(free_port)"
        if as_server "$PG_BIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 30 \
            -o "-p $port -k $dir/sock -c listen_addresses=127.0.0.1" start >/dev/null 2>&1; then
            break
        fi
        tries=$((tries + 1))
        if (( tries >= 5 )); then
            tail -n 20 "$dir/server.log" >&2 || true
            echo "pg-cluster: the server in $dir did not start" >&2
            exit 1
        fi
    done
    local url="postgresql://postgres@127.0.0.1:$port/postgres"
    echo "TEST_DATABASE_URL=$url"
    echo "PG_CLUSTER_DIR=$dir"
    if [[ -n "$env_file" ]]; then
        printf 'export TEST_DATABASE_URL=%s\nexport PG_CLUSTER_DIR=%s\n' "$url" "$dir" >"$env_file"
    fi
}

restart() {
    local dir="${1:?usage: $0 restart DIR [MODE]}" mode="${2:-fast}"
    as_server "$PG_BIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 -m "$mode" \
        restart >/dev/null
}

stop() {
    local dir="${1:-${PG_CLUSTER_DIR:-}}"
    if [[ -z "$dir" ]]; then
        echo "pg-cluster: stop needs the cluster directory (argument or PG_CLUSTER_DIR)" >&2
        exit 2
    fi
    if [[ -f "$dir/data/postmaster.pid" ]]; then
        as_server "$PG_BIN/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
    fi
    if [[ -f "$dir/data/PG_VERSION" || ! -e "$dir" ]]; then
        rm -rf "$dir"
    else
        echo "pg-cluster: $dir does not look like a test cluster; not removing it" >&2
        exit 1
    fi
}

case "${1:-}" in
start) shift; start "$@" ;;
restart) shift; restart "$@" ;;
stop) shift; stop "$@" ;;
*)
    echo "usage: $0 start [DIR] [ENV_FILE] | restart DIR [MODE] | stop [DIR]" >&2
    exit 2
    ;;
esac
