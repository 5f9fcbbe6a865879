#!/usr/bin/env bash
# The PHP extension's tests, with real PHP processes: builds writerlock.so
# (cargo build -p writerlock-php, profile from WL_PROFILE), then runs every *_test.php here
# with `php -d extension=<abs path>`. Each test script prints "ok - ..." /
# "not ok - ..." lines; this prints them and a closing "N passed, N failed",
# and exits non-zero on any failure. Runs from any directory.
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
if command -v "$PHP" >/dev/null 2>&1; then
    mods="$("$PHP" -m 2>/dev/null)"
    grep -qx sqlite3 <<<"$mods" || { echo "MISSING: PHP's sqlite3 extension; install it with: apt-get install php8.2-sqlite3" >&2; missing=1; }
    grep -qx pcntl <<<"$mods" || { echo "MISSING: PHP's pcntl extension (built into Debian's php8.2-cli); reinstall php8.2-cli" >&2; missing=1; }
    grep -qx posix <<<"$mods" || { echo "MISSING: PHP's posix extension; install it with: apt-get install php8.2-common" >&2; missing=1; }
fi
if [ "$missing" -ne 0 ]; then
    echo "0 passed, 1 failed"
    exit 1
fi

PROFILE="${WL_PROFILE:-release}"
if [[ "$PROFILE" == dev ]]; then PROFILE_DIR=debug; else PROFILE_DIR="$PROFILE"; fi
echo "building the extension: $CARGO build --profile $PROFILE -p writerlock-php"
if ! (cd "$ROOT" && "$CARGO" build --profile "$PROFILE" -p writerlock-php); then
    echo "not ok - cargo build --profile $PROFILE -p writerlock-php"
    echo "0 passed, 1 failed"
    exit 1
fi
EXT="${CARGO_TARGET_DIR:-$ROOT/target}/$PROFILE_DIR/libwriterlock_php.so"
export WL_EXT="$EXT"
export WL_ROOT="$ROOT"

passed=0
failed=0
for test in "$HERE"/*_test.php; do
    name="$(basename "$test" .php)"
    if [ -n "${WL_ONLY:-}" ] && [[ "$name" != *"$WL_ONLY"* ]]; then
        continue
    fi
    echo "# $name"
    out="$(cd "$HERE" && "$PHP" -d extension="$EXT" "$test" 2>&1)"
    rc=$?
    printf '%s\n' "$out" | sed 's/^/  /'
    ok=$(grep -c '^ok - ' <<<"$out")
    notok=$(grep -c '^not ok - ' <<<"$out")
    passed=$((passed + ok))
    failed=$((failed + notok))
    if [ "$rc" -ne 0 ] && [ "$notok" -eq 0 ]; then
        echo "  not ok - $name exited with status $rc"
        failed=$((failed + 1))
    elif [ "$ok" -eq 0 ] && [ "$notok" -eq 0 ]; then
        echo "  not ok - $name ran no test"
        failed=$((failed + 1))
    fi
done

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
