#!/usr/bin/env bash
# Runs the compiled AVX-512 IFMA instantiation of the multi-buffer kernel (src/mb) under
# BochsCPU, an x86-64 emulator that implements AVX-512F and IFMA, and compares its results
# bit for bit with the portable instantiation. For machines without IFMA, where
# tests/mb_kernel.rs has to skip the IFMA engine.
# Builds examples/ifma_emulate.rs (release profile, like the provider), which writes the cases
# and the portable engine's results (each checked against num-bigint): eight lanes with
# different odd moduli, bases and full-size exponents for every size (512 to 2048 bits),
# e = 65537/3/17 at 512 and 2048, edge values at 512; and the single-number Montgomery product
# (src/mb/mont1.rs, the IFMA path of rsa/ct_limbs.rs) at 11 widths from 64 to 4096 bits, six
# products each, against t computed with num-bigint. scripts/ifma-emulate.py then loads the
# binary into the emulator, calls the IFMA entry on each case and prints PASS/FAIL per case,
# after two control runs that must go wrong (no AVX-512 state: #UD; every vpmadd52luq made a
# vpmadd52huq: a mismatch, in the kernel and in the single-number product). On a CPU with
# IFMA the cases also run natively. Installs bochscpu-python and pyelftools with pip when
# missing. About 15 s after the build. First, scripts/ifma-inlined.sh must find the binary's
# IFMA code in one piece (no out-of-line call: else it runs ~9x slower, results unchanged).
#
# usage: scripts/ifma-emulate.sh [--seed N] [--only CASE]... [--keep] [--count [--mix N]] [--bin PATH]
#                                [--peer-crypto-mb [DIR]]
#   --seed N      random inputs from seed N (default: a fixed seed)
#   --only CASE   run only CASE (repeatable): random-512 random-1024 random-1536
#                 random-2048 e65537-512 e65537-2048 edge-512, mont1-BITS (64 128 448 832
#                 1024 1536 1664 2048 3072 4032 4096)
#   --keep        keep the case files (directory printed)
#   --count       per case, also count the instructions executed in the kernel call: all of
#                 them, vpmadd52luq/huq, instructions per vpmadd52, vector ones, those with a
#                 memory operand (loads, stores), by function. 10-15x slower: random-512
#                 ~2 s, random-1024 ~11 s, random-2048 ~70 s. PASS/FAIL as without it.
#   --mix N       with --count: also the N most executed mnemonics (objdump -d; "mem": a
#                 memory operand, "{k}": masked), kae's and crypto_mb's
#   --bin PATH    run this ifma_emulate binary (another tree's build, say) instead of building
#                 this tree's; it also writes the cases
#   --peer-crypto-mb [DIR]
#                 a yardstick: also run Intel crypto_mb's 8-lane exponentiation
#                 (mbx_exp1024_mb8 / mbx_exp2048_mb8, by modulus size) on each case's inputs in
#                 the same emulator, and check its results equal the expected ones (else FAIL).
#                 DIR: a crypto_mb install (include/crypto_mb/exp.h, lib/libcrypto_mb.a; default
#                 ../shared/reference/crypto_mb from the repository root). scripts/crypto_mb_entry.c
#                 is compiled with $CC -O2 and linked statically against its libcrypto_mb.a (and
#                 -lcrypto, whose BN_* it references but never calls here) into an executable in
#                 the case directory; kae itself never links crypto_mb. With --count, crypto_mb's
#                 counts as kae's (only the mbx_exp call), a line per case
#                 "random-1024: kae N instructions, ... ; crypto_mb ...: kae/crypto_mb = r" and a
#                 final table. No 512- or 1536-bit function in crypto_mb: those cases say n/a.
#                 Its contract is one modulus size for all eight lanes: lanes with a narrower
#                 modulus (the random cases' lanes 6 and 7) are not compared (its results there
#                 are wrong); its count does not depend on the values. crypto_mb's CPU check
#                 also wants AVX512_VBMI2, which the emulated cpuid lacks and its code never
#                 executes: it is set through mbx_set_cpu_features (a note says so).
#                 Counting adds crypto_mb's time: random-1024 ~2 s, random-2048 ~15-20 s.
# example (the counting baseline of a kernel change, about 15 s after the build):
#   scripts/ifma-emulate.sh --count --only random-512 --only random-1024 --only e65537-512
# against crypto_mb:
#   scripts/ifma-emulate.sh --count --only random-1024 --only random-2048 --peer-crypto-mb
# Knobs: NO_BUILD=1, CARGO_TARGET_DIR (where the build goes, and the binary is taken from:
# $CARGO_TARGET_DIR/release/examples/ifma_emulate), PYTHON (default python3), BOCHSCPU_WHEEL
# (a local wheel file to install instead of PyPI's bochscpu-python), PIP_ARGS (more `pip
# install` arguments), CC (default cc: the --peer-crypto-mb build).
# Exit status: 0 every case PASS, 1 a FAIL or an emulation error, 2 usage.
set -euo pipefail

usage() { awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; }

SEED=
KEEP=0
ONLY=()
COUNT=()
MIX=()
BIN=
PEER=
PEER_DIR=
while (($#)); do
    case $1 in
        -h | --help) usage; exit 0 ;;
        --seed)
            [[ $# -ge 2 && $2 =~ ^[0-9]+$ ]] || { echo "ifma-emulate.sh: --seed needs a number" >&2; exit 2; }
            SEED=$2
            shift 2
            ;;
        --only)
            [[ $# -ge 2 ]] || { echo "ifma-emulate.sh: --only needs a case name" >&2; exit 2; }
            ONLY+=(--only "$2")
            shift 2
            ;;
        --keep) KEEP=1; shift ;;
        --count) COUNT=(--count); shift ;;
        --mix)
            [[ $# -ge 2 && $2 =~ ^[0-9]+$ ]] || { echo "ifma-emulate.sh: --mix needs a number" >&2; exit 2; }
            MIX=(--mix "$2")
            shift 2
            ;;
        --bin)
            [[ $# -ge 2 ]] || { echo "ifma-emulate.sh: --bin needs a path" >&2; exit 2; }
            BIN=$(realpath -- "$2") || exit 2
            shift 2
            ;;
        --peer-crypto-mb)
            PEER=1
            if [[ $# -ge 2 && $2 != -* ]]; then
                PEER_DIR=$(realpath -- "$2") || exit 2
                shift
            fi
            shift
            ;;
        *) echo "ifma-emulate.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done

cd "$(dirname "$0")/.."
ROOT=$PWD
PYTHON=${PYTHON:-python3}
[[ $(uname -m) == x86_64 ]] || { echo "ifma-emulate.sh: the IFMA kernel is x86_64 code" >&2; exit 1; }
command -v "$PYTHON" >/dev/null || { echo "ifma-emulate.sh: $PYTHON not installed" >&2; exit 1; }

# The emulator (tested with bochscpu-python 0.4.0) and the ELF reader.
read -r -a pip_args <<<"${PIP_ARGS:-}"
if ! "$PYTHON" -c 'import importlib.util as u, sys; sys.exit(u.find_spec("bochscpu") is None)'; then
    echo "ifma-emulate.sh: installing bochscpu-python" >&2
    "$PYTHON" -m pip install -q "${pip_args[@]}" "${BOCHSCPU_WHEEL:-bochscpu-python==0.4.0}" >&2
fi
if ! "$PYTHON" -c 'import elftools' 2>/dev/null; then
    echo "ifma-emulate.sh: installing pyelftools" >&2
    "$PYTHON" -m pip install -q "${pip_args[@]}" pyelftools >&2
fi

if [[ -z $BIN ]]; then
    if [[ "${NO_BUILD:-0}" != 1 ]]; then
        cargo build --release --example ifma_emulate >&2
    fi
    BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/examples/ifma_emulate"
fi
[[ -x $BIN ]] || { echo "ifma-emulate.sh: $BIN missing" >&2; exit 1; }
# The kernel must be compiled as one piece, or it runs ~9x slower with correct results.
scripts/ifma-inlined.sh "$BIN" || exit 1

WORK=$(mktemp -d "${TMPDIR:-/tmp}/kae-ifma-emulate.XXXXXX")
# shellcheck disable=SC2317  # called through the EXIT trap
cleanup() { if ((KEEP)); then echo "ifma-emulate.sh: cases kept in $WORK"; else rm -rf "$WORK"; fi; }
trap cleanup EXIT

"$BIN" --write "$WORK" ${SEED:+--seed "$SEED"}

PEER_ARGS=()
if [[ -n $PEER ]]; then
    PEER_DIR=${PEER_DIR:-$(realpath -m -- "$ROOT/../shared/reference/crypto_mb")}
    for f in include/crypto_mb/exp.h lib/libcrypto_mb.a; do
        [[ -f $PEER_DIR/$f ]] || { echo "ifma-emulate.sh: --peer-crypto-mb: $PEER_DIR/$f missing" >&2; exit 1; }
    done
    # A PIE, as the emulator loads it; libcrypto_mb.a statically, libc and libcrypto as imports.
    "${CC:-cc}" -O2 -fPIE -pie -I"$PEER_DIR/include" -o "$WORK/crypto_mb_emulate" \
        "$ROOT/scripts/crypto_mb_entry.c" "$PEER_DIR/lib/libcrypto_mb.a" -lcrypto ||
        { echo "ifma-emulate.sh: --peer-crypto-mb: building scripts/crypto_mb_entry.c failed" >&2; exit 1; }
    echo "ifma-emulate.sh: crypto_mb from $PEER_DIR"
    PEER_ARGS=(--peer "$WORK/crypto_mb_emulate")
fi

rc=0
if grep -qw avx512ifma /proc/cpuinfo 2>/dev/null && grep -qw avx512f /proc/cpuinfo; then
    echo "ifma-emulate.sh: this CPU has IFMA: the cases natively first"
    "$BIN" --native "$WORK" || rc=1
fi
start=$SECONDS
"$PYTHON" "$ROOT/scripts/ifma-emulate.py" --bin "$BIN" --cases "$WORK" "${ONLY[@]}" "${COUNT[@]}" \
    "${MIX[@]}" "${PEER_ARGS[@]}" || rc=1
echo "ifma-emulate.sh: emulation took $((SECONDS - start))s: $( ((rc == 0)) && echo PASS || echo FAIL)"
exit "$rc"
