#!/usr/bin/env bash
# Builds writerlock.so and installs it for the PHP that php-config names, the
# way `cargo php install` does: an optimised build, stripped of debug info,
# copied into PHP's extension directory as writerlock.so, and an ini file
# that loads it. Also removes it again (--remove), and shows what it would do
# without doing it (--dry-run).
#
#   php-ext/install.sh                    build, install, enable for every SAPI (Debian: phpenmod)
#   php-ext/install.sh --lib path/to/writerlock.so   install a prebuilt library (no cargo, no Rust)
#   php-ext/install.sh --sapi cli --sapi fpm   enable for these SAPIs only
#   php-ext/install.sh --no-enable        install and write the ini file, enable nothing
#   php-ext/install.sh --dry-run          print every step, change nothing
#   php-ext/install.sh --remove           disable, and delete the ini file and writerlock.so
#
# Environment:
#   PHP_CONFIG        the php-config of the PHP to install for (default: php-config)
#   EXT_DIR           where writerlock.so goes (default: php-config --extension-dir);
#                     any other directory gets the absolute path in the ini file
#   INI_DIR           where writerlock.ini goes (default: /etc/php/X.Y/mods-available on
#                     Debian, else PHP's scan directory); setting it enables nothing
#   CARGO_TARGET_DIR  honoured, as cargo honours it (the build's own target directory)
#   PROFILE           the cargo profile to build (default: release)
# Prerequisites: Rust (cargo), php8.2-dev (php-config, the headers), libclang-dev;
# with --lib only php-config (php8.2-dev) and strip (binutils).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
CARGO="${CARGO:-cargo}"
PHP_CONFIG="${PHP_CONFIG:-php-config}"
PROFILE="${PROFILE:-release}"

dry=0 remove=0 enable=1
lib=""
sapis=()
usage() { sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; }
while (($#)); do
    case "$1" in
        --dry-run) dry=1 ;;
        --remove | --uninstall) remove=1 ;;
        --no-enable) enable=0 ;;
        --lib) shift; [[ $# -gt 0 ]] || { echo "install.sh: --lib needs the path of a built writerlock.so" >&2; exit 2; }; lib="$1" ;;
        --lib=*) lib="${1#--lib=}" ;;
        --sapi) shift; [[ $# -gt 0 ]] || { echo "install.sh: --sapi needs a name (cli, fpm, apache2, ...)" >&2; exit 2; }; sapis+=("$1") ;;
        --sapi=*) sapis+=("${1#--sapi=}") ;;
        -h | --help) usage; exit 0 ;;
        *) echo "install.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done

die() { echo "install.sh: $*" >&2; exit 1; }
# run CMD...: runs it, or only prints it with --dry-run.
run() {
    if ((dry)); then printf '  would run:'; printf ' %q' "$@"; printf '\n'; else "$@"; fi
}

command -v "$PHP_CONFIG" >/dev/null 2>&1 || die "$PHP_CONFIG is missing: install php8.2-dev (apt-get install php8.2-dev), or set PHP_CONFIG"
php_bin="$("$PHP_CONFIG" --php-binary)"
default_ext_dir="$("$PHP_CONFIG" --extension-dir)"
version="$("$PHP_CONFIG" --version | cut -d. -f1,2)"
EXT_DIR="${EXT_DIR:-$default_ext_dir}"
EXT_DIR="$(realpath -m "$EXT_DIR")"
so="$EXT_DIR/writerlock.so"

use_phpenmod=0
if [[ -z "${INI_DIR:-}" ]]; then
    if command -v phpenmod >/dev/null 2>&1 && [[ -d "/etc/php/$version/mods-available" ]]; then
        INI_DIR="/etc/php/$version/mods-available"
        use_phpenmod=1
    else
        INI_DIR="$("$php_bin" --ini | sed -n 's/^Scan for additional .ini files in: *//p')"
        [[ -n "$INI_DIR" && "$INI_DIR" != "(none)" ]] || die "PHP scans no directory for ini files; set INI_DIR, or add extension=$so to php.ini yourself"
    fi
fi
INI_DIR="$(realpath -m "$INI_DIR")"
ini="$INI_DIR/writerlock.ini"
((dry)) && echo "dry run: nothing is built, written or removed"

if ((remove)); then
    echo "removing writerlock from PHP $version"
    if ((use_phpenmod)); then
        if ((${#sapis[@]})); then
            for s in "${sapis[@]}"; do run phpdismod -v "$version" -s "$s" writerlock; done
        else
            run phpdismod -v "$version" writerlock
        fi
    fi
    for f in "$ini" "$so"; do
        if [[ -e "$f" ]]; then run rm -f "$f"; else echo "  $f: not there"; fi
    done
    ((dry)) || echo "removed $so and $ini"
    exit 0
fi

if [[ -n "$lib" ]]; then
    # A library built elsewhere (another machine, a package): checked, not built.
    [[ -f "$lib" ]] || die "--lib $lib: no such file; give the path of a built writerlock.so (libwriterlock_php.so from cargo build -p writerlock-php)"
    built="$(realpath "$lib")"
    if command -v readelf >/dev/null 2>&1; then
        readelf -h "$built" 2>/dev/null | grep 'DYN (Shared object file)' >/dev/null ||
            die "--lib $lib is not a shared library; give the path of a built writerlock.so"
        readelf -Ws --dyn-syms "$built" 2>/dev/null | grep -w get_module >/dev/null ||
            die "--lib $lib is not a PHP extension (it exports no get_module); give the path of a built writerlock.so"
    fi
else
    command -v "$CARGO" >/dev/null 2>&1 || die "cargo is missing: install Rust (https://rustup.rs), or install a prebuilt library with --lib path/to/writerlock.so"
    if ! ldconfig -p 2>/dev/null | grep -q 'libclang[-.0-9]*\.so' && [[ -z "${LIBCLANG_PATH:-}" ]]; then
        die "libclang is missing (the build generates PHP's bindings with it): apt-get install libclang-dev, or set LIBCLANG_PATH"
    fi

    # Where cargo puts the build: its own answer, so CARGO_TARGET_DIR and
    # build.target-dir in .cargo/config.toml are honoured.
    target_dir="$(cd "$ROOT" && "$CARGO" metadata --format-version 1 --no-deps |
        "$php_bin" -r '$m = json_decode(stream_get_contents(STDIN)); echo $m->target_directory ?? "";')"
    [[ -n "$target_dir" ]] || die "cargo metadata named no target directory"
    case "$PROFILE" in dev | test) profile_dir=debug ;; release | bench) profile_dir=release ;; *) profile_dir="$PROFILE" ;; esac
    built="$target_dir/$profile_dir/libwriterlock_php.so"
fi

if [[ "$EXT_DIR" == "$(realpath -m "$default_ext_dir")" ]]; then
    line="extension=writerlock"
else
    # PHP looks for a bare name only in its extension_dir.
    line="extension=$so"
fi

echo "installing writerlock for PHP $version ($php_bin)"
if [[ -z "$lib" ]]; then
    run env -C "$ROOT" "$CARGO" build --profile "$PROFILE" -p writerlock-php
    ((dry)) || [[ -f "$built" ]] || die "the build left no $built"
fi
run install -d "$EXT_DIR" "$INI_DIR"
if [[ "$built" != "$(realpath -m "$so")" ]]; then
    run install -m 0644 "$built" "$so"
fi
# Debug info makes the library eight times larger and is of no use to PHP.
run strip --strip-debug --strip-unneeded "$so"
if [[ -n "$lib" ]] && ! ((dry)); then
    # Built elsewhere: this PHP must be able to load it (same PHP version, API and build).
    if ! loaded="$("$php_bin" -n -d "extension=$so" -r 'echo extension_loaded("writerlock") ? "yes" : "no";' 2>&1)" || [[ "$loaded" != yes ]]; then
        rm -f "$so"
        die "PHP $version ($php_bin) cannot load $lib: ${loaded:-no output}; build it for this PHP (php-ext/install.sh without --lib)"
    fi
fi
if ((dry)); then
    echo "  would write $ini: $line"
else
    printf '; the writerlock SQLite write queue (WriterLock\\Queue), installed by php-ext/install.sh\n; priority=30\n%s\n' "$line" >"$ini"
fi

if ((enable && use_phpenmod)); then
    if ((${#sapis[@]})); then
        for s in "${sapis[@]}"; do run phpenmod -v "$version" -s "$s" writerlock; done
        what="enabled for ${sapis[*]}"
    else
        run phpenmod -v "$version" writerlock
        what="enabled for every SAPI of PHP $version (restart php-fpm to load it there)"
    fi
elif ((use_phpenmod)); then
    what="not enabled; enable it with: phpenmod -v $version -s cli writerlock"
else
    what="loaded by every PHP that scans $INI_DIR"
fi
((dry)) && exit 0
echo "installed $so ($(du -k "$so" | cut -f1) KiB) and $ini ($line), $what"
scan_dir="$("$php_bin" --ini | sed -n 's/^Scan for additional .ini files in: *//p')"
if ((use_phpenmod && enable)) || [[ "$INI_DIR" == "$(realpath -m "${scan_dir:-/nonexistent}")" ]]; then
    echo "check it with: php --ri writerlock"
elif ! ((use_phpenmod)); then
    echo "PHP does not scan $INI_DIR by default; check it with: PHP_INI_SCAN_DIR=:$INI_DIR php --ri writerlock"
fi
