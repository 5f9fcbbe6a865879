# Sourced by bindings/tests/run.sh and examples/run.sh: the `test NAME ... ok` report both
# print, and the installation into a temporary PREFIX both test against.
#
# Before sourcing, set `checks_name` (the name die() prints). The caller must be at the
# repository's root (install_into runs bindings/install.sh from there).

passed=0
failed=0

# pass NAME: one passed check.
pass() {
    echo "test $1 ... ok"
    passed=$((passed + 1))
}

# fail NAME LINE...: one failed check, with the lines that say why.
fail() {
    echo "test $1 ... FAILED"
    shift
    for line in "$@"; do echo "    $line"; done
    failed=$((failed + 1))
}

# die MESSAGE: the run cannot go on; counts as one more failure and exits 1.
die() {
    echo "$checks_name: $*" >&2
    echo
    echo "$passed passed, $((failed + 1)) failed"
    exit 1
}

# finish: the closing `N passed, N failed` line; the status is non-zero when a check failed.
finish() {
    echo
    echo "$passed passed, $failed failed"
    ((failed == 0))
}

# install_into PREFIX LOG: bindings/install.sh PREFIX from the WL_PROFILE build (default
# release), its output in LOG; on failure prints the log and dies.
install_into() {
    if ! WL_PROFILE="${WL_PROFILE:-release}" bindings/install.sh "$1" >"$2" 2>&1; then
        cat "$2"
        die "bindings/install.sh failed"
    fi
}
