#!/usr/bin/env bash
# Times small instruction mixes on this CPU's AVX-512 IFMA unit: 16 independent 512-bit
# vpmadd52 per loop iteration, alone and with stores, loads, memory operands, masked blends,
# masked loads, masked stores or integer vector operations added, in cycles per iteration and
# per added instruction.
# It says what the kernel's code should spend instead of products on this core (on Zen 4 a
# store costs more than a product, a load into a register next to nothing: docs/MULTIBUFFER.md,
# 2026-12-05, fourth). A diagnostic for a new CPU, not part of kae or of test.sh.
#
# usage: scripts/ifma-mix.sh        (CPU=N pins to core N, default 0; ROUNDS=R, default 2)
#   Exit 2 on an argument, a CPU or ROUNDS it cannot use, no avx512ifma or no C compiler.
set -euo pipefail

if [[ ${1:-} == -h || ${1:-} == --help ]]; then
    sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
fi
(($# == 0)) || { echo "ifma-mix.sh: unknown option: $1 (see --help)" >&2; exit 2; }
cpu=${CPU:-0} rounds=${ROUNDS:-2}
[[ $cpu =~ ^[0-9]+$ ]] || { echo "ifma-mix.sh: CPU=$cpu is not one core's number" >&2; exit 2; }
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "ifma-mix.sh: ROUNDS=$rounds is not a positive count" >&2; exit 2; }
grep -qw avx512ifma /proc/cpuinfo || { echo "ifma-mix.sh: this CPU has no avx512ifma" >&2; exit 2; }
cc=${CC:-cc}
command -v "$cc" >/dev/null || { echo "ifma-mix.sh: no C compiler ($cc)" >&2; exit 2; }

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$cc" -O2 -mavx512f -mavx512ifma -o "$dir/ifma_mix" "$(dirname "$0")/ifma_mix.c"
pin=()
command -v taskset >/dev/null && pin=(taskset -c "$cpu")
grep -m1 'model name' /proc/cpuinfo
for ((r = 1; r <= rounds; r++)); do
    echo "round $r"
    "${pin[@]}" "$dir/ifma_mix"
done
