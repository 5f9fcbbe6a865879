#!/usr/bin/env bash
# Breaks the code on purpose, one known breakage at a time, and checks that the host
# suites notice: each breakage is a small, exact source edit applied to a scratch copy of
# the tree (a detached `git worktree` under /tmp, never this tree), which is then rebuilt
# and tested with the chosen suites. Slow (whole suites, one after the other); not part of
# `make test`. Run it as `make breakages` or directly:
#
#   tests/breakages.sh [BREAKAGE...] [--suites rust,c,php,python] [--commit REV]
#                      [--timeout SECONDS] [--list] [--build-only]
#
# BREAKAGE: any of the names `--list` prints (default: the seven of the table below), or
# `none` to run the suites on the unmodified code first (a suite that fails there proves
# nothing when it fails on a breakage).
#
#   flock-noop                 try_flock() reports the lock taken without calling flock()
#   no-cloexec                 the lock files are opened without O_CLOEXEC (the hand-off
#                              page is mapped from the queue file's descriptor, so it follows)
#   liveness-always-alive      the hand-off page's liveness check says every waiter is alive
#   release-on-refused-commit  the queue gives the turn back when SQLite refuses a COMMIT
#   pg-retry-any-error         every error during the writer lock wait is waited again, not
#                              only 55P03 (in the shared check, so both the core's writer and
#                              the I/O-free protocol the Python drivers use retry)
#   write-drop-no-rollback     a `Write` dropped without commit or rollback does not roll back
#   floor-no-greatest          the floor is stored without GREATEST (it can be lowered)
#
# --build-only applies and builds each edit without running a suite (checks the edits).
#
# Two narrower forms of pg-retry-any-error, by name only: pg-retry-any-error-writer (the
# core's writer alone) and pg-retry-any-error-protocol (the I/O-free protocol alone).
#
# Each result is CAUGHT (the suite failed, with the failing tests named), MISSED (the suite
# passed), FAILED-UNNAMED (the suite failed but named no failing test: a build error or a
# runner that died; see its log), HUNG (killed after --timeout, default 1800 s) or
# STALE-BUILD (the library the suite loaded, C, PHP or Python, is older than the code: no
# result). An edit
# whose text is no longer in the source stops the script: it never tests nothing.
#
# The scratch worktree (/tmp/writerlock-breakages.<this tree's name>) is kept between runs
# with its own target/ (seeded from this tree's target/debug) and .venv, so later runs only
# rebuild what an edit touches; its sources are reset to the tested commit after each
# breakage and on exit or Ctrl-C. Logs: <scratch>-logs/. Suites run with
# WL_PROFILE=dev, each against its own throwaway PostgreSQL cluster (tests/with-postgres.sh).
# Exits 0 when every breakage is CAUGHT by every suite run (and `none` passes).
set -uo pipefail

# The whole script is one block, read before it runs: a rebase during a run cannot change it.
{
root="$(cd "$(dirname "$0")/.." && pwd)"
default_breakages=(flock-noop no-cloexec liveness-always-alive release-on-refused-commit
    pg-retry-any-error write-drop-no-rollback floor-no-greatest)
known_breakages=(none "${default_breakages[@]}" pg-retry-any-error-writer pg-retry-any-error-protocol)
known_suites=(rust c php python)

usage() {
    sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'
}

breakages=()
suites=("${known_suites[@]}")
commit=HEAD
suite_timeout=1800
while (($#)); do
    case "$1" in
        --suites) suites=(${2//,/ }); shift 2 ;;
        --suites=*) v="${1#--suites=}"; suites=(${v//,/ }); shift ;;
        --commit) commit="$2"; shift 2 ;;
        --commit=*) commit="${1#--commit=}"; shift ;;
        --timeout) suite_timeout="$2"; shift 2 ;;
        --timeout=*) suite_timeout="${1#--timeout=}"; shift ;;
        --build-only) suites=(); shift ;;
        --list) printf '%s\n' "${known_breakages[@]}"; exit 0 ;;
        -h | --help) usage; exit 0 ;;
        -*) echo "breakages: unknown option $1 (see --help)" >&2; exit 2 ;;
        *) breakages+=("$1"); shift ;;
    esac
done
((${#breakages[@]})) || breakages=("${default_breakages[@]}")
for b in "${breakages[@]}"; do
    [[ " ${known_breakages[*]} " == *" $b "* ]] ||
        { echo "breakages: unknown breakage '$b'; known: ${known_breakages[*]}" >&2; exit 2; }
done
for s in "${suites[@]}"; do
    [[ " ${known_suites[*]} " == *" $s "* ]] ||
        { echo "breakages: unknown suite '$s'; known: ${known_suites[*]}" >&2; exit 2; }
done
[[ "$suite_timeout" =~ ^[0-9]+$ ]] || { echo "breakages: --timeout takes seconds" >&2; exit 2; }

sha="$(git -C "$root" rev-parse --verify "$commit^{commit}")" ||
    { echo "breakages: no commit '$commit'" >&2; exit 2; }
if [[ "$commit" == HEAD ]] && [[ -n "$(git -C "$root" status --porcelain --untracked-files=no)" ]]; then
    echo "breakages: note: uncommitted changes in $root are not tested (only commit ${sha:0:12})" >&2
fi

scratch="${WL_BREAKAGES_DIR:-/tmp/writerlock-breakages.$(basename "$root")}"
logs="$scratch-logs"
# One run at a time per scratch tree (a run that just ended may take a moment to let go).
exec 9>"$scratch.lock"
flock -w 60 9 || { echo "breakages: another run is using $scratch" >&2; exit 2; }

# --- the scratch worktree -------------------------------------------------------------------
restore_scratch() {
    [[ -d "$scratch" ]] || return 0
    git -C "$scratch" reset --quiet --hard "$sha" 2>/dev/null || true
}
suite_pid=
on_exit() {
    [[ -n "$suite_pid" ]] && kill -TERM -- "-$suite_pid" 2>/dev/null && sleep 2
    restore_scratch
}
trap on_exit EXIT
trap 'echo; echo "breakages: interrupted; the scratch tree is reset" >&2; exit 130' INT TERM

if ! git -C "$scratch" rev-parse --git-dir >/dev/null 2>&1; then
    rm -rf "$scratch"
    git -C "$root" worktree prune
    echo "breakages: creating the scratch worktree $scratch"
    git -C "$root" worktree add --quiet --detach "$scratch" "$sha" || exit 2
fi
git -C "$scratch" checkout --quiet --detach --force "$sha" || exit 2
git -C "$scratch" clean --quiet -fd
if [[ ! -d "$scratch/target/debug" && -d "$root/target/debug" ]]; then
    echo "breakages: seeding $scratch/target from $root/target/debug (saves rebuilding the dependencies)"
    mkdir -p "$scratch/target"
    cp -a --reflink=auto "$root/target/debug" "$scratch/target/debug"
fi
export PATH="$root/.tools/bin:$scratch/.tools/bin:$PATH"
export WL_PROFILE=dev
export VENV="$scratch/.venv"
unset TEST_DATABASE_URL CARGO_TARGET_DIR
if [[ " ${suites[*]} " == *" python "* ]]; then
    (cd "$scratch" && tests/deps.sh) || { echo "breakages: tests/deps.sh failed in $scratch" >&2; exit 2; }
fi
mkdir -p "$logs"
cd "$scratch" || exit 2

# --- the edits ------------------------------------------------------------------------------
# edit FILE OLD NEW: replaces the one occurrence of OLD in the scratch copy of FILE; stops
# the script when OLD is not there exactly once (the breakage would test nothing).
edit() {
    WL_FILE="$scratch/$1" WL_OLD="$2" WL_NEW="$3" python3 - <<'EOF' || exit 3
import os, sys
path, old, new = os.environ["WL_FILE"], os.environ["WL_OLD"], os.environ["WL_NEW"]
text = open(path).read()
n = text.count(old)
if n != 1:
    sys.exit(f"breakages: the text to replace occurs {n} times in {path} (expected once):\n{old}")
open(path, "w").write(text.replace(old, new))
EOF
    touch "$scratch/$1"
    edited+=("$1")
}

apply_breakage() {
    case "$1" in
        none) ;;
        flock-noop)
            edit src/lockfiles.rs \
'        let tried = match mode {
            LockMode::Exclusive => fs4::FileExt::try_lock(&*file),
            LockMode::Shared => fs4::FileExt::try_lock_shared(&*file),
        };' \
'        let _ = (&file, mode);
        let tried: Result<(), fs4::TryLockError> = Ok(());'
            ;;
        no-cloexec)
            edit src/lockfiles.rs \
'    libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY;' \
'    libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY;'
            ;;
        liveness-always-alive)
            edit src/handoff/page.rs \
'            Ok(fl) => fl.l_type != libc::F_UNLCK as libc::c_short,
            Err(_) => true,' \
'            Ok(_) => true,
            Err(_) => true,'
            ;;
        release-on-refused-commit)
            edit src/queue.rs \
'                if conn.in_transaction() != Some(true) {
                    self.give_back_timeout(conn);' \
'                if conn.in_transaction() != Some(true) || statement == "COMMIT" {
                    self.give_back_timeout(conn);'
            ;;
        pg-retry-any-error)
            edit src/pg/protocol.rs \
'pub fn is_cancelled_wait(code: &str) -> bool {
    code == SqlState::LOCK_NOT_AVAILABLE.code()' \
'pub fn is_cancelled_wait(code: &str) -> bool {
    code == SqlState::LOCK_NOT_AVAILABLE.code() || !code.is_empty()'
            ;;
        pg-retry-any-error-writer)
            edit src/pg/writer.rs \
'                Err(err) if err.code().is_some_and(|c| is_cancelled_wait(c.code())) => {' \
'                Err(err) if err.code().is_some_and(|c| is_cancelled_wait(c.code()) || !c.code().is_empty()) => {'
            ;;
        pg-retry-any-error-protocol)
            edit src/pg/protocol.rs \
'                if is_cancelled_wait(&server.code) =>' \
'                if is_cancelled_wait(&server.code) || !server.code.is_empty() =>'
            ;;
        write-drop-no-rollback)
            edit src/pg/writer.rs \
'    fn drop(&mut self) {
        if !self.done {
            let _ = self.conn.rollback();
        }' \
'    fn drop(&mut self) {
        if !self.done {
            let _ = &self.conn;
        }'
            ;;
        floor-no-greatest)
            edit src/pg/floor.rs \
'DO UPDATE SET version = GREATEST(writer_floor.version, EXCLUDED.version)";' \
'DO UPDATE SET version = EXCLUDED.version";'
            ;;
        *) echo "breakages: no edit for '$1'" >&2; exit 3 ;;
    esac
}

# --- fresh builds ---------------------------------------------------------------------------
# A library another build overwrote under the same name (a cdylib's file name carries no
# hash) can look up to date to cargo: every artifact a suite loads is built here first and
# must be newer than every source it is built from, or its package is cleaned and rebuilt.
# stale ARTIFACT DIR...: true when ARTIFACT is missing or older than a .rs file under DIR.
stale() {
    local artifact="$1"
    shift
    [[ ! -e "$artifact" ]] || [[ -n "$(find "$@" -name '*.rs' -newer "$artifact" -print -quit)" ]]
}

# build_fresh LOG: builds what the chosen suites load and checks that each is fresh.
build_fresh() {
    local d=target/debug
    local checks=("writerlock $d/libwriterlock.rlib src")
    [[ " ${suites[*]} " == *" c "* ]] &&
        checks+=("writerlock-c $d/libwriterlock.so src bindings/src" "writerlock-cli $d/writerlock src cli/src")
    [[ " ${suites[*]} " == *" php "* ]] && checks+=("writerlock-php $d/libwriterlock_php.so src php-ext/src")
    local pkgs=() c
    for c in "${checks[@]}"; do pkgs+=(-p "${c%% *}"); done
    cargo build "${pkgs[@]}" >>"$1" 2>&1 || return 1
    local pkg artifact dirs
    for c in "${checks[@]}"; do
        read -r pkg artifact dirs <<<"$c"
        # shellcheck disable=SC2086
        if stale "$artifact" $dirs; then
            echo "   $artifact is older than its sources: cargo clean -p $pkg, then a rebuild"
            cargo clean -p "$pkg" >>"$1" 2>&1
            cargo build -p "$pkg" >>"$1" 2>&1 || return 1
            # shellcheck disable=SC2086
            if stale "$artifact" $dirs; then
                echo "breakages: $artifact stays older than its sources after a clean build" >&2
                return 1
            fi
        fi
    done
}

# --- the suites -----------------------------------------------------------------------------
# suite_library SUITE: the library the suite loads and the sources it comes from, checked
# after the run (the suite's own build may differ from ours).
suite_library() {
    case "$1" in
        c) echo "target/debug/libwriterlock.so src bindings/src" ;;
        php) echo "target/debug/libwriterlock_php.so src php-ext/src" ;;
        python) echo "target/debug/lib_native.so src python/src" ;;
    esac
}

run_suite() { # SUITE LOG
    local cmd
    case "$1" in
        rust) cmd=(cargo test -p writerlock --no-fail-fast) ;;
        c) cmd=(bindings/tests/run.sh) ;;
        php) cmd=(php-ext/tests/run.sh) ;;
        python) cmd=(python/tests/run.sh -rfE "$scratch/python/tests") ;;
    esac
    # Its own session, so an interrupt or the time limit ends every process it started.
    setsid timeout -k 30 "$suite_timeout" tests/with-postgres.sh "${cmd[@]}" >"$2" 2>&1 </dev/null 9>&- &
    suite_pid=$!
    wait "$suite_pid"
    local rc=$?
    suite_pid=
    return "$rc"
}

# failing_tests SUITE LOG: the names of the failing tests, one a line.
failing_tests() {
    case "$1" in
        rust) # `test NAME ... FAILED`, named by the test binary it ran in
            awk '/^ *Running unittests /{bin="lib"} /^ *Running tests\//{b=$2; sub(/^tests\//,"",b); sub(/\.rs$/,"",b); bin=b}
                 /^test .* \.\.\. FAILED( |$)/{print bin "::" $2}' "$2" ;;
        c) grep -E '^test \S+ \.\.\. FAILED( |$)' "$2" | awk '{print $2}' ;;
        php) sed 's/\x1b\[[0-9;]*m//g' "$2" | grep -E '^FAIL .*\[[^]]+\.phpt\]' | sed -E 's/.*\[([^]]+)\].*/\1/; s#.*/##' ;;
        python) grep -E '^(FAILED|ERROR) \S+' "$2" | awk '{print $2}' | sed -E 's#.*/##' ;;
    esac | awk '!seen[$0]++'
}

# --- the run --------------------------------------------------------------------------------
results=()
bad=0
started=$(date +%s)
echo "breakages: commit ${sha:0:12} ($(git -C "$root" log -1 --format=%s "$sha" | cut -c1-70))"
echo "breakages: breakages: ${breakages[*]}; suites: ${suites[*]}; logs in $logs"
for b in "${breakages[@]}"; do
    restore_scratch
    edited=()
    apply_breakage "$b"
    echo
    echo "== $b"
    : >"$logs/$b.build.log"
    if ! build_fresh "$logs/$b.build.log"; then
        tail -30 "$logs/$b.build.log" >&2
        echo "breakages: the code does not build with '$b' (see $logs/$b.build.log)" >&2
        exit 3
    fi
    [[ "$b" != none ]] && git --no-pager diff --stat | sed 's/^/   /'
    for s in "${suites[@]}"; do
        log="$logs/$b.$s.log"
        t0=$(date +%s)
        printf '   %-7s running ... ' "$s"
        run_suite "$s" "$log"
        rc=$?
        secs=$(($(date +%s) - t0))
        mapfile -t names < <(failing_tests "$s" "$log")
        loaded="$(suite_library "$s")"
        # shellcheck disable=SC2086
        if [[ -n "$loaded" ]] && stale $loaded; then
            result=STALE-BUILD # the suite loaded a library older than the code
        elif ((rc == 124 || rc == 137)); then
            result=HUNG
        elif ((rc == 0)); then
            result=$([[ "$b" == none ]] && echo PASSED || echo MISSED)
        elif ((${#names[@]})); then
            result=$([[ "$b" == none ]] && echo FAILED || echo CAUGHT)
        else
            result=FAILED-UNNAMED
        fi
        [[ "$result" == CAUGHT || "$result" == PASSED ]] || bad=1
        echo "$result in ${secs} s (${#names[@]} failing)"
        printf '%s\n' "${names[@]}" >"$logs/$b.$s.failing"
        results+=("$b|$s|$result|${#names[@]}|$(
            IFS=,
            echo "${names[*]}"
        )")
    done
done
restore_scratch

# --- the table ------------------------------------------------------------------------------
echo
echo "Breakages on commit ${sha:0:12}, $(date -u '+%Y-%m-%d %H:%M UTC'), $((($(date +%s) - started) / 60)) min:"
printf '%-27s %-7s %-15s %s\n' breakage suite result "failing tests"
printf '%-27s %-7s %-15s %s\n' -------- ----- ------ -------------
for r in "${results[@]}"; do
    IFS='|' read -r b s result n names <<<"$r"
    shown="${names//,/, }"
    if ((${#shown} > 110)); then shown="${shown:0:110}... ($n in all)"; fi
    [[ "$result" == HUNG ]] && shown="killed after ${suite_timeout} s${names:+; failed before: $shown}"
    [[ "$result" == FAILED-UNNAMED ]] && shown="see $logs/$b.$s.log"
    printf '%-27s %-7s %-15s %s\n' "$b" "$s" "$result" "$shown"
done
echo "(full lists: $logs/<breakage>.<suite>.failing; logs: $logs/<breakage>.<suite>.log)"
exit "$bad"
}
