#!/usr/bin/env bash
# Build the release provider module and make sure kae.so exists next to libkae.so
# (build.rs normally creates that symlink; it is made here if it did not), so
# that `openssl ... -provider-path DIR -provider kae` works.
# Prints the module path on stdout (last line).
#
#   scripts/build.sh                 against the system OpenSSL (pkg-config / libssl-dev):
#                                    target/release/kae.so
#   scripts/build.sh --openssl DIR   against the OpenSSL installed under DIR (DIR/include,
#                                    DIR/lib: e.g. an OpenSSL 4.0 install), the provider
#                                    library only, in its own target dir:
#                                    target/openssl-<version>/release/kae.so
#                                    (the module then links to DIR's libcrypto soname).
#   scripts/build.sh --test-knobs    a TEST build of the module, which honours the test-only
#                                    settings KAE_MB_ENGINE and KAE_MB_FAULT_LANE (cargo
#                                    feature test-knobs), in its own target dir:
#                                    target/test-knobs/release/kae.so (its buildinfo says
#                                    "TEST BUILD"); never install it.
set -euo pipefail

cd "$(dirname "$0")/.."
CARGO=${CARGO:-cargo}
TARGET="${CARGO_TARGET_DIR:-$PWD/target}"
OSSL_DIR=
KNOBS=0

usage() { sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; }
while (($#)); do
    case $1 in
        --openssl)
            [[ $# -ge 2 ]] || { echo "build.sh: --openssl needs a directory" >&2; exit 2; }
            OSSL_DIR=$2
            shift 2
            ;;
        --openssl=*) OSSL_DIR=${1#*=}; shift ;;
        --test-knobs) KNOBS=1; shift ;;
        -h | --help) usage; exit 0 ;;
        *) echo "build.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done

if ((KNOBS)) && [[ -n $OSSL_DIR ]]; then
    echo "build.sh: --test-knobs and --openssl do not go together" >&2
    exit 2
fi

if ((KNOBS)); then
    OUT="$TARGET/test-knobs/release"
    "$CARGO" build --release -p kae --lib --features test-knobs --target-dir "$TARGET/test-knobs" >&2
elif [[ -z $OSSL_DIR ]]; then
    OUT="$TARGET/release"
    "$CARGO" build --release --workspace >&2
else
    OSSL_DIR=$(cd "$OSSL_DIR" && pwd) || { echo "build.sh: no directory $OSSL_DIR" >&2; exit 2; }
    hdr=$OSSL_DIR/include/openssl/opensslv.h
    [[ -f $hdr ]] || { echo "build.sh: $hdr missing (not an OpenSSL install?)" >&2; exit 2; }
    ver=$(sed -n 's/^# *define OPENSSL_VERSION_STR "\([^"]*\)".*/\1/p' "$hdr")
    [[ -n $ver ]] || { echo "build.sh: no OPENSSL_VERSION_STR in $hdr (OpenSSL 3.0 or later needed)" >&2; exit 2; }
    tdir="$TARGET/openssl-$ver"
    OUT="$tdir/release"
    echo "build.sh: building against OpenSSL $ver in $OSSL_DIR (target dir $tdir)" >&2
    # openssl-sys takes headers and libraries from OPENSSL_DIR (no pkg-config then).
    OPENSSL_DIR=$OSSL_DIR "$CARGO" build --release --lib --target-dir "$tdir" >&2
fi

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
