#!/usr/bin/env bash
# The C ABI test, as a C user meets the library:
#   1. builds the release library and installs it with bindings/install.sh into a temporary
#      PREFIX (libraries, header, writerlock.pc);
#   2. checks the installed files, the soname, that the .so links the system libsqlite3 (not a
#      bundled copy) and exports exactly the header's functions, and that the header compiles
#      on its own (C99 and C11, with and without <sqlite3.h>);
#   3. compiles bindings/tests/abi_test.c with `pkg-config --cflags --libs writerlock` against
#      the INSTALLED header and .so, and runs it under valgrind with its default leak kinds
#      and the installed suppression file (definite and possible leaks and memory errors fail,
#      in the test process and in every process it forks);
#   4. links the same program statically against libwriterlock.a (pkg-config --static) and
#      runs a smoke subset.
# The Postgres half needs TEST_DATABASE_URL (`make test` sets it; or run
# `tests/with-postgres.sh bindings/tests/run.sh`); without it the run fails.
#
# Prints one line per check and a closing `N passed, N failed` line; exits non-zero on failure.
set -uo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$root"

checks_name=run.sh
# shellcheck source=bindings/tests/checks.sh
source "$here/checks.sh"

cc="${CC:-cc}"
command -v "$cc" >/dev/null 2>&1 || die "no C compiler ($cc); install one with: apt-get install -y gcc (or: make deps)"
command -v pkg-config >/dev/null 2>&1 || die "pkg-config is missing; install it with: apt-get install -y pkg-config (or: make deps)"
command -v valgrind >/dev/null 2>&1 || die "valgrind is missing; install it with: apt-get install -y valgrind (or: make deps)"
command -v flock >/dev/null 2>&1 || die "flock (util-linux) is missing; install it with: apt-get install -y util-linux (or: make deps)"
pkg-config --exists sqlite3 || die "the SQLite headers are missing; install them with: apt-get install -y libsqlite3-dev (or: make deps)"
if [[ -z "${TEST_DATABASE_URL:-}" ]]; then
    echo "run.sh: TEST_DATABASE_URL is not set: the Postgres tests will FAIL." >&2
    echo "run.sh:   run them with \`make test\`, or: tests/with-postgres.sh bindings/tests/run.sh" >&2
fi

profile="${WL_PROFILE:-release}"
echo "run.sh: cargo build --profile $profile -p writerlock-c -p writerlock-cli"
cargo build --quiet --profile "$profile" -p writerlock-c -p writerlock-cli || die "the $profile build failed"

tmp="$(mktemp -d /tmp/wl-c-abi.XXXXXX)"
# The TLS-only server of the verify-full case: a directory the server's user can reach.
tls_root="$(mktemp -d /tmp/wl-c-tls.XXXXXX)"
chmod 755 "$tls_root"
trap '"$root/tests/pg-tls-cluster.sh" stop "$tls_root/cluster" >/dev/null 2>&1; rm -rf "$tmp" "$tls_root"' EXIT
prefix="$tmp/prefix"
install_into "$prefix" "$tmp/install.log"
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
version="$(pkg-config --modversion writerlock)"
major="${version%%.*}"
lib="$prefix/lib/libwriterlock.so.$version"

# --- the installed files ------------------------------------------------------------------
problems=()
for f in "$lib" "$prefix/lib/libwriterlock.a" "$prefix/include/writerlock.h" \
    "$prefix/lib/pkgconfig/writerlock.pc"; do
    [[ -f "$f" ]] || problems+=("missing $f")
done
[[ "$(readlink "$prefix/lib/libwriterlock.so.$major")" == "libwriterlock.so.$version" ]] ||
    problems+=("libwriterlock.so.$major does not point to libwriterlock.so.$version")
[[ "$(readlink "$prefix/lib/libwriterlock.so")" == "libwriterlock.so.$major" ]] ||
    problems+=("libwriterlock.so does not point to libwriterlock.so.$major")
soname="$(readelf -d "$lib" 2>/dev/null | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')"
[[ "$soname" == "libwriterlock.so.$major" ]] || problems+=("soname is '${soname:-none}', expected libwriterlock.so.$major")
cmp -s "$prefix/include/writerlock.h" include/writerlock.h || problems+=("the installed header differs from include/writerlock.h")
flags="$(pkg-config --cflags --libs writerlock)"
[[ "$flags" == *"-I$prefix/include"* && "$flags" == *"-lwriterlock"* ]] || problems+=("pkg-config gives '$flags'")
[[ "$(pkg-config --static --libs writerlock)" == *"-lsqlite3"* ]] || problems+=("a static link does not get -lsqlite3")
[[ "$(pkg-config --print-requires writerlock)" == sqlite3* ]] || problems+=("writerlock.pc lacks Requires: sqlite3")
[[ "$flags" == *"-lsqlite3"* ]] || problems+=("pkg-config --libs writerlock gives '$flags', without -lsqlite3: a program that calls SQLite would not link")
grep -q '^URL:.*example' "$prefix/lib/pkgconfig/writerlock.pc" && problems+=("writerlock.pc names a placeholder URL")
grep -qF -- "-Wl,-rpath,$prefix/lib" "$tmp/install.log" && grep -qF "LD_LIBRARY_PATH=$prefix/lib" "$tmp/install.log" ||
    problems+=("install's hint does not say how programs find $prefix/lib at run time")
grep -qF 'cc app.c $(pkg-config --cflags --libs writerlock)' "$tmp/install.log" ||
    problems+=("install's hint lacks the pkg-config build line")
[[ -f "$prefix/share/writerlock/writerlock.supp" ]] || problems+=("the valgrind suppression file is not installed")
[[ -x "$prefix/bin/writerlock" ]] || problems+=("the writerlock command is not installed in $prefix/bin")
for f in "$lib" "$prefix/bin/writerlock"; do
    [[ -f "$f" ]] && readelf -S "$f" | grep -q '\.debug_info' && problems+=("$f carries debug information (install strips it by default)")
done
[[ -f "$prefix/lib/libwriterlock.a" ]] && objdump -h "$prefix/lib/libwriterlock.a" 2>/dev/null | grep -q '\.debug_info' &&
    problems+=("libwriterlock.a carries debug information (install strips it by default)")
if ((${#problems[@]})); then fail installed_files "${problems[@]}"; else pass installed_files; fi

# --- the system libsqlite3, not a bundled copy ----------------------------------------------
ldd_out="$(ldd "$lib")"
linked="$(awk '$1 == "libsqlite3.so.0" { print $3 }' <<<"$ldd_out")"
system="$(pkg-config --variable=libdir sqlite3)/libsqlite3.so.0"
bundled="$(nm -D --defined-only "$lib" | awk '$3 ~ /^sqlite3_/' | head -3)"
if [[ -z "$linked" ]]; then
    fail ldd_system_sqlite "ldd shows no libsqlite3.so.0:" "$ldd_out"
elif [[ "$(readlink -f "$linked")" != "$(readlink -f "$system")" ]]; then
    fail ldd_system_sqlite "libsqlite3.so.0 resolves to $linked, not the system $system"
elif [[ -n "$bundled" ]]; then
    fail ldd_system_sqlite "the library defines SQLite's own symbols (a bundled copy): $bundled"
else
    pass ldd_system_sqlite
    echo "    $(grep libsqlite3 <<<"$ldd_out" | sed 's/^[[:space:]]*//')"
fi

# --- exported symbols match the header ------------------------------------------------------
declared="$(grep -oE '\bwl_[a-z0-9_]+\(' "$prefix/include/writerlock.h" | tr -d '(' | sort -u)"
exported="$(nm -D --defined-only "$lib" | awk '$2 == "T" { print $3 }' | sort -u)"
missing="$(comm -23 <(echo "$declared") <(echo "$exported") | tr '\n' ' ')"
extra="$(comm -13 <(echo "$declared") <(echo "$exported") | tr '\n' ' ')"
if [[ -n "$missing" || -n "$extra" ]]; then
    fail exported_symbols "declared but not exported: ${missing:-none}" "exported but not declared: ${extra:-none}"
else
    pass exported_symbols
    echo "    $(wc -l <<<"$declared") functions, all with the wl_ prefix"
fi

# --- the header compiles on its own -----------------------------------------------------------
problems=()
printf '#include <writerlock.h>\nint main(void) { return WL_OK; }\n' >"$tmp/alone.c"
printf '#include <sqlite3.h>\n#include <writerlock.h>\nint main(void) { sqlite3 *db = 0; return (int)wl_queue_commit(0, db); }\n' >"$tmp/first.c"
printf '#include <writerlock.h>\n#include <sqlite3.h>\nint main(void) { sqlite3 *db = 0; return (int)wl_queue_commit(0, db); }\n' >"$tmp/after.c"
for check in "gnu89 alone.c" "c89 first.c" "c99 alone.c" "c11 alone.c" "c99 first.c" "c11 after.c"; do
    set -- $check
    if ! "$cc" -std="$1" -pedantic -Wall -Wextra -Werror -fsyntax-only $(pkg-config --cflags writerlock sqlite3) \
        "$tmp/$2" 2>"$tmp/header.log"; then
        problems+=("-std=$1 $2: $(head -3 "$tmp/header.log" | tr '\n' ' ')")
    fi
done
if ((${#problems[@]})); then fail header_compiles "${problems[@]}"; else pass header_compiles; fi

# --- the version macros, the running library's version and pkg-config agree -----------------
cat >"$tmp/version.c" <<'C'
#include <stdio.h>
#include <writerlock.h>
int main(void) {
    printf("%d.%d.%d %s\n", WL_VERSION_MAJOR, WL_VERSION_MINOR, WL_VERSION_PATCH, wl_version());
    return 0;
}
C
if "$cc" -std=c99 -Wall -Werror "$tmp/version.c" -o "$tmp/version" $(pkg-config --cflags --libs writerlock) \
    -Wl,-rpath,"$prefix/lib" 2>"$tmp/version.log"; then
    got="$("$tmp/version")"
    if [[ "$got" == "$version $version" ]]; then
        pass version_macros
    else
        fail version_macros "WL_VERSION_* and wl_version() give '$got', pkg-config --modversion $version"
    fi
else
    fail version_macros "$(head -5 "$tmp/version.log")"
fi

# --- the ABI test, against the installed .so, under valgrind ----------------------------------
cflags=(-std=c11 -Wall -Wextra -Werror -g -O0)
if ! "$cc" "${cflags[@]}" "$here/abi_test.c" -o "$tmp/abi_test" \
    $(pkg-config --cflags writerlock sqlite3) $(pkg-config --libs writerlock sqlite3) -lm \
    -Wl,-rpath,"$prefix/lib" 2>"$tmp/build.log"; then
    cat "$tmp/build.log"
    die "abi_test.c did not compile against the installed header"
fi
resolved="$(ldd "$tmp/abi_test" | awk '$1 == "libwriterlock.so.'"$major"'" { print $3 }')"
if [[ "$resolved" != "$prefix/lib/libwriterlock.so.$major" ]]; then
    fail linked_to_installed_so "abi_test resolves libwriterlock.so.$major to '${resolved:-nothing}', not $prefix/lib"
else
    pass linked_to_installed_so
fi

if [[ -n "${TEST_DATABASE_URL:-}" ]]; then
    if "$root/tests/pg-tls-cluster.sh" start "$tls_root/cluster" "$tls_root/env" >"$tls_root/start.log" 2>&1; then
        # shellcheck disable=SC1091
        source "$tls_root/env"
        export WL_TLS_PG_URL="postgresql://postgres@localhost:$TLS_PG_PORT/postgres?sslmode=verify-full&sslrootcert=$TLS_CERT_DIR/ca.crt"
        export WL_TLS_PG_SCRIPT="$root/tests/pg-tls-cluster.sh" WL_TLS_PG_DIR="$tls_root/cluster"
        export WL_TLS_PG_WRONG_HOST="host=db.invalid hostaddr=127.0.0.1 port=$TLS_PG_PORT user=postgres dbname=postgres sslmode=verify-full sslrootcert=$TLS_CERT_DIR/ca.crt"
    else
        cat "$tls_root/start.log"
        fail tls_cluster "tests/pg-tls-cluster.sh could not start the TLS-only server"
    fi
fi

# valgrind's default leak kinds (definite and possible) fail the run, as they would a user's.
echo "run.sh: valgrind --error-exitcode=1 --leak-check=full --suppressions=PREFIX/share/writerlock/writerlock.supp abi_test"
mkdir -p "$tmp/valgrind"
# Processes that exec another program (the test spawns one) end their valgrind log at the
# exec, without a summary: abi_test lists their pids here.
export WL_ABI_EXEC_PIDS="$tmp/exec-pids"
: >"$WL_ABI_EXEC_PIDS"
# The installed suppression file covers the one Rust thread handle the Postgres driver keeps.
valgrind --error-exitcode=1 --leak-check=full --log-file="$tmp/valgrind/vg.%p.log" \
    --suppressions="$prefix/share/writerlock/writerlock.supp" \
    "$tmp/abi_test" | tee "$tmp/abi.out"
abi_rc=${PIPESTATUS[0]}
summary="$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$tmp/abi.out" | tail -1)"
if [[ -z "$summary" ]]; then
    fail abi_test "the program ended (exit $abi_rc) without its summary line"
else
    c_passed="${summary%% passed*}"
    c_failed="${summary#*passed, }"
    c_failed="${c_failed%% failed}"
    passed=$((passed + c_passed))
    failed=$((failed + c_failed))
    if ((abi_rc != 0 && c_failed == 0)); then
        fail abi_test_exit "abi_test exited with $abi_rc although its tests passed"
    fi
fi
dirty=()
processes=0
execs=0
for log in "$tmp"/valgrind/vg.*.log; do
    [[ -f "$log" ]] || continue
    processes=$((processes + 1))
    count="$(sed -n 's/.*ERROR SUMMARY: \([0-9]*\) errors.*/\1/p' "$log" | tail -1)"
    pid="${log##*/vg.}"
    pid="${pid%.log}"
    # A listed process that exec'd: its log must hold valgrind's banner and nothing else.
    if [[ -z "$count" ]] && grep -qx "$pid" "$WL_ABI_EXEC_PIDS" &&
        ! grep -vE "^==$pid== ($|Memcheck, |Copyright |Using Valgrind|Command: |Parent PID: )" "$log" | grep -q .; then
        execs=$((execs + 1))
        continue
    fi
    if [[ "${count:-missing}" != 0 ]]; then
        dirty+=("$(basename "$log"): ${count:-no} errors")
        sed 's/^/      /' "$log" | head -80
    fi
done
if ((processes == 0)); then
    fail valgrind_clean "valgrind wrote no log"
elif ((${#dirty[@]})); then
    fail valgrind_clean "${dirty[@]}"
else
    pass valgrind_clean
    echo "    $processes processes (the test and its forked writers): 0 errors, no leaks (definite or possible)"
    ((execs)) && echo "    ($execs of them exec'd a program, which valgrind does not follow: their logs end at the exec)"
fi

# --- static linking with pkg-config --static ------------------------------------------------
if "$cc" "${cflags[@]}" "$here/abi_test.c" -o "$tmp/abi_test_static" \
    $(pkg-config --cflags writerlock sqlite3) -L"$prefix/lib" -Wl,-Bstatic -lwriterlock -Wl,-Bdynamic \
    $(pkg-config --static --libs-only-l writerlock | sed 's/-lwriterlock//') -lm 2>"$tmp/static.log"; then
    if ldd "$tmp/abi_test_static" | grep -q libwriterlock; then
        fail static_link "the static build still loads libwriterlock.so"
    elif "$tmp/abi_test_static" begin_commit >"$tmp/static.out" 2>&1; then
        pass static_link
    else
        fail static_link "the statically linked program failed:" "$(tail -20 "$tmp/static.out")"
    fi
else
    fail static_link "linking against libwriterlock.a failed:" "$(head -10 "$tmp/static.log")"
fi

finish
