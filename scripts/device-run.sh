#!/usr/bin/env bash
# The prepared timing run for a lent device machine: what its host CPU is, the kernel bench
# against crypto_mb, and scripts/mb-speed.sh's provider rows against the default provider
# (and the peer, if packed), all from a pack made by scripts/device-pack.sh and run through the
# pack's own loader and libraries. Results go to $OUT (the device tool's folder that comes
# back), else PACK/results.
#
# usage: scripts/device-run.sh [PACK]      (default target/device-pack)
# Steps (STEPS, default "facts kernel provider"):
#   facts     CPU model, family/model/stepping, AVX-512F and IFMA, CPUs, memory, kernel, the
#             tools this script uses: facts.txt. Without IFMA the kernel and the multi-buffer
#             backend cannot run there: the script says so loudly and times what it can.
#   kernel    KERNEL_ROUNDS rounds (default 5); in each, every packed bench once (the order
#             rotating round by round), pinned to CPU0, with MB_BENCH_ROUNDS=1 (OpenSSL, kae's
#             two batch shapes and crypto_mb in turn, same process), sizes KERNEL_SIZES
#             (default 2048,3072,4096): kernel-NAME-rR.txt, and kernel.txt: per bench and
#             size, the medians of kae's µs per request (its faster shape), crypto_mb's and the
#             per-round kae/crypto_mb (above 1: kae faster).
#   provider  scripts/mb-speed.sh --module PACK/bin/kae.so (--peer PACK/peer/*.so when packed)
#             with the packed openssl, pinned to CPUS (two CPUs by default, as on the 2-core
#             machines of the issue's figures), MULTI 2, ROWS (default "a c d"),
#             ALGS (every row's; default rsa2048), ROUNDS (default 3), SECONDS_PER_RUN
#             (default 2): provider.txt and mb-speed's TSV and chart.
# Knobs: STEPS, CPU0 (default: the third CPU this process may use, away from the first's
# interrupts; the first where it may use fewer than 4), CPUS (default: CPU0 and the next one it
# may use), KERNEL_ROUNDS, KERNEL_SIZES, ROWS, ALGS, ROUNDS, SECONDS_PER_RUN.
# About 4 minutes with the defaults and one bench (kernel ~30 s, provider ~3 min).
# Exit status: 0 every step ran, 1 a step failed, 2 usage.
set -euo pipefail

usage() { sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//'; }
bad() { echo "device-run.sh: $*" >&2; exit 2; }
case ${1:-} in -h | --help) usage; exit 0 ;; -*) bad "unknown option '$1' (see --help)" ;; esac
(($# <= 1)) || bad "one PACK directory at most (see --help)"
cd "$(dirname "$0")/.."
ROOT=$PWD
PACK=$(realpath -m "${1:-target/device-pack}")

STEPS=${STEPS:-facts kernel provider}
for s in $STEPS; do
    case $s in facts | kernel | provider) ;; *) bad "STEPS: '$s' is not facts, kernel or provider" ;; esac
done
# The CPUs this process may run on (a container's cpuset need not start at 0), in order.
ALLOWED=()
list=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status)
IFS=, read -r -a parts <<<"${list:-0}"
for part in "${parts[@]}"; do
    if [[ $part == *-* ]]; then
        for ((c = ${part%-*}; c <= ${part#*-}; c++)); do ALLOWED+=("$c"); done
    else
        ALLOWED+=("$part")
    fi
done
allowed() { [[ " ${ALLOWED[*]} " == *" $1 "* ]]; }
# Default: the third allowed CPU (away from the first's interrupts) and the one after it.
pick=$((${#ALLOWED[@]} >= 4 ? 2 : 0))
CPU0=${CPU0:-${ALLOWED[pick]}}
[[ $CPU0 =~ ^[0-9]+$ ]] || bad "CPU0 must be one CPU number, not '$CPU0'"
allowed "$CPU0" || bad "CPU0 $CPU0 is not one of the CPUs this process may use (${list:-?})"
if [[ -z ${CPUS:-} ]]; then
    CPUS=$CPU0
    for ((i = 0; i < ${#ALLOWED[@]} - 1; i++)); do
        [[ ${ALLOWED[i]} == "$CPU0" ]] && CPUS="$CPU0,${ALLOWED[i + 1]}"
    done
fi
[[ $CPUS =~ ^[0-9]+(,[0-9]+)*$ ]] || bad "CPUS must be a list of CPU numbers like 2,3, not '$CPUS'"
for c in ${CPUS//,/ }; do
    allowed "$c" || bad "CPUS: $c is not one of the CPUs this process may use (${list:-?})"
done
ncpu=$(nproc)
KERNEL_ROUNDS=${KERNEL_ROUNDS:-5}
[[ $KERNEL_ROUNDS =~ ^[1-9][0-9]*$ ]] || bad "KERNEL_ROUNDS must be a whole number (1 or more), not '$KERNEL_ROUNDS'"
KERNEL_SIZES=${KERNEL_SIZES:-2048,3072,4096}
[[ $KERNEL_SIZES =~ ^(1024|2048|3072|4096)(,(1024|2048|3072|4096))*$ ]] ||
    bad "KERNEL_SIZES must be a list from 1024,2048,3072,4096, not '$KERNEL_SIZES'"
# mb-speed.sh's knobs are checked here too: a mistake must not cost the device minutes of the
# steps before it.
ROWS=${ROWS:-a c d} ALGS=${ALGS:-rsa2048} ROUNDS=${ROUNDS:-3} SECONDS_PER_RUN=${SECONDS_PER_RUN:-2}
[[ ${ROWS//[ ,]/} =~ ^[a-f]+$ ]] || bad "ROWS must be letters from a b c d e f, not '$ROWS'"
[[ $ALGS =~ ^rsa[0-9]+( rsa[0-9]+)*$ ]] || bad "ALGS must be openssl speed RSA algorithms like 'rsa2048 rsa4096', not '$ALGS'"
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || bad "ROUNDS must be a whole number (1 or more), not '$ROUNDS'"
[[ $SECONDS_PER_RUN =~ ^[1-9][0-9]*$ ]] || bad "SECONDS_PER_RUN must be a whole number of seconds, not '$SECONDS_PER_RUN'"
[[ -x $PACK/lib/ld-linux-x86-64.so.2 && -f $PACK/bin/kae.so ]] ||
    bad "$PACK is not a pack from scripts/device-pack.sh"
RESULTS=${OUT:-$PACK/results}
mkdir -p "$RESULTS"

command -v taskset >/dev/null || { echo "device-run.sh: needs taskset (util-linux) to pin the runs" >&2; exit 1; }
if [[ " $STEPS " == *" provider "* ]] && ! command -v python3 >/dev/null; then
    echo "device-run.sh: the provider step (scripts/mb-speed.sh) needs python3; run STEPS=\"facts kernel\"" >&2
    exit 1
fi
LOADER=("$PACK/lib/ld-linux-x86-64.so.2" --library-path "$PACK/lib")
failed=0
say() { echo "$*" | tee -a "$RESULTS/summary.txt"; }
: >"$RESULTS/summary.txt"

has_flag() { grep -qw "$1" /proc/cpuinfo; }
IFMA=0
if has_flag avx512f && has_flag avx512ifma; then IFMA=1; fi
NO_IFMA_WARNING="WARNING: this CPU has no AVX-512 IFMA: the multi-buffer kernel and crypto_mb cannot run here; the kernel bench times the portable engine and kae's provider rows its CPU backend"

for step in $STEPS; do
    case $step in
    facts)
        {
            echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
            echo "host: $(uname -n), kernel $(uname -r)"
            grep -m1 '^model name' /proc/cpuinfo || true
            awk -F': ' '/^cpu family|^model\t|^stepping|^microcode/ { print } /^stepping/ { exit }' /proc/cpuinfo
            echo "AVX-512F: $(has_flag avx512f && echo yes || echo no), AVX-512 IFMA: $((IFMA)) (1 = yes)"
            echo "CPUs: $ncpu online; this run: CPU0 $CPU0, CPUS $CPUS"
            grep -m1 MemTotal /proc/meminfo || true
            for t in taskset python3 awk nproc; do
                printf '%s: %s\n' "$t" "$(command -v "$t" || echo MISSING)"
            done
            echo "pack:"
            sed -n '1,7p' "$PACK/MANIFEST" 2>/dev/null | sed 's/^/  /'
        } >"$RESULTS/facts.txt" 2>&1
        cat "$RESULTS/facts.txt"
        ((IFMA)) || say "$NO_IFMA_WARNING"
        ;;
    kernel)
        benches=("$PACK"/bench/*)
        [[ -e ${benches[0]} ]] || { say "kernel: no bench in $PACK/bench"; failed=1; continue; }
        cmb=$(find "$PACK/lib" -maxdepth 1 -name 'libcrypto_mb.so.*.*' | head -n1)
        say "kernel: ${#benches[@]} bench(es) x $KERNEL_ROUNDS rounds on CPU $CPU0, sizes $KERNEL_SIZES${cmb:+, crypto_mb $(basename "$cmb")}"
        for ((r = 1; r <= KERNEL_ROUNDS; r++)); do
            for ((i = 0; i < ${#benches[@]}; i++)); do
                b=${benches[(r - 1 + i) % ${#benches[@]}]}
                name=$(basename "$b")
                log="$RESULTS/kernel-$name-r$r.txt"
                echo "  round $r/$KERNEL_ROUNDS $name" >&2
                if ! MB_BENCH_ROUNDS=1 MB_BENCH_SIZES=$KERNEL_SIZES CRYPTO_MB_LIB=${cmb:-/nonexistent} \
                    taskset -c "$CPU0" "${LOADER[@]}" "$b" --bench >"$log" 2>&1; then
                    say "kernel: $name failed in round $r:"
                    tail -n 20 "$log" | tee -a "$RESULTS/summary.txt"
                    failed=1
                    continue 2
                fi
            done
        done
        # Rows "RSA-2048 ifma OpenSSL k2 k1 cmb OpenSSL/kae kae/cmb" of every round's output.
        order=$(sed 's/\([0-9]*\)/RSA-\1/g; s/,/ /g' <<<"$KERNEL_SIZES")
        {
            printf '%-10s %-9s %-9s %7s %12s %12s %14s %s\n' bench size engine rounds "OpenSSL µs" "kae µs" "crypto_mb µs" kae/crypto_mb
            for b in "${benches[@]}"; do
                name=$(basename "$b")
                cat "$RESULTS"/kernel-"$name"-r*.txt | awk -v name="$name" -v order="$order" '
                    function median(s,   n, a, i, j, t) {
                        n = split(s, a, " ")
                        if (n == 0) return "-"
                        for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
                        return n % 2 ? a[(n + 1) / 2] : sprintf("%.2f", (a[n / 2] + a[n / 2 + 1]) / 2)
                    }
                    $1 ~ /^RSA-[0-9]+$/ && NF == 8 {
                        engine[$1] = $2
                        kae[$1] = kae[$1] " " ($4 + 0 < $5 + 0 ? $4 : $5); ossl[$1] = ossl[$1] " " $3
                        if ($6 != "-") cmb[$1] = cmb[$1] " " $6
                        if ($8 != "-") ratio[$1] = ratio[$1] " " $8
                        n[$1]++
                    }
                    END {
                        k = split(order, sizes, " ")
                        for (i = 1; i <= k; i++) {
                            s = sizes[i]
                            if (!(s in n)) { printf "%-10s %-9s (no result)\n", name, s; continue }
                            printf "%-10s %-9s %-9s %7d %12s %12s %14s %s\n", name, s, engine[s], n[s], median(ossl[s]), median(kae[s]), median(cmb[s]), median(ratio[s])
                        }
                    }'
            done
        } | tee "$RESULTS/kernel.txt" | tee -a "$RESULTS/summary.txt"
        say "kernel: medians over the rounds; kae µs = its faster batch shape; kae/crypto_mb = the median of per-round ratios (above 1: kae faster)"
        ((IFMA)) || say "$NO_IFMA_WARNING"
        ;;
    provider)
        peer=()
        for p in "$PACK"/peer/*.so; do [[ -f $p ]] && peer=(--peer "$p"); done
        say "provider: scripts/mb-speed.sh ${peer[*]:+${peer[*]} }on CPUs $CPUS (rows $ROWS, $ALGS, $ROUNDS rounds)"
        if ! OPENSSL="$PACK/bin/openssl" NO_BUILD=1 OUT_DIR="$RESULTS" CPU0=$CPU0 MULTI=2 \
            ROWS=$ROWS ALGS=$ALGS ALGS_CDE=$ALGS ROUNDS=$ROUNDS SECONDS_PER_RUN=$SECONDS_PER_RUN \
            taskset -c "$CPUS" "$ROOT/scripts/mb-speed.sh" --module "$PACK/bin/kae.so" "${peer[@]}" \
            >"$RESULTS/provider.txt" 2>"$RESULTS/provider.err"; then
            say "provider: mb-speed.sh failed:"
            tail -n 20 "$RESULTS/provider.err" | tee -a "$RESULTS/summary.txt"
            failed=1
            continue
        fi
        tee -a "$RESULTS/summary.txt" <"$RESULTS/provider.txt"
        ;;
    esac
done
echo "results: $RESULTS"
exit $failed
