#!/usr/bin/env bash
# Fails when include/writerlock.h is not what cbindgen generates from bindings/ now.
# Regenerates into a temporary file (bindings/header.sh, as `make header` does) and diffs it against the committed header.
# Fix a drift with: make header
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
export PATH="$root/.tools/bin:$PATH"

want_version="0.29.2"
if ! command -v cbindgen >/dev/null 2>&1; then
    echo "check-header: cbindgen not found; install it with: make deps" >&2
    echo "check-header:   (or: cargo install --locked --root .tools cbindgen --version $want_version)" >&2
    exit 2
fi
have_version="$(cbindgen --version | awk '{print $2}')"
if [[ "$have_version" != "$want_version" ]]; then
    echo "check-header: cbindgen $have_version found, but the header is generated with $want_version;" >&2
    echo "check-header:   install it with: cargo install --locked --root .tools cbindgen --version $want_version" >&2
    exit 2
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
if ! bindings/header.sh "$tmp/writerlock.h" 2>"$tmp/cbindgen.log"; then
    cat "$tmp/cbindgen.log" >&2
    echo "check-header: FAILED: cbindgen could not generate the header (see above)" >&2
    exit 1
fi

if [[ ! -f include/writerlock.h ]]; then
    echo "check-header: FAILED: include/writerlock.h is missing; generate it with: make header" >&2
    exit 1
fi
if ! diff -u --label "include/writerlock.h (committed)" --label "include/writerlock.h (generated)" \
    include/writerlock.h "$tmp/writerlock.h" >"$tmp/diff"; then
    cat "$tmp/diff"
    echo "check-header: FAILED: include/writerlock.h drifted from the code in bindings/ (diff above)." >&2
    echo "check-header: regenerate it with: make header" >&2
    exit 1
fi
echo "check-header: include/writerlock.h matches bindings/ (cbindgen $have_version)"
