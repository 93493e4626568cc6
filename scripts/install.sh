#!/usr/bin/env bash
# Install the kae provider module and its sample configurations.
#
#   scripts/install.sh                 build (if needed) and install
#   DESTDIR=/tmp/stage scripts/install.sh        stage into a root directory
#   MODULESDIR=/opt/ossl-modules scripts/install.sh   override the module dir
#   PREFIX=/opt/kae scripts/install.sh           configs into $PREFIX/share/kae
#
# The module goes to OpenSSL's MODULESDIR (`openssl version -m`) as kae.so, so
# that `-provider kae` and `module = kae.so` find it without -provider-path.
# Safe to run again: files are only replaced when their content changed.
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD

OPENSSL=${OPENSSL:-openssl}
PREFIX=${PREFIX:-/usr/local}
DESTDIR=${DESTDIR:-}
CARGO=${CARGO:-cargo}

if [[ -z "${MODULESDIR:-}" ]]; then
    # `openssl version -m` prints: MODULESDIR: "/usr/lib/x86_64-linux-gnu/ossl-modules"
    MODULESDIR=$("$OPENSSL" version -m | sed -n 's/^MODULESDIR: *"\(.*\)"$/\1/p')
    if [[ -z "$MODULESDIR" ]]; then
        echo "install.sh: cannot find MODULESDIR in '$("$OPENSSL" version -m)'; set MODULESDIR=" >&2
        exit 1
    fi
fi
SHAREDIR="$PREFIX/share/kae"

TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
LIB="$TARGET_DIR/release/libkae.so"

# cargo only rebuilds what changed, so running it is cheap when up to date.
# Without cargo (e.g. installing as another user), an existing build is used.
if command -v "$CARGO" >/dev/null 2>&1; then
    echo "install.sh: cargo build --release"
    "$CARGO" build --release
elif [[ -f "$LIB" ]]; then
    echo "install.sh: $CARGO not found, installing the existing $LIB"
fi
[[ -f "$LIB" ]] || { echo "install.sh: $LIB not built (cargo missing?)" >&2; exit 1; }

# install_file SRC DST MODE: copy when different, report what happened.
install_file() {
    local src=$1 dst=$2 mode=$3
    if [[ -f "$dst" ]] && cmp -s "$src" "$dst"; then
        echo "unchanged  $dst"
    else
        install -D -m "$mode" "$src" "$dst"
        echo "installed  $dst"
    fi
}

install_file "$LIB" "$DESTDIR$MODULESDIR/kae.so" 0755

shopt -s nullglob
confs=(provider-conf/*.cnf)   # the *.cnf.in test template is not installed
shopt -u nullglob
if (( ${#confs[@]} == 0 )); then
    echo "install.sh: no sample configs in provider-conf/" >&2
    exit 1
fi
for f in "${confs[@]}"; do
    install_file "$f" "$DESTDIR$SHAREDIR/$(basename "$f")" 0644
done

cat <<MSG

kae installed:
  module:  $DESTDIR$MODULESDIR/kae.so
  configs: $DESTDIR$SHAREDIR/
Try:
  openssl list -providers -provider kae
  OPENSSL_CONF=$SHAREDIR/openssl-prefer-kae.cnf openssl list -providers
MSG
