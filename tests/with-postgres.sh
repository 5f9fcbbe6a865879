#!/usr/bin/env bash
# Runs a command with TEST_DATABASE_URL pointing at a PostgreSQL server:
# the one already named in the environment, or a throwaway cluster started
# here and removed afterwards (see tests/pg-cluster.sh).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
if [[ -n "${TEST_DATABASE_URL:-}" ]]; then
    exec "$@"
fi
env_file="$(mktemp)"
"$here/pg-cluster.sh" start "" "$env_file" >/dev/null
# shellcheck disable=SC1090
source "$env_file"
rm -f "$env_file"
trap '"$here/pg-cluster.sh" stop "$PG_CLUSTER_DIR" >/dev/null 2>&1 || true' EXIT
echo "with-postgres: throwaway cluster at ${TEST_DATABASE_URL}"
"$@"
