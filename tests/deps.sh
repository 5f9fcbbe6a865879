#!/usr/bin/env bash
# Installs what the build and the tests need: Debian packages (as root, with
# apt-get; otherwise it prints the command and stops), cbindgen for the
# header check, and the project virtualenv (.venv) with maturin, pytest and
# psycopg 3 (the bench's baseline).
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
    pkg-config gcc libsqlite3-dev sqlite3       # the core links the system libsqlite3
    libssl-dev openssl                          # the core's TLS: the system OpenSSL; the TLS tests make certificates
    postgresql                                  # throwaway test cluster
    libpq-dev                                   # the C example that runs the writer session on libpq
    php8.2-cli php8.2-dev php8.2-sqlite3 php8.2-fpm libclang-dev libfcgi-bin  # PHP extension
    valgrind                                    # the C ABI test runs under valgrind
    util-linux                                  # flock(1): the C ABI test probes lock files with it
    binutils                                    # strip: php-ext/install.sh installs a stripped build
    pgbouncer nftables                          # Postgres fault tests: a real pooler, a cut network
)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if (( ${#missing[@]} )); then
    if [[ "$(id -u)" == 0 ]]; then
        echo "deps: installing ${missing[*]}"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    else
        echo "deps: missing Debian packages: ${missing[*]}" >&2
        echo "deps: install them with: sudo apt-get install -y ${missing[*]}" >&2
        exit 1
    fi
fi

if ! command -v cbindgen >/dev/null 2>&1; then
    echo "deps: installing cbindgen into .tools"
    cargo install --quiet --locked --root .tools cbindgen --version 0.29.2
fi

venv=${VENV:-.venv}
if [[ ! -x "$venv/bin/python" ]]; then
    echo "deps: creating the virtualenv $venv"
    python3 -m venv "$venv"
fi
# mypy checks the Python stubs (mypy --strict, stubtest); SQLAlchemy runs the README's recipe.
if ! "$venv/bin/python" -c 'import maturin, pytest, mypy, sqlalchemy' 2>/dev/null; then
    "$venv/bin/pip" install --quiet 'maturin>=1.7,<2' 'pytest>=8' 'mypy>=1.10' 'SQLAlchemy>=2,<3'
fi
# The Python tests run the writer session on the users' own drivers too: psycopg 3 (with its
# binary libpq), psycopg_pool and psycopg2; psycopg 3 by hand is also make bench's Postgres
# baseline.
if ! "$venv/bin/python" -c 'import psycopg, psycopg_pool, psycopg2' 2>/dev/null; then
    "$venv/bin/pip" install --quiet 'psycopg[binary]>=3.1,<4' 'psycopg-pool>=3.2,<4' 'psycopg2-binary>=2.9,<3'
fi
