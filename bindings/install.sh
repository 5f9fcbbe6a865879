#!/usr/bin/env bash
# Installs the C library under PREFIX:
#   PREFIX/lib/libwriterlock.so.X.Y.Z (+ libwriterlock.so.X and libwriterlock.so symlinks)
#   PREFIX/lib/libwriterlock.a
#   PREFIX/include/writerlock.h
#   PREFIX/lib/pkgconfig/writerlock.pc
#
# usage: bindings/install.sh PREFIX        (DESTDIR=... for staged installs)
#
# It installs what `cargo build --release -p writerlock-c` built (`make install` builds first);
# when the release libraries are missing it builds them itself.
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

so="$release/libwriterlock.so"
archive="$release/libwriterlock.a"
if [[ ! -f "$so" || ! -f "$archive" ]]; then
    if ! command -v cargo >/dev/null 2>&1; then
        echo "install: $so or $archive is missing and cargo is not on PATH;" >&2
        echo "install:   build first with: make build   (or: cargo build --release -p writerlock-c)" >&2
        exit 1
    fi
    echo "install: building the release library (cargo build --release -p writerlock-c)"
    (cd "$root" && cargo build --profile "$profile" -p writerlock-c)
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
libdir="$dest$prefix/lib"
incdir="$dest$prefix/include"
pcdir="$libdir/pkgconfig"
install -d "$libdir" "$incdir" "$pcdir"
install -m 0755 "$so" "$libdir/libwriterlock.so.$version"
ln -sfn "libwriterlock.so.$version" "$libdir/libwriterlock.so.$major"
ln -sfn "libwriterlock.so.$major" "$libdir/libwriterlock.so"
install -m 0644 "$archive" "$libdir/libwriterlock.a"
install -m 0644 "$header" "$incdir/writerlock.h"

# Libs.private: what a static link needs besides libwriterlock.a (rustc's
# native-static-libs for the library: the system SQLite and the C runtime).
cat >"$pcdir/writerlock.pc" <<PC
prefix=$prefix
exec_prefix=\${prefix}
libdir=\${exec_prefix}/lib
includedir=\${prefix}/include

Name: writerlock
Description: Writers that take turns: a cross-process SQLite write queue and a Postgres writer session
URL: https://example.invalid/writerlock
Version: $version
Libs: -L\${libdir} -lwriterlock
Libs.private: -lsqlite3 -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc
Cflags: -I\${includedir}
PC
chmod 0644 "$pcdir/writerlock.pc"

echo "install: installed writerlock $version under $dest$prefix:"
echo "  $libdir/libwriterlock.so.$version (soname libwriterlock.so.$major), libwriterlock.so.$major, libwriterlock.so"
echo "  $libdir/libwriterlock.a"
echo "  $incdir/writerlock.h"
echo "  $pcdir/writerlock.pc"
if [[ -z "$dest" && "$(id -u)" == 0 && ( "$prefix" == /usr || "$prefix" == /usr/local ) ]] \
    && command -v ldconfig >/dev/null 2>&1; then
    ldconfig
fi
case "$prefix" in
/usr | /usr/local) ;;
*) echo "install: build with: PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config --cflags --libs writerlock" ;;
esac
