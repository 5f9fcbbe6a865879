#!/usr/bin/env bash
# Installs the C library and the `writerlock` command under PREFIX:
#   PREFIX/bin/writerlock
#   PREFIX/lib/libwriterlock.so.X.Y.Z (+ libwriterlock.so.X and libwriterlock.so symlinks)
#   PREFIX/lib/libwriterlock.a
#   PREFIX/include/writerlock.h
#   PREFIX/lib/pkgconfig/writerlock.pc
#   PREFIX/share/writerlock/writerlock.supp (valgrind suppressions for the Postgres functions)
#
# usage: bindings/install.sh PREFIX        (DESTDIR=... for staged installs)
#
# Installed files are stripped of debug information. DEBUG_INFO picks otherwise:
#   DEBUG_INFO=separate  the debug information goes beside each file, in .debug/<file>.debug
#                        (PREFIX/lib/.debug/, PREFIX/bin/.debug/), linked from the stripped
#                        file with .gnu_debuglink: gdb and valgrind find it there themselves;
#   DEBUG_INFO=keep      the files are installed as built, unstripped.
#
# It installs what `cargo build --release -p writerlock-c -p writerlock-cli` built (`make install`
# builds first); when the release files are missing it builds them itself.
set -euo pipefail

if [[ $# -ne 1 || -z "$1" ]]; then
    echo "usage: $0 PREFIX" >&2
    exit 2
fi
prefix="$1"
case "$prefix" in
/*) ;;
*) prefix="$(cd "$(dirname "$prefix")" 2>/dev/null && pwd)/$(basename "$prefix")" || {
        echo "install: cannot resolve PREFIX $1; give an absolute path" >&2
        exit 2
    } ;;
esac
root="$(cd "$(dirname "$0")/.." && pwd)"
# WL_PROFILE picks the cargo profile to install from (default release; the
# tests use dev, which shares the test build's artifacts).
profile="${WL_PROFILE:-release}"
if [[ "$profile" == dev ]]; then profile_dir=debug; else profile_dir="$profile"; fi
release="${CARGO_TARGET_DIR:-$root/target}/$profile_dir"

version="$(awk '
    /^\[workspace\.package\]/ { in_section = 1; next }
    /^\[/ { in_section = 0 }
    in_section && $1 == "version" { gsub(/"/, "", $3); print $3; exit }
' "$root/Cargo.toml")"
if [[ ! "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
    echo "install: could not read the version from $root/Cargo.toml ([workspace.package] version)" >&2
    exit 1
fi
major="${version%%.*}"

debug_info="${DEBUG_INFO:-strip}"
case "$debug_info" in
strip | separate | keep) ;;
*)
    echo "install: DEBUG_INFO=$debug_info is not one of strip (the default), separate, keep" >&2
    exit 2
    ;;
esac
if [[ "$debug_info" != keep ]]; then
    for tool in strip objcopy; do
        if ! command -v "$tool" >/dev/null 2>&1; then
            echo "install: $tool is missing; install binutils (apt-get install -y binutils)," >&2
            echo "install:   or install unstripped files with DEBUG_INFO=keep" >&2
            exit 1
        fi
    done
fi

so="$release/libwriterlock.so"
archive="$release/libwriterlock.a"
command_bin="$release/writerlock"
if [[ ! -f "$so" || ! -f "$archive" || ! -f "$command_bin" ]]; then
    if ! command -v cargo >/dev/null 2>&1; then
        echo "install: $so, $archive or $command_bin is missing and cargo is not on PATH;" >&2
        echo "install:   build first with: make build" >&2
        echo "install:   (or: cargo build --release -p writerlock-c -p writerlock-cli)" >&2
        exit 1
    fi
    echo "install: building the library and the command (cargo build --profile $profile -p writerlock-c -p writerlock-cli)"
    (cd "$root" && cargo build --profile "$profile" -p writerlock-c -p writerlock-cli)
fi
header="$root/include/writerlock.h"
if [[ ! -f "$header" ]]; then
    echo "install: $header is missing; generate it with: make header" >&2
    exit 1
fi
if command -v readelf >/dev/null 2>&1; then
    soname="$(readelf -d "$so" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')"
    if [[ "$soname" != "libwriterlock.so.$major" ]]; then
        echo "install: $so has soname '${soname:-none}', expected libwriterlock.so.$major;" >&2
        echo "install:   rebuild it with: cargo build --release -p writerlock-c (bindings/build.rs sets it)" >&2
        exit 1
    fi
fi

dest="${DESTDIR:-}"
bindir="$dest$prefix/bin"
libdir="$dest$prefix/lib"
incdir="$dest$prefix/include"
pcdir="$libdir/pkgconfig"
install -d "$bindir" "$libdir" "$incdir" "$pcdir"

# install_file MODE SOURCE TARGET STRIP-FLAG: copies SOURCE to TARGET, then strips it with
# STRIP-FLAG (--strip-unneeded for the command, --strip-debug for the libraries), keeping the debug information in
# .debug/<name>.debug beside it first when DEBUG_INFO=separate.
install_file() {
    local mode="$1" source="$2" target="$3" strip_flag="$4"
    install -m "$mode" "$source" "$target"
    case "$debug_info" in
    keep) return ;;
    separate)
        local debug
        debug="$(dirname "$target")/.debug/$(basename "$target").debug"
        install -d "$(dirname "$debug")"
        objcopy --only-keep-debug "$target" "$debug"
        chmod 0644 "$debug"
        strip "$strip_flag" "$target"
        objcopy --add-gnu-debuglink="$debug" "$target"
        ;;
    strip) strip "$strip_flag" "$target" ;;
    esac
}
install_file 0755 "$command_bin" "$bindir/writerlock" --strip-unneeded
# The shared library keeps its symbol table (function names, no debug information): valgrind
# needs it to apply share/writerlock/writerlock.supp.
install_file 0755 "$so" "$libdir/libwriterlock.so.$version" --strip-debug
ln -sfn "libwriterlock.so.$version" "$libdir/libwriterlock.so.$major"
ln -sfn "libwriterlock.so.$major" "$libdir/libwriterlock.so"
# An archive's members are linked into programs that carry their own debug information: it
# is only stripped or kept, never split.
install -m 0644 "$archive" "$libdir/libwriterlock.a"
[[ "$debug_info" == keep ]] || strip --strip-debug "$libdir/libwriterlock.a"
install -m 0644 "$header" "$incdir/writerlock.h"
install -d "$dest$prefix/share/writerlock"
install -m 0644 "$root/bindings/valgrind/writerlock.supp" "$dest$prefix/share/writerlock/writerlock.supp"

# Requires: the system SQLite, through its own sqlite3.pc. A program hands writerlock its own
# sqlite3* and calls SQLite itself, so `pkg-config --cflags --libs writerlock` alone must link
# it (-lsqlite3 included). Requires.private: the system OpenSSL (libssl, libcrypto), which
# the shared library loads itself and a static link must name. Libs.private: what else a static link needs besides libwriterlock.a
# (rustc's native-static-libs: the C runtime).
cat >"$pcdir/writerlock.pc" <<PC
prefix=$prefix
exec_prefix=\${prefix}
libdir=\${exec_prefix}/lib
includedir=\${prefix}/include

Name: writerlock
Description: Writers that take turns: a cross-process SQLite write queue and a Postgres writer session
Version: $version
Requires: sqlite3
Requires.private: openssl
Libs: -L\${libdir} -lwriterlock
Libs.private: -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc
Cflags: -I\${includedir}
PC
chmod 0644 "$pcdir/writerlock.pc"

echo "install: installed writerlock $version under $dest$prefix:"
echo "  $bindir/writerlock (the command)"
echo "  $libdir/libwriterlock.so.$version (soname libwriterlock.so.$major), libwriterlock.so.$major, libwriterlock.so"
echo "  $libdir/libwriterlock.a"
echo "  $incdir/writerlock.h"
echo "  $pcdir/writerlock.pc"
echo "  $dest$prefix/share/writerlock/writerlock.supp (valgrind suppressions for programs that use wl_pg_*)"
if [[ -z "$dest" && "$(id -u)" == 0 && ( "$prefix" == /usr || "$prefix" == /usr/local ) ]] \
    && command -v ldconfig >/dev/null 2>&1; then
    ldconfig
fi
case "$debug_info" in
strip) echo "  (stripped; DEBUG_INFO=separate keeps the debug information in .debug/ beside each file, DEBUG_INFO=keep installs unstripped files)" ;;
separate) echo "  debug information: $libdir/.debug/ and $bindir/.debug/ (found by gdb through .gnu_debuglink)" ;;
keep) echo "  (unstripped, with debug information)" ;;
esac
case "$prefix" in
/usr | /usr/local)
    echo "install: build with: cc app.c \$(pkg-config --cflags --libs writerlock)"
    ;;
*)
    echo "install: $prefix/lib is on neither pkg-config's nor the run-time linker's path. Build with:"
    echo "  export PKG_CONFIG_PATH=$prefix/lib/pkgconfig"
    echo "  cc app.c \$(pkg-config --cflags --libs writerlock) -Wl,-rpath,$prefix/lib"
    echo "install: or, without -Wl,-rpath, run programs with LD_LIBRARY_PATH=$prefix/lib"
    echo "install: (or add $prefix/lib to /etc/ld.so.conf.d/ and run ldconfig)."
    echo "install: the command: $prefix/bin/writerlock (add $prefix/bin to PATH)"
    ;;
esac
