#!/usr/bin/env bash
# Install the kae provider module, its command-line tools and sample configurations,
# or remove exactly what an earlier install put in place.
#
# usage: scripts/install.sh [--no-build] [--uninstall] [--help]
#
#   (no option)    build (cargo build --release, cheap when up to date) and install:
#                    $MODULESDIR/kae.so                     the provider module
#                    $PREFIX/bin/kae-stat, kae-press        the tools
#                    $PREFIX/share/kae/*.cnf                sample OpenSSL configurations
#                    $PREFIX/share/kae/install-manifest     the list of all of the above
#                  then check that openssl loads the installed module (unless DESTDIR is
#                  set) and print command lines to try, ready to paste.
#   --no-build     install the existing build of target/release (also: NO_BUILD=1)
#   --uninstall    remove the files listed in $PREFIX/share/kae/install-manifest, then the
#                  directories the install created if they are empty; nothing else.
#                  Refuses when there is no manifest. Give the same PREFIX (and DESTDIR)
#                  as at install time.
#   -h, --help     this text
#
# Environment:
#   PREFIX       tools and configs go under it                 (default /usr/local)
#   MODULESDIR   directory of the module   (default: OpenSSL's, from `openssl version -m`;
#                `-provider kae` and `module = kae.so` then find it without a path)
#   DESTDIR      staging root prepended to every path (packaging); the manifest and the
#                printed lines name the final paths, without DESTDIR
#   OPENSSL      openssl binary (default openssl); CARGO, CARGO_TARGET_DIR as for cargo
#
# No root needed with a directory of your own, e.g. from the repository:
#   MODULESDIR=$PWD/local/lib PREFIX=$PWD/local scripts/install.sh
# Safe to run again: files are only replaced when their content changed.
set -euo pipefail

usage() { sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//'; }

ACTION=install
BUILD=1
[[ "${NO_BUILD:-0}" == 1 ]] && BUILD=0
while (($#)); do
    case $1 in
        -h | --help) usage; exit 0 ;;
        --uninstall) ACTION=uninstall ;;
        --no-build) BUILD=0 ;;
        *) echo "install.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done

# Relative PREFIX, MODULESDIR and DESTDIR are taken from where the script was started.
HERE=$PWD
abspath() { if [[ -z "$1" || "$1" == /* ]]; then printf '%s' "$1"; else printf '%s' "$HERE/$1"; fi; }
PREFIX=$(abspath "${PREFIX:-/usr/local}")
PREFIX=${PREFIX%/}
DESTDIR=$(abspath "${DESTDIR:-}")
DESTDIR=${DESTDIR%/}
[[ -n "${MODULESDIR:-}" ]] && MODULESDIR=$(abspath "$MODULESDIR")
cd "$(dirname "$0")/.."
ROOT=$PWD

OPENSSL=${OPENSSL:-openssl}
CARGO=${CARGO:-cargo}
SHAREDIR="$PREFIX/share/kae"
BINDIR="$PREFIX/bin"
MANIFEST="$SHAREDIR/install-manifest"

die() { echo "install.sh: $*" >&2; exit 1; }

# ---------------------------------------------------------------- uninstall
# The manifest holds one entry a line: "file PATH" or "dir PATH" (absolute paths, without
# DESTDIR). Files are removed in order (the manifest itself is the last one); directories
# (those the install created) afterwards, deepest first, and only when empty.
uninstall() {
    local m="$DESTDIR$MANIFEST"
    if [[ ! -f "$m" ]]; then
        die "no install manifest at $m: refusing to guess what to remove.
  Give the PREFIX (and DESTDIR) of the install, e.g. PREFIX=$PREFIX scripts/install.sh --uninstall"
    fi
    local -a files=() dirs=()
    local kind path n=0
    while read -r kind path; do
        n=$((n + 1))
        [[ -z "$kind" || "$kind" == \#* ]] && continue
        [[ "$path" == /* && "$path" != *"/../"* && "$path" != */.. ]] ||
            die "$m line $n: not an absolute path: '$path' (nothing removed)"
        case $kind in
            file) files+=("$path") ;;
            dir) dirs+=("$path") ;;
            *) die "$m line $n: unknown entry '$kind' (nothing removed)" ;;
        esac
    done <"$m"
    local f d i
    for f in "${files[@]}"; do
        if [[ -f "$DESTDIR$f" || -L "$DESTDIR$f" ]]; then
            rm -f -- "$DESTDIR$f"
            echo "removed    $DESTDIR$f"
        else
            echo "missing    $DESTDIR$f (already removed)"
        fi
    done
    [[ -e "$m" ]] && { rm -f -- "$m"; echo "removed    $m"; }
    for ((i = ${#dirs[@]} - 1; i >= 0; i--)); do
        d="$DESTDIR${dirs[i]}"
        [[ -d "$d" ]] || continue
        if rmdir -- "$d" 2>/dev/null; then
            echo "removed    $d/"
        else
            echo "kept       $d/ (not empty)"
        fi
    done
    echo "kae uninstalled (${#files[@]} files listed in the manifest)"
}

if [[ $ACTION == uninstall ]]; then
    uninstall
    exit 0
fi

# ---------------------------------------------------------------- install
DEFAULT_MODULESDIR=$("$OPENSSL" version -m | sed -n 's/^MODULESDIR: *"\(.*\)"$/\1/p')
if [[ -z "${MODULESDIR:-}" ]]; then
    # `openssl version -m` prints: MODULESDIR: "/usr/lib/x86_64-linux-gnu/ossl-modules"
    MODULESDIR=$DEFAULT_MODULESDIR
    [[ -n "$MODULESDIR" ]] || die "cannot find MODULESDIR in '$("$OPENSSL" version -m)'; set MODULESDIR="
fi
MODULESDIR=${MODULESDIR%/}

TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
LIB="$TARGET_DIR/release/libkae.so"
TOOLS=(kae-stat kae-press)

# cargo only rebuilds what changed, so running it is cheap when up to date.
# Without cargo (e.g. installing as another user), an existing build is used.
if ((BUILD)) && command -v "$CARGO" >/dev/null 2>&1; then
    echo "install.sh: cargo build --release"
    "$CARGO" build --release
elif ((BUILD)); then
    echo "install.sh: $CARGO not found, installing the existing build in $TARGET_DIR/release"
fi
[[ -f "$LIB" ]] || die "$LIB not built (run cargo build --release)"
for t in "${TOOLS[@]}"; do
    [[ -x "$TARGET_DIR/release/$t" ]] || die "$TARGET_DIR/release/$t not built (run cargo build --release)"
done

shopt -s nullglob
confs=(provider-conf/*.cnf) # the *.cnf.in test template is not installed
shopt -u nullglob
((${#confs[@]})) || die "no sample configs in provider-conf/"

# Entries of the manifest: those of an earlier install first (its directories existed
# before this run only because that install made them), then this run's.
declare -a ENTRIES=()
if [[ -f "$DESTDIR$MANIFEST" ]]; then
    while read -r kind path; do
        [[ "$kind" == file || "$kind" == dir ]] && [[ "$path" != "$MANIFEST" ]] && ENTRIES+=("$kind $path")
    done <"$DESTDIR$MANIFEST"
fi
note() { # note KIND PATH: add to the manifest once
    local e
    for e in "${ENTRIES[@]}"; do [[ "$e" == "$1 $2" ]] && return 0; done
    ENTRIES+=("$1 $2")
}
# note_dirs DIR: record DIR and its ancestors that do not exist yet (outermost first).
note_dirs() {
    local d=$1
    local -a missing=()
    while [[ "$d" != / && ! -d "$DESTDIR$d" ]]; do
        missing=("$d" "${missing[@]}")
        d=$(dirname "$d")
    done
    for d in "${missing[@]}"; do note dir "$d"; done
}

# install_file SRC DST MODE: copy when different, report what happened, record DST.
install_file() {
    local src=$1 dst=$2 mode=$3
    note_dirs "$(dirname "$dst")"
    if [[ -f "$DESTDIR$dst" ]] && cmp -s "$src" "$DESTDIR$dst"; then
        echo "unchanged  $DESTDIR$dst"
    else
        install -D -m "$mode" "$src" "$DESTDIR$dst"
        echo "installed  $DESTDIR$dst"
    fi
    note file "$dst"
}

install_file "$LIB" "$MODULESDIR/kae.so" 0755
for t in "${TOOLS[@]}"; do
    install_file "$TARGET_DIR/release/$t" "$BINDIR/$t" 0755
done
for f in "${confs[@]}"; do
    install_file "$f" "$SHAREDIR/$(basename "$f")" 0644
done

# The manifest lists itself last, so that --uninstall removes it after everything else.
note file "$MANIFEST"
tmp="$DESTDIR$MANIFEST.tmp.$$"
{
    echo "# Files and directories installed by kae's scripts/install.sh; removed by"
    echo "# 'scripts/install.sh --uninstall' (PREFIX=$PREFIX). Paths without DESTDIR."
    printf '%s\n' "${ENTRIES[@]}"
} >"$tmp"
mv -f "$tmp" "$DESTDIR$MANIFEST"
echo "manifest   $DESTDIR$MANIFEST"

# The lines to try, exactly as they will work: OpenSSL finds a bare module name only in its
# own MODULESDIR, so another directory is given with -provider-path (command line) or
# OPENSSL_MODULES (for configuration files, which name `module = kae.so`).
q() { printf '%q' "$1"; }
if [[ "$MODULESDIR" == "${DEFAULT_MODULESDIR%/}" ]]; then
    TRY_CLI="openssl list -providers -provider kae"
    TRY_CONF="OPENSSL_CONF=$(q "$SHAREDIR/openssl-prefer-kae.cnf") openssl list -providers"
else
    TRY_CLI="openssl list -providers -provider-path $(q "$MODULESDIR") -provider kae"
    TRY_CONF="OPENSSL_MODULES=$(q "$MODULESDIR") OPENSSL_CONF=$(q "$SHAREDIR/openssl-prefer-kae.cnf") openssl list -providers"
fi
if [[ ":$PATH:" == *":$BINDIR:"* ]]; then STAT=kae-stat; else STAT=$(q "$BINDIR/kae-stat"); fi

# Check the installed module loads (a wrong directory makes OpenSSL leave kae out silently).
if [[ -z "$DESTDIR" ]]; then
    if ! out=$(OPENSSL_CONF=/dev/null "$OPENSSL" list -providers -provider-path "$MODULESDIR" -provider kae 2>&1) ||
        ! grep -q '^ *kae$' <<<"$out"; then
        echo "$out" >&2
        die "openssl does not load the installed $MODULESDIR/kae.so (see above)"
    fi
fi

cat <<MSG

kae installed:
  module:   $DESTDIR$MODULESDIR/kae.so
  tools:    $DESTDIR$BINDIR/kae-stat  $DESTDIR$BINDIR/kae-press
  configs:  $DESTDIR$SHAREDIR/
  manifest: $DESTDIR$MANIFEST  (scripts/install.sh --uninstall removes what it lists)
MSG
if [[ -n "$DESTDIR" ]]; then
    echo "Staged under DESTDIR=$DESTDIR; once the tree is copied to /, try:"
else
    echo "Try (kae must be listed, status: active):"
fi
cat <<MSG
  $TRY_CLI
  $TRY_CONF
  $STAT --help
MSG
