#!/usr/bin/env bash
# Builds writerlock.so and installs it for the PHP that php-config names:
# copies it into PHP's extension directory as writerlock.so and writes
# writerlock.ini ("extension=writerlock.so"); on Debian it then enables it
# for every SAPI with phpenmod. Override the targets with EXT_DIR and
# INI_DIR (INI_DIR set: no phpenmod).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
command -v php-config >/dev/null || { echo "php-config is missing: apt-get install php8.2-dev" >&2; exit 1; }
(cd "$ROOT" && "${CARGO:-cargo}" build --release -p writerlock-php)
EXT_DIR="${EXT_DIR:-$(php-config --extension-dir)}"
version="$(php-config --version | cut -d. -f1,2)"
enable=0
if [ -z "${INI_DIR:-}" ]; then
    INI_DIR="/etc/php/$version/mods-available"
    command -v phpenmod >/dev/null && enable=1
fi
install -d "$EXT_DIR" "$INI_DIR"
install -m 0644 "$ROOT/target/release/libwriterlock_php.so" "$EXT_DIR/writerlock.so"
printf '; the writerlock SQLite write queue (WriterLock\\Queue)\n; priority=30\nextension=writerlock.so\n' > "$INI_DIR/writerlock.ini"
if [ "$enable" -eq 1 ]; then
    phpenmod -v "$version" writerlock
fi
echo "installed $EXT_DIR/writerlock.so and $INI_DIR/writerlock.ini"
