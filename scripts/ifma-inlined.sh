#!/usr/bin/env bash
# Checks that the AVX-512 IFMA code of a built binary is one piece: the functions compiled
# with the IFMA target features (kae::mb::kernel::exp_ifma_n, r_squared_ifma_n and
# kae::mb::mont1::product_on) make no direct call but to libc and unwinding stubs and the
# standard library's allocation and panic paths: no kae helper, closure, generic std function
# or core::arch intrinsic. Such a callee is compiled without those features: its vector code
# runs as calls and copies through memory, with correct results (no test sees it) and an
# exponentiation about 9x slower. It happens when the inliner leaves a helper or a closure
# out of line (src/mb/kernel.rs, `Modulus::sqr_then`).
#
# usage: scripts/ifma-inlined.sh [BINARY...]
#   default: $CARGO_TARGET_DIR/release/libkae.so (target/ of the repository when unset).
#   Exit 0: every binary checked is clean; 1: a call found (listed); 2: a binary missing, or
#   none of the IFMA functions in its symbols.
set -euo pipefail

if [[ ${1:-} == -h || ${1:-} == --help ]]; then
    sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
fi
(($#)) || set -- "${CARGO_TARGET_DIR:-$(dirname "$0")/../target}/release/libkae.so"
command -v objdump >/dev/null || { echo "ifma-inlined.sh: objdump not found (binutils)" >&2; exit 2; }

status=0
for bin in "$@"; do
    if [[ ! -f $bin ]]; then
        echo "ifma-inlined.sh: $bin: no such file" >&2
        status=2
        continue
    fi
    # Direct calls made from inside the IFMA functions: "function<TAB>target" (calls through
    # the GOT reach libc and the allocator).
    report=$(objdump -d --no-show-raw-insn -C "$bin" | awk '
        /^[0-9a-f]+ <.*>:$/ {
            name = $0; sub(/^[0-9a-f]+ </, "", name); sub(/>:$/, "", name)
            inside = (name ~ /^kae::mb::kernel::(exp_ifma_n|r_squared_ifma_n)/ ||
                      name ~ /^kae::mb::mont1::product_on/)
            if (inside) found++
            next
        }
        inside && /\tcall +[0-9a-f]+ </ {
            target = $0; sub(/^[^<]*</, "", target); sub(/>[^>]*$/, "", target)
            sub(/\+0x[0-9a-f]+$/, "", target)
            print name "\t" target
        }
        END { print "#found\t" found + 0 }')
    found=$(awk -F'\t' '$1 == "#found" { print $2 }' <<<"$report")
    if ((found == 0)); then
        echo "ifma-inlined.sh: $bin: no IFMA function in its symbols (stripped, or renamed?)" >&2
        status=2
        continue
    fi
    # Allowed: the dynamic linker's stubs (unwinding, libc) and the cold paths of the
    # standard library (allocation, panics); any other callee is code left out of line.
    bad=$(awk -F'\t' '$1 != "#found" && $2 !~ /@plt$|^__rust_|^alloc::alloc::|^alloc::raw_vec::|^core::panicking::|^core::slice::index::|^core::option::|^core::result::/' <<<"$report" |
        sort | uniq -c)
    if [[ -n $bad ]]; then
        echo "ifma-inlined.sh: $bin: IFMA code calls functions compiled without IFMA (count, caller, callee):" >&2
        echo "$bad" >&2
        ((status == 2)) || status=1
    else
        echo "ifma-inlined.sh: $bin: $found IFMA functions, no out-of-line kernel code"
    fi
done
exit "$status"
