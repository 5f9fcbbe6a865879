#!/usr/bin/env bash
# make bench: builds and runs the benchmark suite (bench/README.md).
#
#   bench/run.sh [writerlock-bench options]     full run (under 10 minutes)
#   QUICK=1 bench/run.sh                        short run (under 2 minutes)
#
# Without TEST_DATABASE_URL it runs itself inside tests/with-postgres.sh, which
# starts a throwaway PostgreSQL cluster for scenarios 6, 7 and 10 and removes it
# afterwards. Results: target/bench/results.txt, results.json, waits.svg. A
# complete full run also writes bench/results/MACHINE.json, the committed
# results docs/performance.md's tables are made from (make bench-readme); MACHINE is
# BENCH_MACHINE or the CPU count and model. A QUICK run records nothing there
# unless BENCH_RECORD=1; BENCH_RECORD=0 keeps a full run from recording.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
if [[ -z "${TEST_DATABASE_URL:-}" ]]; then
    exec "$root/tests/with-postgres.sh" "$here/run.sh" "$@"
fi
cd "$root"
"${CARGO:-cargo}" build --release -p writerlock-bench -p writerlock-c
# The host scenario's PHP rows load the extension built here (php8.2-dev provides php-config).
if command -v php-config >/dev/null 2>&1; then
    "${CARGO:-cargo}" build --release -p writerlock-php ||
        echo "bench: building the PHP extension failed; its rows will say not measured" >&2
else
    echo "bench: php-config is missing (apt-get install php8.2-dev); the PHP rows will say not measured" >&2
fi
target_dir="${CARGO_TARGET_DIR:-$root/target}"
# The Postgres scenario, the host scenario and the Python 16-writer runs use the writerlock
# Python module from the project virtualenv (make deps): install this checkout's module
# there, optimised.
venv="${VENV:-$root/.venv}"
if [[ -x "$venv/bin/maturin" ]]; then
    wheels="$(mktemp -d /tmp/writerlock-bench-wheels.XXXXXX)"
    trap 'rm -rf "$wheels"' EXIT
    if "$venv/bin/maturin" build --release --quiet -m "$root/python/Cargo.toml" \
        --interpreter "$venv/bin/python" -o "$wheels" >"$wheels/build.log" 2>&1; then
        "$venv/bin/pip" install --quiet --force-reinstall --no-deps "$wheels"/writerlock-*.whl
    else
        cat "$wheels/build.log" >&2
        echo "bench: building the Python module failed; its rows will say not measured" >&2
    fi
else
    echo "bench: no virtualenv at $venv (make deps creates it); the Python rows will say not measured" >&2
fi
args=()
quick=
if [[ -n "${QUICK:-}" && "${QUICK}" != "0" ]]; then
    args+=(--quick)
    quick=1
fi
record="${BENCH_RECORD:-}"
if [[ -z "$record" ]]; then
    if [[ -n "$quick" ]]; then record=0; else record=1; fi
fi
if [[ "$record" != "0" ]]; then
    args+=(--record "$root/bench/results")
fi
# On a shared machine other work steals CPU unevenly (a one-process baseline
# loses more than sixteen workers do). Where allowed, every bench process runs
# at nice -10, the same for every mode; BENCH_NICE=0 turns this off.
runner=()
if [[ "${BENCH_NICE:-1}" != "0" ]] && nice -n -10 true 2>/dev/null; then
    runner=(nice -n -10)
fi
"${runner[@]}" "$target_dir/release/writerlock-bench" "${args[@]}" --out "$target_dir/bench" "$@"
