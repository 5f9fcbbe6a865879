#!/usr/bin/env bash
# Generates the C header from bindings/ with cbindgen, then makes it clean C89 as well:
# cbindgen ends every enumerator list with a comma and closes the extern "C" block with `//`
# comments, which `-std=gnu89 -pedantic` (and -std=c89) warn about.
#
# usage: bindings/header.sh OUTPUT        (`make header` writes include/writerlock.h)
set -euo pipefail
if [[ $# -ne 1 || -z "$1" ]]; then
    echo "usage: $0 OUTPUT" >&2
    exit 2
fi
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
export PATH="$root/.tools/bin:$PATH"
if ! command -v cbindgen >/dev/null 2>&1; then
    echo "header: cbindgen not found; install it with: make deps" >&2
    exit 2
fi
out="$1"
tmp="$(mktemp)"
trap 'rm -f "$tmp"' EXIT
cbindgen --quiet --config bindings/cbindgen.toml --crate writerlock-c --output "$tmp" bindings
# No comma after an enum's last enumerator; C comments only.
perl -0777 -pe '
    s/,\n(\}( \w+)?;)/\n$1/g;
    s{\}  // extern "C"}{\}  /* extern "C" */}g;
    s{#endif\s+// __cplusplus}{#endif  /* __cplusplus */}g;
' "$tmp" >"$out"
