#!/usr/bin/env bash
# Builds and runs every example under examples/ the way a user meets it, so that an example
# can neither drift from the README nor report success while writing nothing:
#   1. every ```c and ```rust block of README.md and docs/*.md is, byte for byte, a file under
#      examples/ (examples/c/*.c, examples/*.rs), and every such file is shown in one of them;
#   2. installs the library and the command with bindings/install.sh into a temporary PREFIX
#      and builds each C example against the INSTALLED writerlock.pc, exactly as the install
#      hint says (`pkg-config --cflags --libs writerlock` and -Wl,-rpath), as C89 (gnu89),
#      C99 and C++, all with -pedantic -Werror; runs the README's C build lines verbatim, with
#      the default prefix and under $HOME/.local (make install as bindings/install.sh);
#   3. runs each C example under valgrind with its default leak kinds (definite and possible)
#      and checks in the database that it wrote what it says (the libpq one against the
#      Postgres server TEST_DATABASE_URL names, in a database of its own, and below a raised
#      writer floor, where it must be refused with LW001); runs the Rust example the same
#      way (cargo's examples of the writerlock crate) and the installed `writerlock` command;
#   4. installs again with DEBUG_INFO=separate and checks the split debug information;
#   5. greps the READMEs, docs/ and the bench report's text for the project's private words ("seed",
#      issue numbers), which users would not understand.
#
# usage: examples/run.sh        (`make test` runs it; WL_PROFILE picks the cargo profile)
# Prints one line per check and a closing `N passed, N failed` line; exits non-zero on failure.
set -uo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
cd "$root"

checks_name=examples/run.sh
# shellcheck source=bindings/tests/checks.sh
source "$root/bindings/tests/checks.sh"

cc="${CC:-cc}"
cxx="${CXX:-g++}"
for tool in "$cc" "$cxx" pkg-config valgrind sqlite3 python3 readelf; do
    command -v "$tool" >/dev/null 2>&1 || die "$tool is missing; install what the tests need with: make deps"
done
pkg-config --exists libpq ||
    die "the libpq headers are missing (examples/c/pg_libpq_writer.c uses them); install them with: apt-get install -y libpq-dev (or: make deps)"
command -v psql >/dev/null 2>&1 || die "psql is missing; install it with: apt-get install -y postgresql-client (or: make deps)"
if [[ -z "${TEST_DATABASE_URL:-}" ]]; then
    echo "examples/run.sh: TEST_DATABASE_URL is not set: the libpq example will FAIL." >&2
    echo "examples/run.sh:   run it with \`make test\`, or: tests/with-postgres.sh examples/run.sh" >&2
fi

# --- 1. the C and Rust blocks of the README and docs/ are the example files -----------------
if out="$(python3 - "$root" "$here" <<'PY'
import pathlib, re, sys
root, examples = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
pages = [root / "README.md"] + sorted((root / "docs").glob("*.md"))
files = {"c": sorted(examples.glob("c/*.c")), "rust": sorted(examples.glob("*.rs"))}
texts = {lang: {p: p.read_text() for p in paths} for lang, paths in files.items()}
blocks = [(page, lang, body) for page in pages
          for lang, body in re.findall(r"^```(c|rust)\n(.*?)^```$", page.read_text(), re.M | re.S)]
problems, shown = [], set()
for page, lang, body in blocks:
    match = [p for p, t in texts[lang].items() if t == body]
    if not match:
        first = body.strip().splitlines()[0] if body.strip() else "(empty)"
        problems.append(f"a ```{lang} block of {page.relative_to(root)} (starting {first!r}) is no "
                        f"file under examples/: copy the file into the page verbatim")
    shown.update(match)
for lang, paths in files.items():
    for p in paths:
        if p not in shown:
            problems.append(f"{p.relative_to(examples.parent)} is shown neither in README.md nor in docs/")
if not any(page.name == "README.md" for page, _, _ in blocks):
    problems.append("README.md has no ```c or ```rust block")
print("\n".join(problems) or f"{len(blocks)} blocks")
sys.exit(1 if problems else 0)
PY
)"; then
    pass readme_blocks_are_example_files
    echo "    $out"
else
    mapfile -t lines <<<"$out"
    fail readme_blocks_are_example_files "${lines[@]}"
fi

# --- the READMEs, docs/ and the bench report speak the users' words --------------------------
# Users know Exponential's driver, the ledger spec and SQLite's busy handler; the project's
# private names for its sources and its tracker's issue numbers mean nothing to them. The bench
# report is checked in its string literals (what it prints).
found="$({
    grep -nHiE '\bseeds?\b|\bseed'"'"'s|issues? #?[0-9]' README.md ./*/README.md docs/*.md 2>/dev/null
    grep -nHE '"[^"]*(\b[Ss]eeds?\b|[Ss]eed'"'"'s|[Ii]ssues? #?[0-9])[^"]*"' bench/src/*.rs 2>/dev/null
} | head -20)"
if [[ -n "$found" ]]; then
    mapfile -t lines <<<"$found"
    fail users_words_in_readmes_and_bench_output "${lines[@]}"
else
    pass users_words_in_readmes_and_bench_output
fi

# --- 2. build, install into a temporary PREFIX ---------------------------------------------
profile="${WL_PROFILE:-release}"
if [[ "$profile" == dev ]]; then profile_dir=debug; else profile_dir="$profile"; fi
target="${CARGO_TARGET_DIR:-$root/target}/$profile_dir"
echo "examples/run.sh: cargo build --profile $profile -p writerlock-c -p writerlock-cli, and the Rust examples"
cargo build --quiet --profile "$profile" -p writerlock-c -p writerlock-cli || die "the $profile build failed"
cargo build --quiet --profile "$profile" -p writerlock --examples || die "the Rust examples did not build"

tmp="$(mktemp -d /tmp/wl-examples.XXXXXX)"
trap 'rm -rf "$tmp"' EXIT
prefix="$tmp/prefix"
WL_PROFILE="$profile" install_into "$prefix" "$tmp/install.log"
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
# The hint install printed, as a user copies it.
grep -qF "export PKG_CONFIG_PATH=$prefix/lib/pkgconfig" "$tmp/install.log" &&
    grep -qF 'cc app.c $(pkg-config --cflags --libs writerlock) -Wl,-rpath,'"$prefix/lib" "$tmp/install.log" ||
    fail install_hint "install's hint lacks PKG_CONFIG_PATH or the pkg-config line with -Wl,-rpath:" \
        "$(cat "$tmp/install.log")"
flags=($(pkg-config --cflags --libs writerlock))

# --- the README's C build lines, verbatim -----------------------------------------------------
# Each ```sh block of the README's C section runs as written in a directory holding queue.c,
# with no PKG_CONFIG_PATH of ours: its `make install PREFIX=P` line becomes bindings/install.sh P
# (make install builds the release profile first; the tests install what they built). The
# default prefix stands in as the temporary one on pkg-config's and the loader's paths.
readme_c="$tmp/readme-c"
mkdir -p "$readme_c"
if ! python3 - "$root/README.md" "$readme_c" <<'PY'
import pathlib, re, sys
text = pathlib.Path(sys.argv[1]).read_text()
start = text.index("\n## C\n")
end = text.find("\n## ", start + 1)
blocks = re.findall(r"^```sh\n(.*?)^```$", text[start:end], re.M | re.S)
for i, block in enumerate(blocks, 1):
    pathlib.Path(sys.argv[2], f"block{i}.sh").write_text(block)
sys.exit(0 if len(blocks) == 2 else 1)
PY
then
    fail readme_c_build_lines "the README's C section should have two sh blocks (the default prefix, another prefix)"
else
    for block in "$readme_c"/block*.sh; do
        name="readme_c_build_lines_$(basename "$block" .sh)"
        dir="$readme_c/$(basename "$block" .sh)"
        mkdir -p "$dir/home"
        cp "$here/c/queue.c" "$dir/"
        sed -i -E 's|^make install PREFIX=([^ ]+).*$|WL_PROFILE="$WL_PROFILE" "$WL_ROOT/bindings/install.sh" \1 >install.log \|\| exit 1|' "$block"
        if grep -q 'install.sh /usr/local' "$block"; then
            # The default prefix: what is installed under $prefix stands in for /usr/local.
            sed -i '/install.sh \/usr\/local/d' "$block"
            run_env=(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" LD_LIBRARY_PATH="$prefix/lib")
        else
            run_env=()
        fi
        if ! (cd "$dir" && env -u PKG_CONFIG_PATH -u LD_LIBRARY_PATH HOME="$dir/home" WL_ROOT="$root" \
            WL_PROFILE="$profile" "${run_env[@]}" bash -euo pipefail "$block") >"$dir/build.log" 2>&1; then
            fail "$name" "the README's lines failed:" "$(cat "$block")" "$(tail -8 "$dir/build.log")"
        elif ! (cd "$dir" && env -u LD_LIBRARY_PATH "${run_env[@]}" ./queue db.sqlite) >"$dir/run.log" 2>&1 ||
            [[ "$(sqlite3 "$dir/db.sqlite" 'SELECT count(*) FROM t' 2>&1)" != 1 ]]; then
            fail "$name" "the program the README's lines built did not run and write its row:" "$(tail -5 "$dir/run.log")"
        else
            pass "$name"
        fi
    done
fi

# row_count DB TABLE: the number of rows, or a message.
row_count() {
    sqlite3 "$1" "SELECT count(*) FROM $2" 2>&1
}

# run_checked NAME DIR EXPECTED-ROWS TABLE COMMAND...: runs COMMAND twice in DIR on db.sqlite
# (under valgrind when it is a C program) and checks the table's rows after each run.
run_checked() {
    local name="$1" dir="$2" per_run="$3" table="$4"
    shift 4
    local run problems=() rows
    for run in 1 2; do
        if ! (cd "$dir" && "$@" db.sqlite) >"$dir/run$run.out" 2>&1; then
            problems+=("run $run exited non-zero:" "$(tail -30 "$dir/run$run.out")")
            break
        fi
        rows="$(row_count "$dir/db.sqlite" "$table")"
        if [[ "$rows" != "$((per_run * run))" ]]; then
            problems+=("after run $run, $table has '$rows' rows, expected $((per_run * run)): the example did not write what it reports")
            break
        fi
    done
    if ((${#problems[@]})); then fail "$name" "${problems[@]}"; else
        pass "$name"
        echo "    $(head -1 "$dir/run1.out")"
    fi
}

# pg_count URL SQL: the first column of the first row, or psql's message.
pg_count() {
    psql -qtAX "$1" -c "$2" 2>&1
}

# run_libpq_writer DIR: examples/c/pg_libpq_writer.c against the test server, in a database of
# its own: twice under valgrind (each run stores one note through the writer session run on
# its own libpq connection), then with the stored writer floor raised above its version 1,
# where the floor check must refuse it with LW001 and store nothing.
run_libpq_writer() {
    local dir="$1" name=c_pg_libpq_writer_runs_clean_under_valgrind problems=() run notes out want status
    if [[ -z "${TEST_DATABASE_URL:-}" ]]; then
        fail "$name" "TEST_DATABASE_URL is not set: run make test, or tests/with-postgres.sh examples/run.sh"
        return
    fi
    local db="wl_example_libpq_$$"
    local base="${TEST_DATABASE_URL%%\?*}"
    local url="${base%/*}/$db${TEST_DATABASE_URL:${#base}}"
    if ! out="$(psql -qX "$TEST_DATABASE_URL" -c "CREATE DATABASE $db" 2>&1)"; then
        fail "$name" "cannot create the database $db: $out"
        return
    fi
    for run in 1 2; do
        if ! valgrind -q --error-exitcode=99 --leak-check=full "$dir/pg_libpq_writer" "$url" \
            >"$dir/run$run.out" 2>"$dir/run$run.err"; then
            problems+=("run $run exited non-zero:" "$(tail -30 "$dir/run$run.err")")
            break
        fi
        notes="$(pg_count "$url" "SELECT count(*) FROM libpq_notes")"
        if [[ "$notes" != "$run" ]]; then
            problems+=("after run $run, libpq_notes has '$notes' rows, expected $run: the example did not write what it reports")
            break
        fi
        grep -qx "stored note $run after 1 wait(s) for the writer lock (floor 1)" "$dir/run$run.out" ||
            problems+=("run $run printed: $(cat "$dir/run$run.out")")
    done
    if ((${#problems[@]})); then fail "$name" "${problems[@]}"; else
        pass "$name"
        echo "    $(head -1 "$dir/run1.out")"
    fi
    problems=()
    out="$(pg_count "$url" "UPDATE writer_floor SET version = 2 WHERE name = 'ledger'")"
    [[ "$out" == "" ]] || problems+=("raising the floor failed: $out")
    valgrind -q --error-exitcode=99 --leak-check=full "$dir/pg_libpq_writer" "$url" >"$dir/refused.out" 2>"$dir/refused.err"
    status=$?
    want="the write: WL_PG_REFUSED LW001: ledger writer version 1 is below version 2, the oldest the shared database allows; update its code and restart it"
    ((status == 1)) || problems+=("below the floor it exited with $status, expected 1 (99: valgrind found errors)")
    grep -qxF "$want" "$dir/refused.err" || problems+=("it did not report the refusal; its error output:" "$(tail -10 "$dir/refused.err")")
    notes="$(pg_count "$url" "SELECT count(*) FROM libpq_notes")"
    [[ "$notes" == 2 ]] || problems+=("libpq_notes has '$notes' rows after the refused run, expected 2")
    if ((${#problems[@]})); then fail c_pg_libpq_writer_refused_below_the_floor "${problems[@]}"; else
        pass c_pg_libpq_writer_refused_below_the_floor
        echo "    $want"
    fi
    psql -qX "$TEST_DATABASE_URL" -c "DROP DATABASE IF EXISTS $db" >/dev/null 2>&1
}

# --- 2 and 3. each C example, built against the installed package, run under valgrind -------
for source in "$here"/c/*.c; do
    name="$(basename "$source" .c)"
    dir="$tmp/c-$name"
    mkdir -p "$dir"
    problems=()
    # The libpq example builds as its comment says: pkg-config --cflags --libs writerlock libpq.
    case "$name" in
    pg_libpq_writer) build_flags=($(pkg-config --cflags --libs writerlock libpq)) ;;
    *) build_flags=("${flags[@]}") ;;
    esac
    for std in "$cc -std=gnu89" "$cc -std=c99" "$cxx -x c++ -std=c++11"; do
        # shellcheck disable=SC2086
        if ! $std -pedantic -Wall -Wextra -Werror "$source" -o "$dir/$name" "${build_flags[@]}" \
            -Wl,-rpath,"$prefix/lib" 2>"$dir/build.log"; then
            problems+=("$std: $(head -5 "$dir/build.log" | tr '\n' ' ')")
        fi
    done
    if ((${#problems[@]})); then
        fail "c_${name}_builds" "${problems[@]}"
        continue
    fi
    pass "c_${name}_builds"
    resolved="$(ldd "$dir/$name" | awk '$1 ~ /^libwriterlock\.so/ { print $3 }')"
    [[ "$resolved" == "$prefix/lib/"* ]] ||
        fail "c_${name}_finds_the_installed_library" "it loads '${resolved:-nothing}', not $prefix/lib (-Wl,-rpath)"
    case "$name" in
    queue) rows=1 table=t ;;
    pg_libpq_writer)
        run_libpq_writer "$dir"
        continue
        ;;
    *)
        fail "c_$name" "examples/run.sh does not know what examples/c/$name.c writes: add it to the case"
        continue
        ;;
    esac
    run_checked "c_${name}_runs_clean_under_valgrind" "$dir" "$rows" "$table" \
        valgrind -q --error-exitcode=99 --leak-check=full "$dir/$name"
done

# --- the Rust examples ------------------------------------------------------------------------
for source in "$here"/*.rs; do
    name="$(basename "$source" .rs)"
    dir="$tmp/rust-$name"
    mkdir -p "$dir"
    case "$name" in
    queue) rows=1 table=ezurl ;;
    transaction) rows=1 table=t ;;
    interrupt)
        # Writes nothing: its wait must end early (the flag is set at 0.3 s), with the
        # interrupted message quoting the measured wait; a loaded machine may end it late, so
        # the number is bounded generously rather than matched.
        waited=""
        if (cd "$dir" && timeout 20 "$target/examples/$name" db.sqlite) >"$dir/out" 2>&1; then
            waited="$(sed -n 's/^the wait for the writer turn was interrupted after \([0-9]*\.[0-9]\) s; nothing was written$/\1/p' "$dir/out" | head -1)"
        fi
        if [[ -n "$waited" ]] && awk -v w="$waited" 'BEGIN { exit !(w >= 0.2 && w <= 2.3) }'; then
            pass "rust_${name}_runs"
            echo "    $(head -1 "$dir/out")"
        else
            fail "rust_${name}_runs" "expected the interrupted message after 0.3 s (at most 2.3 s):" "$(tail -5 "$dir/out")"
        fi
        continue
        ;;
    *)
        fail "rust_$name" "examples/run.sh does not know what examples/$name.rs writes: add it to the case"
        continue
        ;;
    esac
    run_checked "rust_${name}_runs" "$dir" "$rows" "$table" "$target/examples/$name"
done

# --- the installed command ------------------------------------------------------------------
cmd="$prefix/bin/writerlock"
if [[ ! -x "$cmd" ]]; then
    fail installed_command "$cmd is not installed"
elif ! out="$("$cmd" status "$tmp/c-queue/db.sqlite" 2>&1)"; then
    fail installed_command "$cmd status exited non-zero: $out"
elif [[ "$("$cmd" --version)" != "writerlock $(pkg-config --modversion writerlock)" ]]; then
    fail installed_command "$cmd --version says '$("$cmd" --version)', the library $(pkg-config --modversion writerlock)"
else
    pass installed_command
fi

# --- 4. DEBUG_INFO=separate -------------------------------------------------------------------
sep="$tmp/separate"
problems=()
if ! DEBUG_INFO=separate WL_PROFILE="$profile" bindings/install.sh "$sep" >"$tmp/separate.log" 2>&1; then
    problems+=("install with DEBUG_INFO=separate failed:" "$(tail -5 "$tmp/separate.log")")
else
    for f in "$sep/lib/libwriterlock.so.$(pkg-config --modversion writerlock)" "$sep/bin/writerlock"; do
        debug="$(dirname "$f")/.debug/$(basename "$f").debug"
        readelf -S "$f" | grep -q '\.debug_info' && problems+=("$f still carries debug information")
        [[ -f "$debug" ]] && readelf -S "$debug" 2>/dev/null | grep -q '\.debug_info' ||
            problems+=("$debug is missing or has no debug information")
        link="$(readelf --string-dump=.gnu_debuglink "$f" 2>/dev/null | awk '/\[/ { print $3; exit }')"
        [[ "$link" == "$(basename "$debug")" ]] || problems+=("$f links '${link:-nothing}', not $(basename "$debug")")
    done
fi
if ((${#problems[@]})); then fail debug_info_separate "${problems[@]}"; else
    pass debug_info_separate
    echo "    stripped $(du -h "$prefix/lib/libwriterlock.so.$(pkg-config --modversion writerlock)" | cut -f1) libwriterlock.so," \
        "$(du -h "$prefix/lib/libwriterlock.a" | cut -f1) libwriterlock.a ($profile profile)"
fi

finish
