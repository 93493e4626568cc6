#!/usr/bin/env bash
# Builds the peer that multi-buffer kae is measured against: Intel's QAT_Engine as an OpenSSL 3
# provider in software-only `qat_sw` mode (RSA on Intel's crypto_mb), for
# `scripts/mb-speed.sh --peer`. A yardstick for benchmarks only: kae never links or loads it.
#
# usage: scripts/peer-qat-sw.sh QAT_ENGINE_SOURCE [OUT_DIR]
#   QAT_ENGINE_SOURCE  a checkout of github.com/intel/QAT_Engine (tested: v1.9.0, 910240d9)
#   OUT_DIR            where qatprovider.so goes (default target/peer)
# Knobs: CRYPTO_MB_DIR (crypto_mb's include/ and lib/; default ../shared/reference/crypto_mb,
# see its README), JOBS (make -j, default nproc).
#
# Needs autoconf, automake, libtool and Debian's libipsec-mb-dev (QAT_Engine's qat_sw build
# always links intel-ipsec-mb; its GCM and SHA2 paths are switched off here), installed with
# apt-get when run as root. Then:
#   scripts/mb-speed.sh --peer target/peer/qatprovider.so
# qat_sw computes RSA-2048/3072/4096 private operations in crypto_mb only inside ASYNC jobs
# (`-async_jobs N`); elsewhere it falls back to OpenSSL's code. On load it prints a few
# "QAT_SW ... Enabled" lines on stdout.
set -euo pipefail
usage() { sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; }
case ${1:-} in
    -h | --help) usage; exit 0 ;;
    "") usage >&2; exit 2 ;;
    -*) echo "peer-qat-sw.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
esac
cd "$(dirname "$0")/.."
SRC=$(realpath "$1")
OUT=$(realpath -m "${2:-target/peer}")
CMB=$(realpath -m "${CRYPTO_MB_DIR:-../shared/reference/crypto_mb}")
[[ -f $SRC/configure.ac && -f $SRC/qat_sw_rsa.c ]] || { echo "peer-qat-sw.sh: $SRC is not a QAT_Engine checkout" >&2; exit 2; }
[[ -f $CMB/include/crypto_mb/rsa.h ]] || { echo "peer-qat-sw.sh: no crypto_mb headers under $CMB/include" >&2; exit 2; }
lib=$(find "$CMB/lib" -maxdepth 1 -name 'libcrypto_mb.so.*.*' -type f | sort | tail -n1)
[[ -n $lib ]] || { echo "peer-qat-sw.sh: no libcrypto_mb.so.X.Y under $CMB/lib" >&2; exit 2; }

missing=()
for c in autoconf automake libtoolize; do command -v "$c" >/dev/null || missing+=("$c"); done
[[ -e /usr/include/intel-ipsec-mb.h ]] || missing+=(libipsec-mb-dev)
if ((${#missing[@]})); then
    [[ $(id -u) == 0 ]] || { echo "peer-qat-sw.sh: missing ${missing[*]}; install autoconf automake libtool libipsec-mb-dev" >&2; exit 1; }
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends autoconf automake libtool libipsec-mb-dev
fi

# crypto_mb laid out as configure wants it, with real symlinks for the linker.
mkdir -p "$OUT/crypto_mb/lib"
rm -rf "$OUT/crypto_mb/include"
cp -r "$CMB/include" "$OUT/crypto_mb/include"
base=$(basename "$lib")           # libcrypto_mb.so.12.1
cp "$lib" "$OUT/crypto_mb/lib/$base"
ln -sf "$base" "$OUT/crypto_mb/lib/${base%.*}"    # .so.12
ln -sf "${base%.*}" "$OUT/crypto_mb/lib/libcrypto_mb.so"

# Out of the source tree's way: a copy to build in.
BUILD=$OUT/qat_engine-build
rm -rf "$BUILD"
cp -r "$SRC" "$BUILD"
cd "$BUILD"
./autogen.sh >/dev/null
./configure --enable-qat_sw --disable-qat_hw --enable-qat_provider \
    --disable-qat_sw_gcm --disable-qat_sw_sha2 \
    --with-qat_sw_crypto_mb_install_dir="$OUT/crypto_mb" >configure.log 2>&1 ||
    { tail -n 30 configure.log >&2; exit 1; }
make -j"${JOBS:-$(nproc)}" >make.log 2>&1 || { tail -n 30 make.log >&2; exit 1; }
cp .libs/qatprovider.so "$OUT/qatprovider.so"
echo "peer: $OUT/qatprovider.so ($(git -C "$SRC" describe --tags --always 2>/dev/null || echo 'version unknown'))"
OPENSSL_CONF=/dev/null openssl list -providers -provider-path "$OUT" -provider qatprovider |
    grep -A3 -i qat | grep -iE 'name|version|status' || true
