#!/usr/bin/env bash
# Test-binary runner for make mutants (cargo's target runner): the
# integration tests with their own single-threaded harness (the fork tests)
# run one process per test, MUTANTS_JOBS at a time, so a mutant's test run
# takes the time of its slowest tests rather than their sum. Each test is
# alone in its process, as it is in the harness. Other binaries (libtest's,
# already parallel) run as they are.
#
# Usage (set by tests/mutants.sh): runner BINARY [ARGS...]; the binaries
# to split are named in MUTANTS_SPLIT ("queue handoff ...").
set -uo pipefail
bin="$1"
shift
name="$(basename "$bin")"
split=0
for t in ${MUTANTS_SPLIT:-}; do
    [[ "$name" == "$t"-* ]] && split=1
done
((split)) || exec "$bin" "$@"

# Only --skip arguments carry over: each test is chosen by its own name.
skips=()
while (($#)); do
    if [[ "$1" == --skip && $# -ge 2 ]]; then
        skips+=(--skip "$2")
        shift
    fi
    shift
done
mapfile -t names < <("$bin" --list "${skips[@]}" | sed -n 's/: test$//p')
if ((${#names[@]} == 0)); then
    echo "mutants-runner: $name lists no tests" >&2
    exit 1
fi
# The harness picks tests whose names contain its argument; a name that is
# part of another's runs both, which costs time, not correctness.
printf '%s\0' "${names[@]}" | xargs -0 -P "${MUTANTS_JOBS:-4}" -I{} "$BASH" -c '
    out=$("$0" "$@" 2>&1)
    rc=$?
    # A failing test shows all it printed (its assertion), a passing one its verdict.
    if ((rc != 0)); then printf "%s\n" "$out"; else printf "%s\n" "$out" | grep "^test "; fi
    exit $((rc != 0))' "$bin" {} "${skips[@]}"
