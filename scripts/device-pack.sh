#!/usr/bin/env bash
# Packs what a lent device machine needs to time kae on its host CPU (which may have AVX-512
# IFMA where this machine has none), so that one short prepared run there measures the kernel
# and the provider against crypto_mb and qat_sw. The device machine is bare and may run another
# distribution: the pack brings this machine's dynamic loader and every shared library its
# programs load, and scripts/device-run.sh starts each program through that loader, so nothing
# is taken from the device's own libraries.
#
# usage: scripts/device-pack.sh [--bench NAME=FILE]... [--peer FILE] [--out DIR]
#   --bench NAME=FILE  a kernel bench binary (benches/mb_kernel.rs built, e.g. from another
#                      tree or commit) to time under NAME; repeatable: device-run.sh times them
#                      in alternating rounds. Default: this tree's, built with
#                      `cargo build --release --bench mb_kernel`, as NAME "tree"
#   --peer FILE        the peer provider module (scripts/peer-qat-sw.sh's qatprovider.so), for
#                      mb-speed.sh's --peer column on the device
#   --out DIR          where the pack goes (default target/device-pack; emptied first when it
#                      is an earlier pack, refused when it is another non-empty directory)
# Packed: bin/openssl (a wrapper) and bin/openssl.elf (this machine's openssl), bin/kae.so
# (scripts/build.sh's module, unless NO_BUILD=1 or KAE_MODULE=FILE), bench/NAME, peer/NAME.so,
# lib/ (the loader, the libraries, crypto_mb's shared library as the bench's yardstick from
# CRYPTO_MB_DIR, default ../shared/reference/crypto_mb), MANIFEST (what went in, from which
# commit). Debug information is stripped. Every program and module is then listed through the
# packed loader: a library that would come from outside the pack, or a pack over the device
# tool's carry limit (64 MiB), stops the script (exit 1).
# Then, with the device tool: command "scripts/device-run.sh target/device-pack", carry
# ["target/device-pack"] (see docs/DEVELOPING.md, "Timing on a lent device machine").
# Knobs: NO_BUILD=1 (use target/release/kae.so as it is), KAE_MODULE, CRYPTO_MB_DIR, OPENSSL
# (the openssl binary to pack, default: the one on PATH), CARRY_LIMIT_MB (default 64).
# Exit status: 0 packed, 1 a failure, 2 usage.
set -euo pipefail

usage() { sed -n '2,29p' "$0" | sed 's/^# \{0,1\}//'; }
bad() { echo "device-pack.sh: $*" >&2; exit 2; }
die() { echo "device-pack.sh: $*" >&2; exit 1; }

BENCHES=()
PEER=
OUT=
while (($#)); do
    case $1 in
        -h | --help) usage; exit 0 ;;
        --bench)
            [[ $# -ge 2 ]] || bad "--bench needs NAME=FILE"
            BENCHES+=("$2")
            shift
            ;;
        --peer)
            [[ $# -ge 2 && -n $2 ]] || bad "--peer needs a provider module file"
            PEER=$2
            shift
            ;;
        --out)
            [[ $# -ge 2 && -n $2 ]] || bad "--out needs a directory"
            OUT=$2
            shift
            ;;
        *) bad "unknown argument '$1' (see --help)" ;;
    esac
    shift
done
CARRY_LIMIT_MB=${CARRY_LIMIT_MB:-64}
[[ $CARRY_LIMIT_MB =~ ^[1-9][0-9]*$ ]] || bad "CARRY_LIMIT_MB must be a whole number of MiB, not '$CARRY_LIMIT_MB'"
declare -A SEEN=()
for b in "${BENCHES[@]}"; do
    [[ $b =~ ^([A-Za-z0-9_.-]+)=(.+)$ ]] || bad "--bench '$b': not NAME=FILE (NAME: letters, digits, _ . -)"
    [[ -z ${SEEN[${BASH_REMATCH[1]}]:-} ]] || bad "--bench: the name '${BASH_REMATCH[1]}' is given twice"
    SEEN[${BASH_REMATCH[1]}]=1
    [[ -f ${BASH_REMATCH[2]} && -x ${BASH_REMATCH[2]} ]] || bad "--bench '$b': ${BASH_REMATCH[2]} is not an executable file"
done
if [[ -n $PEER ]]; then
    [[ -f $PEER ]] || bad "--peer $PEER: no such file"
    [[ $PEER == *.so ]] || bad "--peer $PEER: the file name must end in .so (openssl loads NAME.so)"
    [[ $(basename "$PEER" .so) != kae ]] || bad "--peer $PEER: the name kae is kae's"
fi
# Paths as given, from the caller's directory.
abs() { realpath -m "$1"; }
for i in "${!BENCHES[@]}"; do
    BENCHES[i]="${BENCHES[i]%%=*}=$(abs "${BENCHES[i]#*=}")"
done
[[ -z $PEER ]] || PEER=$(abs "$PEER")
[[ -z $OUT ]] || OUT=$(abs "$OUT")
[[ -z ${KAE_MODULE:-} ]] || KAE_MODULE=$(abs "$KAE_MODULE")

cd "$(dirname "$0")/.."
ROOT=$PWD
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
OUT=${OUT:-$TARGET/device-pack}
# Emptied before packing, but only if it is an earlier pack (or empty): --out must never wipe a
# directory of the user's by mistake.
if [[ -e $OUT ]]; then
    [[ -d $OUT ]] || bad "--out $OUT: exists and is not a directory"
    if [[ ! -f $OUT/MANIFEST ]] && [[ -n $(ls -A "$OUT") ]]; then
        bad "--out $OUT: not empty and not an earlier pack (no MANIFEST): choose another directory"
    fi
fi
CMB=$(realpath -m "${CRYPTO_MB_DIR:-../shared/reference/crypto_mb}")
OPENSSL_BIN=$(command -v "${OPENSSL:-openssl}") || die "no openssl binary to pack (OPENSSL=${OPENSSL:-openssl})"
OPENSSL_BIN=$(readlink -f "$OPENSSL_BIN")
command -v ldd >/dev/null && command -v strip >/dev/null || die "needs ldd (libc-bin) and strip (binutils)"

MODULE=${KAE_MODULE:-}
if [[ -z $MODULE ]]; then
    if [[ ${NO_BUILD:-0} != 1 ]]; then
        echo "building the module (scripts/build.sh)" >&2
        scripts/build.sh >/dev/null
    fi
    MODULE=$TARGET/release/kae.so
fi
[[ -f $MODULE ]] || die "module $MODULE missing (run scripts/build.sh)"

if ((${#BENCHES[@]} == 0)); then
    echo "building the kernel bench (cargo build --release --bench mb_kernel)" >&2
    exe=$(cargo build --release --bench mb_kernel --message-format=json-render-diagnostics |
        sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' | tail -n1)
    [[ -n $exe && -x $exe ]] || die "cargo built no mb_kernel bench executable"
    BENCHES=("tree=$exe")
fi

CMB_LIB=$(find "$CMB/lib" -maxdepth 1 -name 'libcrypto_mb.so.*.*' -type f 2>/dev/null | sort | tail -n1 || true)
[[ -n $CMB_LIB ]] || echo "device-pack.sh: no libcrypto_mb.so.X.Y under $CMB/lib: the kernel bench will have no crypto_mb column" >&2

rm -rf "$OUT"
mkdir -p "$OUT/bin" "$OUT/lib" "$OUT/bench"
cp -L "$OPENSSL_BIN" "$OUT/bin/openssl.elf"
cp -L "$MODULE" "$OUT/bin/kae.so"
for b in "${BENCHES[@]}"; do cp -L "${b#*=}" "$OUT/bench/${b%%=*}"; done
if [[ -n $PEER ]]; then
    mkdir -p "$OUT/peer"
    cp -L "$PEER" "$OUT/peer/"
fi
if [[ -n $CMB_LIB ]]; then
    # Under its file name (the bench's CRYPTO_MB_LIB) and its soname (what qat_sw links).
    cp -L "$CMB_LIB" "$OUT/lib/"
    cp -L "$CMB_LIB" "$OUT/lib/$(basename "${CMB_LIB%.*}")"
fi
cat >"$OUT/bin/openssl" <<'SH'
#!/usr/bin/env bash
# The packed openssl, through the packed loader and libraries only.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
exec "$here/lib/ld-linux-x86-64.so.2" --library-path "$here/lib" "$here/bin/openssl.elf" "$@"
SH
chmod +x "$OUT/bin/openssl"

# The ELF files of the pack, then every library they load (ldd, here), under the name they ask
# for. dlopen'd files (kae.so, the peer, crypto_mb) are listed themselves, so theirs come too.
elves=("$OUT/bin/openssl.elf" "$OUT/bin/kae.so" "$OUT"/bench/*)
[[ -z $PEER ]] || elves+=("$OUT/peer/$(basename "$PEER")")
[[ -z $CMB_LIB ]] || elves+=("$OUT/lib/$(basename "$CMB_LIB")")
for f in "${elves[@]}"; do
    ldd "$f" >"$OUT/ldd.txt" 2>&1 || { cat "$OUT/ldd.txt" >&2; die "ldd $f failed"; }
    grep -q 'not found' "$OUT/ldd.txt" && { cat "$OUT/ldd.txt" >&2; die "$f needs a library this machine lacks"; }
    while read -r name arrow path _; do
        if [[ $arrow == "=>" && $path == /* ]]; then
            [[ -e $OUT/lib/$name ]] || cp -L "$path" "$OUT/lib/$name"
        elif [[ $name == /*/ld-linux-x86-64.so.2 ]]; then
            [[ -e $OUT/lib/ld-linux-x86-64.so.2 ]] || cp -L "$name" "$OUT/lib/ld-linux-x86-64.so.2"
        fi
    done <"$OUT/ldd.txt"
done
rm -f "$OUT/ldd.txt"
[[ -x $OUT/lib/ld-linux-x86-64.so.2 ]] || die "no dynamic loader found (ld-linux-x86-64.so.2)"
for f in "$OUT/bin/openssl.elf" "$OUT/bin/kae.so" "$OUT"/bench/* "$OUT"/peer/*.so "$OUT"/lib/*; do
    [[ -f $f && $(basename "$f") != ld-linux-x86-64.so.2 ]] || continue
    strip --strip-debug "$f" 2>/dev/null || true
done

# Each ELF listed through the packed loader: everything must resolve inside the pack.
for f in "${elves[@]}"; do
    list=$("$OUT/lib/ld-linux-x86-64.so.2" --library-path "$OUT/lib" --list "$f" 2>&1) ||
        { echo "$list" >&2; die "the packed loader cannot list $f"; }
    outside=$(awk -v lib="$OUT/lib/" '$2 == "=>" && index($3, lib) != 1 { print }' <<<"$list")
    [[ -z $outside ]] || { echo "$outside" >&2; die "$(basename "$f") would load these from outside the pack"; }
done

size=$(du -sb "$OUT" | cut -f1)
((size <= CARRY_LIMIT_MB * 1024 * 1024)) ||
    die "the pack is $((size / 1024 / 1024)) MiB, over the carry limit of $CARRY_LIMIT_MB MiB"
{
    echo "kae device pack, made $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -n)"
    echo "tree: $(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown)"
    echo "openssl: $OPENSSL_BIN ($("$OUT/bin/openssl" version))"
    echo "module: $MODULE"
    for b in "${BENCHES[@]}"; do echo "bench ${b%%=*}: ${b#*=}"; done
    [[ -z $PEER ]] || echo "peer: $PEER"
    [[ -z $CMB_LIB ]] || echo "crypto_mb: $CMB_LIB"
    echo "size: $((size / 1024)) KiB"
    echo "files:"
    (cd "$OUT" && find . -type f ! -name MANIFEST -printf '%P\n' | sort | xargs sha256sum)
} >"$OUT/MANIFEST"
names=$(for b in "${BENCHES[@]}"; do echo "${b%%=*}"; done | paste -sd, -)
echo "device pack: $OUT ($((size / 1024 / 1024)) MiB; benches: $names${PEER:+; peer $(basename "$PEER")})"
if [[ $OUT == "$ROOT"/* ]]; then
    echo "run it: device tool command \"scripts/device-run.sh ${OUT#"$ROOT"/}\", carry [\"${OUT#"$ROOT"/}\"]"
else
    echo "note: the device tool carries paths inside the repository only; pack under target/ to run it there"
fi
