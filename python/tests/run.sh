#!/usr/bin/env bash
# Builds the writerlock wheel with the project venv's maturin, installs it into the venv and
# runs the Python tests (pytest) against real processes and a real PostgreSQL server.
#
#   python/tests/run.sh [PYTEST ARGS...]
#
# Needs TEST_DATABASE_URL (set by `make test`, or `tests/with-postgres.sh python/tests/run.sh`).
# VENV overrides the virtualenv (default: <repo>/.venv, created by tests/deps.sh).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
venv="${VENV:-$repo/.venv}"

if [[ ! -x "$venv/bin/python" ]] || ! "$venv/bin/python" -c 'import maturin, pytest' 2>/dev/null; then
    echo "python tests: the virtualenv $venv with maturin and pytest is missing;" >&2
    echo "python tests: create it with: make deps   (or: python3 -m venv $venv && $venv/bin/pip install 'maturin>=1.9.4,<2' 'pytest>=8')" >&2
    exit 2
fi
if [[ -z "${TEST_DATABASE_URL:-}" ]]; then
    echo "python tests: TEST_DATABASE_URL is not set; the Postgres tests need a real server." >&2
    echo "python tests: run: make test   or: tests/with-postgres.sh python/tests/run.sh" >&2
    exit 2
fi

wheels="$(mktemp -d /tmp/writerlock-wheels.XXXXXX)"
trap 'rm -rf "$wheels"' EXIT
echo "python tests: building the wheel"
# WL_PROFILE=dev (make test) builds a debug wheel that shares the test build's artifacts.
profile_flag=(--release)
[[ "${WL_PROFILE:-release}" == dev ]] && profile_flag=(--profile dev)
"$venv/bin/maturin" build "${profile_flag[@]}" --quiet -m "$repo/python/Cargo.toml" \
    --interpreter "$venv/bin/python" -o "$wheels" >"$wheels/build.log" 2>&1 || {
    cat "$wheels/build.log" >&2
    echo "python tests: maturin build failed" >&2
    exit 1
}
wheel="$(ls "$wheels"/writerlock-*.whl)"
"$venv/bin/pip" install --quiet --force-reinstall --no-deps "$wheel"
echo "python tests: installed $(basename "$wheel")"

# The abi3 wheel itself, for the test that installs it into other CPython versions.
export WRITERLOCK_WHEEL="$wheel"

if (( $# == 0 )); then
    set -- "$here"
fi
# Not exec: the EXIT trap removes the wheel directory after pytest. -rs prints the reason of
# every skipped test (those that need root say so).
status=0
"$venv/bin/python" -m pytest -p no:cacheprovider -rs --rootdir "$here" "$@" || status=$?
exit "$status"
