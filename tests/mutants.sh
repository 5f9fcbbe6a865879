#!/usr/bin/env bash
# make mutants: mutation testing of the core's turn-taking and writer modules
# with cargo-mutants. Each mutant (a function body replaced, an operator
# swapped, ...) is built and the tests that exercise its module are run; a
# mutant no test notices ("missed") is a behaviour nothing checks.
#
# Too slow for make test (hundreds of mutants, each an incremental build and
# seconds of real-process tests). It runs at low priority, one mutant at a
# time (the fork tests of one binary run side by side, each in its own
# process, through tests/mutants-runner.sh: about 17 s a mutant on 2 cores),
# in a scratch copy of the tracked files (target/mutants-tree by
# default, kept between runs so every build is incremental); the tree you
# work in is never modified. Reports land in mutants.out/<module>/mutants.out/
# (caught.txt, missed.txt, timeout.txt, unviable.txt).
#
# Two stages per module: first the quick tests of the module's area; then
# every mutant that survived them is tried again against the core's whole
# suite (cargo test -p writerlock, every test, against the throwaway
# PostgreSQL), so only mutants the whole suite misses are reported missed.
#
# Settings (environment): MODULES (default: lockfiles process paths queue slice
# pg/writer pg/floor handoff/page handoff/turn handoff/sys handoff/layout
# handoff/inspect wait polling, in that order; each names src/<module>.rs),
# MUTANTS_TIMEOUT (seconds per test run, default 90), MUTANTS_BUILD_TIMEOUT (default 600),
# NICE (default 10), MUTANTS_TREE, MUTANTS_OUT, and
# MUTANTS_ARGS (extra cargo-mutants arguments, e.g. "-F 'replace try_flock'"),
# WHOLE_SUITE=0 (report what the quick tests miss, without the second stage).
set -euo pipefail

# All in one function, read whole before it runs: editing this file during a
# run (a rebase, say) cannot change what the run does.
main() {
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
version=27.1.0
export PATH="$root/.tools/bin:$PATH"

if [[ -z "${TEST_DATABASE_URL:-}" ]]; then
    exec tests/with-postgres.sh "$0"
fi

if [[ "$(cargo mutants --version 2>/dev/null)" != "cargo-mutants $version" ]]; then
    echo "mutants: installing cargo-mutants $version into .tools"
    cargo install --quiet --locked --root .tools cargo-mutants --version "$version"
fi

tree="${MUTANTS_TREE:-$root/target/mutants-tree}"
out="${MUTANTS_OUT:-$root/mutants.out}"
modules="${MODULES:-lockfiles process paths queue slice pg/writer pg/floor handoff/page handoff/turn handoff/sys handoff/layout handoff/inspect wait polling}"
timeout="${MUTANTS_TIMEOUT:-90}"
build_timeout="${MUTANTS_BUILD_TIMEOUT:-600}"
read -r -a extra <<<"${MUTANTS_ARGS:-}"

# The scratch tree: the tracked and new (not ignored) files, copied only when
# their content changed so cargo rebuilds only what did; files gone from the
# work tree are removed from it (cargo would build a stale tests/*.rs).
mkdir -p "$tree"
git ls-files -z --cached --others --exclude-standard | sort -z >"$tree/.files"
while IFS= read -r -d '' f; do
    [[ -f "$f" ]] || continue
    if ! cmp -s "$f" "$tree/$f"; then
        mkdir -p "$tree/$(dirname "$f")"
        cp "$f" "$tree/$f"
    fi
done <"$tree/.files"
(cd "$tree" && find . -path ./target -prune -o -type f ! -name .files -printf '%P\0' | sort -z) |
    comm -z -23 - "$tree/.files" | (cd "$tree" && xargs -0 -r rm -f --)

# The quick tests of each area. The skipped tests are long (6 to 15 s) and
# check rates and fairness, not what a mutant of one function breaks; the
# second stage runs them.
# The targets go to both the build and the test (--cargo-arg), so a mutant
# builds only the test binaries that run.
sqlite_targets=(--cargo-arg=--lib --cargo-arg=--test=queue --cargo-arg=--test=handoff
    --cargo-arg=--test=faults_interrupt --cargo-arg=--test=faults_page
    --cargo-arg=--test=faults_killed --cargo-arg=--test=faults_files
    --cargo-arg=--test=connection --cargo-arg=--test=exclusion
    --cargo-arg=--test=lock_files --cargo-arg=--test=turn_slices --cargo-arg=--test=wait_policy)
sqlite_tests=(-- --skip forty_eight_transactions --skip hot_loop --skip a_stopped_head_waiter
    --skip held_locks_are_seen_while_other_locks_change)
# The SQLite binaries whose single-threaded harness the runner splits. Never
# pg_faults: its restarts, freezes and firewall rules must run one at a time.
export MUTANTS_SPLIT="queue handoff faults_interrupt faults_page faults_killed faults_files exclusion
    lock_files turn_slices"
host="$(rustc -vV | sed -n 's/^host: //p')"
host="${host^^}"
export "CARGO_TARGET_${host//-/_}_RUNNER=$root/tests/mutants-runner.sh"
# No debug info: a mutant's build is mostly linking the test binaries.
export CARGO_PROFILE_DEV_DEBUG=0
pg_targets=(--cargo-arg=--lib --cargo-arg=--test=pg_writer --cargo-arg=--test=pg_wire
    --cargo-arg=--test=pg_guarantees)
pg_tests=()

started=$(date +%s)
for module in $modules; do
    case "$module" in
        pg/*) targets=("${pg_targets[@]}") tests=("${pg_tests[@]}") ;;
        *) targets=("${sqlite_targets[@]}") tests=("${sqlite_tests[@]}") ;;
    esac
    dir="$out/${module//\//-}"
    mkdir -p "$dir"
    echo "mutants: src/$module.rs, quick tests (${targets[*]//--cargo-arg=/} ${tests[*]})"
    run=(nice -n "${NICE:-10}" cargo mutants --in-place --dir "$tree" -p writerlock
        -f "src/$module.rs" --timeout "$timeout"
        --build-timeout "$build_timeout" --output "$dir" "${extra[@]}")
    # cargo-mutants exits 2 when mutants were missed, 3 on timeouts: reports, not errors.
    "${run[@]}" "${targets[@]}" -- "${tests[@]}" || (($? == 2 || $? == 3)) || exit 1
    # Keep the quick stage's report; a timeout there counts as caught (the
    # mutant made a bounded test overrun its limit), so only missed mutants
    # go on to the second stage (--iterate skips what previous runs caught).
    rm -rf "$dir/quick"
    cp -r "$dir/mutants.out" "$dir/quick"
    if [[ -s "$dir/quick/missed.txt" && "${WHOLE_SUITE:-1}" != 0 ]]; then
        echo "mutants: src/$module.rs, $(wc -l <"$dir/quick/missed.txt") missed by the quick tests, against the whole core suite"
        cat "$dir/quick/timeout.txt" >>"$dir/mutants.out/previously_caught.txt" 2>/dev/null || true
        "${run[@]}" --iterate || (($? == 2 || $? == 3)) || exit 1
    fi
done
echo "mutants: done in $(($(date +%s) - started)) s; reports in $out"
count() { (cat "$@" 2>/dev/null || true) | wc -l; }
for module in $modules; do
    d="$out/${module//\//-}"
    q="$d/quick" f="$d/mutants.out"
    if [[ -s "$q/missed.txt" && "${WHOLE_SUITE:-1}" != 0 ]]; then
        caught=$(($(count "$q/caught.txt") + $(count "$f/caught.txt")))
        missed=$(count "$f/missed.txt")
        timeout=$(($(count "$q/timeout.txt") + $(count "$f/timeout.txt")))
        unviable=$(($(count "$q/unviable.txt") + $(count "$f/unviable.txt")))
    else
        caught=$(count "$q/caught.txt") missed=$(count "$q/missed.txt") timeout=$(count "$q/timeout.txt")
        unviable=$(count "$q/unviable.txt")
    fi
    echo "src/$module.rs: caught $caught, missed $missed, timeout $timeout, unviable $unviable"
    [[ -s "$f/missed.txt" ]] && sed 's/^/    missed: /' "$f/missed.txt"
done
}
main
exit 0
