#!/usr/bin/env bash
# Build the release provider module and make sure target/release/kae.so exists
# (build.rs normally creates that symlink; it is made here if it did not), so
# that `openssl ... -provider-path target/release -provider kae` works.
# Prints the module path on stdout (last line).
set -euo pipefail

cd "$(dirname "$0")/.."
CARGO=${CARGO:-cargo}
OUT="${CARGO_TARGET_DIR:-$PWD/target}/release"

"$CARGO" build --release >&2

if [[ ! -f "$OUT/libkae.so" ]]; then
    echo "build.sh: $OUT/libkae.so missing after cargo build" >&2
    exit 1
fi
# Link (or re-link) kae.so unless it already resolves to libkae.so.
if [[ ! -e "$OUT/kae.so" ]] || ! [[ "$OUT/kae.so" -ef "$OUT/libkae.so" ]]; then
    ln -sfn libkae.so "$OUT/kae.so"
    echo "build.sh: linked $OUT/kae.so -> libkae.so" >&2
fi
echo "$OUT/kae.so"
