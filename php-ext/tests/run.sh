#!/usr/bin/env bash
# The PHP extension's tests, run by PHP's own run-tests.php (from php8.2-dev)
# with real PHP processes: builds writerlock.so (cargo build -p writerlock-php,
# profile from WL_PROFILE), then runs every *.phpt here with
# `-d extension=<abs path>`. Multi-process and PHP-FPM scenarios are scripts
# (*_test.php, printing "ok - ..." lines) that a .phpt runs and compares.
# A skipped test counts as a failure (a skip must not hide a missing
# dependency). Arguments: .phpt files to run instead of all of them.
# Runs from any directory; exits non-zero on any failure.
set -u
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
CARGO="${CARGO:-cargo}"
PHP="${PHP:-php}"

missing=0
need() { # need CMD HOW-TO-INSTALL
    if ! command -v "$1" >/dev/null 2>&1 && [ ! -x "$1" ]; then
        echo "MISSING: $1 is required by the PHP tests; install it with: $2" >&2
        missing=1
    fi
}
need "$PHP" "apt-get install php8.2-cli"
need /usr/sbin/php-fpm8.2 "apt-get install php8.2-fpm"
need cgi-fcgi "apt-get install libfcgi-bin"
need php-config "apt-get install php8.2-dev libclang-dev (needed to build the extension)"
RUN_TESTS="${RUN_TESTS:-}"
if [ -z "$RUN_TESTS" ] && command -v php-config >/dev/null 2>&1; then
    RUN_TESTS="$(php-config --extension-dir)/build/run-tests.php"
fi
if [ ! -f "$RUN_TESTS" ]; then
    echo "MISSING: PHP's run-tests.php (looked for $RUN_TESTS); install it with: apt-get install php8.2-dev" >&2
    missing=1
fi
if command -v "$PHP" >/dev/null 2>&1; then
    mods="$("$PHP" -m 2>/dev/null)"
    grep -qx sqlite3 <<<"$mods" || { echo "MISSING: PHP's sqlite3 extension; install it with: apt-get install php8.2-sqlite3" >&2; missing=1; }
    grep -qx pdo_sqlite <<<"$mods" || { echo "MISSING: PHP's pdo_sqlite extension; install it with: apt-get install php8.2-sqlite3" >&2; missing=1; }
    grep -qx pcntl <<<"$mods" || { echo "MISSING: PHP's pcntl extension (built into Debian's php8.2-cli); reinstall php8.2-cli" >&2; missing=1; }
    grep -qx posix <<<"$mods" || { echo "MISSING: PHP's posix extension; install it with: apt-get install php8.2-common" >&2; missing=1; }
fi
if [ "$missing" -ne 0 ]; then
    exit 1
fi

PROFILE="${WL_PROFILE:-release}"
if [[ "$PROFILE" == dev ]]; then PROFILE_DIR=debug; else PROFILE_DIR="$PROFILE"; fi
echo "building the extension: $CARGO build --profile $PROFILE -p writerlock-php"
if ! (cd "$ROOT" && "$CARGO" build --profile "$PROFILE" -p writerlock-php); then
    echo "FAIL: cargo build --profile $PROFILE -p writerlock-php" >&2
    exit 1
fi
# The table from the core's error kinds to the exception classes (no PHP process needed).
echo "checking the exception table: $CARGO test --profile $PROFILE -p writerlock-php --test kinds"
if ! (cd "$ROOT" && "$CARGO" test --profile "$PROFILE" -p writerlock-php --test kinds --quiet); then
    echo "FAIL: cargo test -p writerlock-php --test kinds" >&2
    exit 1
fi
EXT="${CARGO_TARGET_DIR:-$ROOT/target}/$PROFILE_DIR/libwriterlock_php.so"
export WL_EXT="$EXT"
export WL_ROOT="$ROOT"
export WL_PROFILE="$PROFILE"
export NO_INTERACTION=1

if [ "$#" -eq 0 ]; then set -- "$HERE"; fi
results="$(mktemp)"
trap 'rm -f "$results"' EXIT
# run-tests.php writes its temporary files next to the tests; -W lists each result.
"$PHP" "$RUN_TESTS" -q -p "$(command -v "$PHP")" -d "extension=$EXT" \
    --show-diff --no-progress --set-timeout 240 -W "$results" "$@"
rc=$?
if grep -q '^SKIP' "$results"; then
    echo "FAIL: skipped tests (a skip must not hide a missing dependency):" >&2
    grep '^SKIP' "$results" >&2
    exit 1
fi
if [ "$rc" -ne 0 ] || grep -qv '^PASS' "$results"; then
    exit 1
fi
