#!/usr/bin/env bash
# Performance matrix of the multi-buffer backend (backend = mb, the 8-lane AVX-512 IFMA RSA
# kernel) against OpenSSL's default provider measured in the same run.
#
# usage: scripts/mb-speed.sh [--module FILE] [--peer FILE] [--help]
#
# First line of the output: the backend kae runs on, from its start-up line (one
# `KAE_LOG=info openssl speed -seconds 1` with kae). `backend = auto` takes mb only on a CPU
# with AVX-512 IFMA; anywhere else kae runs on its CPU backend and the script says loudly that
# the rows do not measure the multi-buffer kernel (it still measures them).
# Then, per row, `openssl speed -elapsed -mr` (CLOCK) with the default provider and with kae
# alternately for $ROUNDS rounds (default first in odd rounds, kae first in even ones), and a
# table of the medians of sign/s and verify/s with the ratio kae/default (of the medians, and
# "paired": the median of the per-round ratios). Rows (ROWS):
#   a  one core: taskset -c $CPU0 openssl speed -multi 1 -async_jobs 8, both providers  (ALGS)
#   b  the same with -async_jobs 4, pinned with numactl -C $CPU0 as in the seeds' figure
#      (taskset -c $CPU0 when numactl is missing)                                     (ALGS)
#   c  the whole machine: kae -multi $MULTI -async_jobs 16, default -multi $MULTI      (ALGS_CDE)
#   d  one process on every CPU: kae -async_jobs 16, default sync                     (ALGS_CDE)
#   e  no regression, the same flags for both: -async_jobs 1, -async_jobs 2, sync      (ALGS_CDE)
#   f  a busy host: one CPU-bound loop per CPU beside both providers' runs, kae
#      -multi $MULTI -async_jobs 8, default -multi $MULTI; only when named (ROWS=f)   (ALGS_CDE)
# ASYNC jobs gain the default provider nothing; in a, b and e it runs with kae's flags anyway,
# so the two runs differ only in the provider. After the table: what kae's exit summaries
# counted per row (private operations, offloaded, MB batches and lanes, MB scalar).
#   --module FILE    measure this module file, e.g. an installed one (also KAE_MODULE=FILE;
#                    nothing is built then)
#   (no --module)    the build tree's module: scripts/build.sh (unless NO_BUILD=1),
#                    then target/release/kae.so
#   --peer FILE      a third column: another provider module (e.g. an installed qat_sw
#                    provider, qatprovider.so) run with kae's options in every row, preferred
#                    over the default provider (loaded beside it), in the same alternating
#                    rounds; the table then adds its medians and kae / peer
#   -h, --help       this text
#
# Knobs (environment):
#   SECONDS_PER_RUN  seconds per algorithm and operation          (default 3)
#   ROUNDS           alternating rounds                           (default 3)
#   ALGS             algorithms of rows a and b                   (default "rsa2048 rsa3072 rsa4096")
#   ALGS_CDE         algorithms of rows c, d and e                (default rsa2048)
#   ROWS             rows to run, a subset of "a b c d e f"       (default a b c d e)
#   CPU0             the CPU of the one-core rows a and b         (default 0)
#   MULTI            -multi of row c: processes filling the machine  (default: nproc)
#   CLOCK            wall: -elapsed, operations per second of wall time (what offload
#                    changes); cpu: without -elapsed, per second of the openssl process's
#                    user CPU time (all its threads): steadier on a host that steals time,
#                    blind to system time (wake-ups) and to idle CPUs put to work  (default wall)
#   KAE_PREFER       1: default_properties=?provider=kae for the kae runs, as in
#                    scripts/speed.sh                             (default 1)
#   KEEP_LOGS        1: keep the raw speed output directory
#   NO_BUILD         1: skip scripts/build.sh
#   OPENSSL          openssl binary                               (default openssl)
#   OUT_DIR          where the results TSV and the chart go       (default target/bench)
# kae's own settings come from the environment as usual: KAE_BACKEND=mb KAE_STRICT=yes makes
# kae refuse to load where the kernel cannot run (the script then stops at the first step).
set -euo pipefail

usage() { sed -n '2,53p' "$0" | sed 's/^# \{0,1\}//'; }
MODULE=${KAE_MODULE:-}
PEER=
while (($#)); do
    case $1 in
        -h | --help) usage; exit 0 ;;
        --module)
            [[ $# -ge 2 && -n $2 ]] || { echo "mb-speed.sh: --module needs a file" >&2; exit 2; }
            MODULE=$2
            shift
            ;;
        --module=*) MODULE=${1#*=} ;;
        --peer)
            [[ $# -ge 2 && -n $2 ]] || { echo "mb-speed.sh: --peer needs a provider module file" >&2; exit 2; }
            PEER=$2
            shift
            ;;
        --peer=*) PEER=${1#*=} ;;
        *) echo "mb-speed.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done
[[ -z $MODULE || $MODULE == /* ]] || MODULE="$PWD/$MODULE"
[[ -z $PEER || $PEER == /* ]] || PEER="$PWD/$PEER"

die() { echo "mb-speed.sh: $*" >&2; exit 1; }
bad() { echo "mb-speed.sh: $*" >&2; exit 2; }

cd "$(dirname "$0")/.."
ROOT=$PWD
SECONDS_PER_RUN=${SECONDS_PER_RUN:-3}
ROUNDS=${ROUNDS:-3}
ALGS=${ALGS:-rsa2048 rsa3072 rsa4096}
ALGS_CDE=${ALGS_CDE:-rsa2048}
ROWS=${ROWS:-a b c d e}
CPU0=${CPU0:-0}
MULTI=${MULTI:-$(nproc)}
KAE_PREFER=${KAE_PREFER:-1}
OPENSSL=${OPENSSL:-openssl}
CLOCK=${CLOCK:-wall}

[[ $SECONDS_PER_RUN =~ ^[1-9][0-9]*$ ]] || bad "SECONDS_PER_RUN must be a whole number of seconds (1 or more), not '$SECONDS_PER_RUN'"
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || bad "ROUNDS must be a whole number (1 or more), not '$ROUNDS'"
[[ $CPU0 =~ ^[0-9]+$ ]] || bad "CPU0 must be one CPU number, not '$CPU0'"
case $CLOCK in
wall) TIMING=(-elapsed) CLOCK_WORDS="-elapsed -mr" ;;
cpu) TIMING=() CLOCK_WORDS="-mr (per user CPU-second, CLOCK=cpu)" ;;
*) bad "CLOCK must be wall or cpu, not '$CLOCK'" ;;
esac
[[ $MULTI =~ ^[1-9][0-9]*$ ]] || bad "MULTI must be a whole number (1 or more), not '$MULTI'"
read -r -a ALG_AB <<<"$ALGS"
read -r -a ALG_CDE <<<"$ALGS_CDE"
for a in "${ALG_AB[@]}" "${ALG_CDE[@]}"; do
    [[ $a =~ ^rsa[0-9]+$ ]] || bad "ALGS/ALGS_CDE: '$a' is not an openssl speed RSA algorithm (rsa2048, rsa3072, rsa4096, ...)"
done
# ROWS: letters a-f, with or without spaces or commas between them ("a b", "a,b", "ab").
ROW_SET=${ROWS//[ ,]/}
[[ -n $ROW_SET && $ROW_SET =~ ^[a-f]+$ ]] || bad "ROWS must be letters from a b c d e f, not '$ROWS'"
want() { [[ $ROW_SET == *"$1"* ]]; }
if want a || want b; then
    ((${#ALG_AB[@]})) || bad "ALGS is empty (rows a and b)"
    command -v taskset >/dev/null 2>&1 || die "rows a and b need taskset (util-linux) to pin to CPU $CPU0"
fi
if want c || want d || want e || want f; then ((${#ALG_CDE[@]})) || bad "ALGS_CDE is empty (rows c, d, e and f)"; fi

if [[ -z $MODULE ]]; then
    if [[ "${NO_BUILD:-0}" != 1 ]]; then
        "$ROOT/scripts/build.sh" >/dev/null
    fi
    MODULE="${CARGO_TARGET_DIR:-$ROOT/target}/release/kae.so"
    [[ -e "$MODULE" ]] || die "$MODULE missing (run scripts/build.sh)"
fi
[[ -f "$MODULE" ]] || die "module $MODULE: no such file"
[[ $MODULE == *.so ]] || die "module $MODULE: the file name must end in .so (openssl loads NAME.so)"
# -provider-path DIR -provider NAME loads DIR/NAME.so; kae is then known as NAME.
MODDIR=$(dirname "$MODULE")
KAE_NAME=$(basename "$MODULE" .so)
PROVIDERS=(default kae)
if [[ -n $PEER ]]; then
    [[ -f "$PEER" ]] || die "--peer $PEER: no such file"
    [[ $PEER == *.so ]] || die "--peer $PEER: the file name must end in .so (openssl loads NAME.so)"
    PEER_NAME=$(basename "$PEER" .so)
    [[ $PEER_NAME != "$KAE_NAME" && $PEER_NAME != default ]] ||
        die "--peer $PEER: its provider name '$PEER_NAME' is kae's or the default provider's; copy or link it under another name"
    PROVIDERS+=(peer)
    echo "peer:   $PEER$( [[ -L $PEER ]] && echo " -> $(readlink -f "$PEER")"), provider name $PEER_NAME" >&2
fi
echo "module: $MODULE$( [[ -L $MODULE ]] && echo " -> $(readlink -f "$MODULE")"), $(stat -c '%s bytes, modified %y' "$(readlink -f "$MODULE")" | cut -d. -f1)" >&2

WORK=$(mktemp -d "${TMPDIR:-/tmp}/kae-mb-speed.XXXXXX")
cleanup() {
    if declare -F busy_stop >/dev/null; then busy_stop; fi
    if [[ "${KEEP_LOGS:-0}" == 1 ]]; then echo "logs kept in $WORK" >&2; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
RESULTS="$WORK/results.tsv"
KSTATS="$WORK/kae-stats.tsv"
: >"$KSTATS"

# The default runs read an empty configuration (not the caller's OPENSSL_CONF); the kae runs
# one that only prefers kae (kae itself is loaded with -provider-path/-provider).
printf '# empty: default provider only\n' >"$WORK/default.cnf"
cat >"$WORK/prefer-kae.cnf" <<CNF
# Prefer kae's implementations for fetches that give no property query.
openssl_conf = openssl_init
[openssl_init]
alg_section = algorithm_sect
[algorithm_sect]
default_properties = ?provider=$KAE_NAME
CNF
KAE_CONF="$WORK/default.cnf"
if [[ "$KAE_PREFER" == 1 ]]; then KAE_CONF="$WORK/prefer-kae.cnf"; fi
PROV_default=(-provider default)
PROV_kae=(-provider-path "$MODDIR" -provider "$KAE_NAME")
if [[ -n $PEER ]]; then
    # The peer may implement RSA only: the default provider beside it serves the rest, and the
    # configuration prefers the peer (openssl speed ignores -propquery for RSA).
    sed "s/?provider=$KAE_NAME/?provider=$PEER_NAME/; s/kae's/the peer's/" "$WORK/prefer-kae.cnf" >"$WORK/prefer-peer.cnf"
    PROV_peer=(-provider-path "$(dirname "$PEER")" -provider "$PEER_NAME" -provider default)
fi

# --- 1. Which backend kae runs on: its start-up line at KAE_LOG=info.
echo "asking kae for its backend (KAE_LOG=info openssl speed -seconds 1 ${ALG_AB[0]:-${ALG_CDE[0]}})" >&2
if ! KAE_LOG=info OPENSSL_CONF=$KAE_CONF "$OPENSSL" speed -seconds 1 "${PROV_kae[@]}" \
        "${ALG_AB[0]:-${ALG_CDE[0]}}" >"$WORK/probe.log" 2>"$WORK/probe.err"; then
    cat "$WORK/probe.err" >&2
    die "openssl speed with kae failed; kae's backend is unknown"
fi
# "kae[pid] INFO: kae 0.1.0 in OpenSSL 3.0.19: backend cpu (auto; hpre: ...; mb: ...); pool ..."
STARTUP=$(grep -m1 -E 'INFO: kae .* in OpenSSL .*: backend ' "$WORK/probe.err" || true)
[[ -n $STARTUP ]] || { cat "$WORK/probe.err" >&2; die "no start-up line with the backend in kae's log (KAE_LOG=info)"; }
BACKEND=$(sed -n 's/.*: backend \([A-Za-z0-9_-]*\).*/\1/p' <<<"$STARTUP")
BACKEND_WHY=$(sed -n 's/.*: backend [A-Za-z0-9_-]* \(.*\); \(pool [0-9]* queues\|HPRE queues\).*/\1/p' <<<"$STARTUP")
BACKEND_LINE="kae backend: $BACKEND ${BACKEND_WHY:-}"
WARNING=
if [[ $BACKEND != mb ]]; then
    WARNING="WARNING: kae ran on the $BACKEND backend: these rows do not measure the multi-buffer kernel"
fi
echo "$BACKEND_LINE"
if [[ -n $WARNING ]]; then
    echo "$WARNING"
    echo "$WARNING" >&2
else
    grep -m1 'multi-buffer: engine' "$WORK/probe.err" | sed 's/.*INFO: /kae /' || true
fi

if [[ -n $PEER ]]; then
    echo "checking that the peer runs (openssl speed -seconds 1 ${ALG_AB[0]:-${ALG_CDE[0]}} with $PEER_NAME)" >&2
    if ! OPENSSL_CONF="$WORK/prefer-peer.cnf" "$OPENSSL" speed -seconds 1 "${PROV_peer[@]}" \
            "${ALG_AB[0]:-${ALG_CDE[0]}}" >"$WORK/peer-probe.log" 2>"$WORK/peer-probe.err"; then
        cat "$WORK/peer-probe.err" >&2
        die "openssl speed with the peer $PEER failed"
    fi
    echo "peer: $PEER_NAME ($PEER)"
fi

# --- 2. The rows. NAME|PIN|ALGSET|default provider's options|kae's options|description.
# PIN: taskset (taskset -c CPU0), numactl (numactl -C CPU0, else taskset), none, busy (not
# pinned, a CPU-bound loop per CPU running beside it).
PIN_B=taskset
if command -v numactl >/dev/null 2>&1; then PIN_B=numactl; fi
pin_cmd() {
    case $1 in
    taskset) echo "taskset -c $CPU0" ;;
    numactl) echo "numactl -C $CPU0" ;;
    none | busy) echo "" ;;
    esac
}
MODES=()
want a && MODES+=("a:1core-async8|taskset|ab|-multi 1 -async_jobs 8|-multi 1 -async_jobs 8|both")
want b && MODES+=("b:1core-async4|$PIN_B|ab|-multi 1 -async_jobs 4|-multi 1 -async_jobs 4|both")
want c && MODES+=("c:multi$MULTI,kae-async16|none|cde|-multi $MULTI|-multi $MULTI -async_jobs 16|")
want d && MODES+=("d:kae-async16,default-sync|none|cde||-async_jobs 16|")
want e && MODES+=("e:async1|none|cde|-async_jobs 1|-async_jobs 1|both"
    "e:async2|none|cde|-async_jobs 2|-async_jobs 2|both" "e:sync|none|cde|||both")
want f && MODES+=("f:busy,multi$MULTI-async8|busy|cde|-multi $MULTI|-multi $MULTI -async_jobs 8|")

# busy_start / busy_stop: one CPU-bound loop per CPU (row f), stopped after the run.
BUSY_PIDS=()
busy_start() {
    local i
    for ((i = 0; i < $(nproc); i++)); do
        (while :; do :; done) &
        BUSY_PIDS+=($!)
    done
}
busy_stop() {
    ((${#BUSY_PIDS[@]})) || return 0
    kill "${BUSY_PIDS[@]}" 2>/dev/null || true
    wait "${BUSY_PIDS[@]}" 2>/dev/null || true
    BUSY_PIDS=()
}

# kae_counts LOG: kae's exit summaries of one run (one per process with -multi) summed, as
# "private ok offloaded pauses mb_batches mb_lanes mb_scalar inline" (inline: 1 if kae said it
# computes inline because the process may run on one CPU).
kae_counts() {
    python3 - "$1" <<'PY'
import re, sys
tot = [0] * 7
inline = 0
for line in open(sys.argv[1], errors="replace"):
    if "compute inline" in line:
        inline = 1
    if "summary: private ops" not in line:
        continue
    def num(pat, conv=int):
        m = re.search(pat, line)
        return conv(m.group(1)) if m else 0
    batches = num(r"MB batches (\d+)")
    lanes = num(r"MB batches \d+ \(avg ([0-9.]+) lanes\)", float)
    tot[0] += num(r"private ops (\d+) ok")
    tot[1] += num(r"private ops \d+ ok / \d+ failed \((\d+) offloaded\)")
    tot[2] += num(r"async pauses (\d+)")
    tot[3] += batches
    tot[4] += round(batches * lanes)
    tot[5] += num(r"MB scalar (\d+)")
    tot[6] += 1
print(*tot[:6], inline, tot[6])
PY
}

# run_one PROVIDER MODE ROUND PIN OPTS ALGSET
run_one() {
    local prov_name=$1 mode=$2 round=$3 pin=$4 opts=$5 algset=$6 conf
    local log="$WORK/${mode//[:,]/_}-$prov_name-$round.log"
    local -a prov extra=() pincmd=() algs
    case $prov_name in
    kae) prov=("${PROV_kae[@]}"); conf=$KAE_CONF ;;
    peer) prov=("${PROV_peer[@]}"); conf="$WORK/prefer-peer.cnf" ;;
    *) prov=("${PROV_default[@]}"); conf="$WORK/default.cnf" ;;
    esac
    if [[ -n "$opts" ]]; then read -r -a extra <<<"$opts"; fi
    read -r -a pincmd <<<"$(pin_cmd "$pin")"
    if [[ $algset == ab ]]; then algs=("${ALG_AB[@]}"); else algs=("${ALG_CDE[@]}"); fi
    echo "  round $round/$ROUNDS  $prov_name  $mode  ${pincmd[*]:+${pincmd[*]} }openssl speed ${extra[*]:+${extra[*]} }${algs[*]}$([[ $pin == busy ]] && echo " (beside $(nproc) busy loops)")" >&2
    [[ $pin == busy ]] && busy_start
    if ! KAE_LOG=info OPENSSL_CONF=$conf "${pincmd[@]}" "$OPENSSL" speed -mr "${TIMING[@]}" \
            -seconds "$SECONDS_PER_RUN" "${prov[@]}" "${extra[@]}" "${algs[@]}" >"$log" 2>"$log.err"; then
        busy_stop
        echo "mb-speed.sh: openssl speed failed ($prov_name, $mode, round $round):" >&2
        cat "$log.err" >&2
        exit 1
    fi
    if declare -F busy_stop >/dev/null; then busy_stop; fi
    python3 "$ROOT/scripts/speed_table.py" extract "$prov_name" "$mode" "$round" <"$log" >>"$RESULTS" || {
        echo "mb-speed.sh: no RSA results in the output of the $prov_name run:" >&2
        cat "$log" "$log.err" >&2
        exit 1
    }
    if [[ $prov_name == kae ]]; then
        local priv offl pauses batches lanes scalar inline procs run_backend
        read -r priv offl pauses batches lanes scalar inline procs <<<"$(kae_counts "$log.err")"
        if ((procs == 0)); then
            echo "mb-speed.sh: warning: no kae summary line (KAE_LOG=info) in the kae run; cannot confirm kae did the work" >&2
        elif ((priv == 0)); then
            grep -m3 kae "$log.err" >&2 || true
            die "kae performed no private RSA operation in the kae run ($mode, round $round): the numbers would not be kae's"
        else
            echo "    kae: private ops $priv ($offl offloaded), async pauses $pauses, MB batches $batches$( ((batches)) && awk -v l="$lanes" -v b="$batches" 'BEGIN { printf " (avg %.1f lanes)", l / b }'), MB scalar $scalar$( ((inline)) && echo ', async jobs computed inline (one CPU)')" >&2
        fi
        run_backend=$(sed -n 's/.*INFO: kae .* in OpenSSL .*: backend \([A-Za-z0-9_-]*\).*/\1/p' "$log.err" | head -n1)
        if [[ -n $run_backend && $run_backend != "$BACKEND" ]]; then
            echo "mb-speed.sh: warning: kae ran on the $run_backend backend in this run, not $BACKEND" >&2
        fi
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$mode" "$round" "$priv" "$offl" "$pauses" \
            "$batches" "$lanes" "$scalar" "$inline" >>"$KSTATS"
    fi
}

nalg_runs=0
for m in "${MODES[@]}"; do
    IFS='|' read -r _ _ algset _ _ _ <<<"$m"
    if [[ $algset == ab ]]; then nalg_runs=$((nalg_runs + ${#ALG_AB[@]})); else nalg_runs=$((nalg_runs + ${#ALG_CDE[@]})); fi
done
printf '# %s\n' "$BACKEND_LINE" >"$RESULTS"
echo "openssl: $("$OPENSSL" version)  module: $MODULE" >&2
echo "runs: ${#MODES[@]} row(s) x $ROUNDS rounds x ${#PROVIDERS[@]} providers, ${SECONDS_PER_RUN}s per op: about $((nalg_runs * ROUNDS * ${#PROVIDERS[@]} * 2 * SECONDS_PER_RUN))s" >&2
for m in "${MODES[@]}"; do
    IFS='|' read -r name pin algset dopts kopts _ <<<"$m"
    for ((r = 1; r <= ROUNDS; r++)); do
        # Each round starts with the next provider, so every provider takes each turn.
        order=()
        for ((i = 0; i < ${#PROVIDERS[@]}; i++)); do
            order+=("${PROVIDERS[(r - 1 + i) % ${#PROVIDERS[@]}]}")
        done
        for p in "${order[@]}"; do
            if [[ $p == default ]]; then opts=$dopts; else opts=$kopts; fi
            run_one "$p" "$name" "$r" "$pin" "$opts" "$algset"
        done
    done
done

echo
echo "$BACKEND_LINE"
[[ -z $WARNING ]] || echo "$WARNING"
python3 "$ROOT/scripts/speed_table.py" table default kae "$RESULTS" --mode-first ${PEER:+--peer peer}
[[ -z $PEER ]] || echo "peer = $PEER_NAME ($PEER), run with kae's options in every row"
echo
echo "rows: openssl speed $CLOCK_WORDS -seconds $SECONDS_PER_RUN, the provider's options, then"
for m in "${MODES[@]}"; do
    IFS='|' read -r name pin _ dopts kopts same <<<"$m"
    pc=$(pin_cmd "$pin")
    if [[ $same == both ]]; then
        printf '  %-28s both:    %s\n' "$name" "${pc:+$pc }openssl speed ${dopts:-(sync)}"
    else
        printf '  %-28s default: %s\n  %-28s kae:     %s\n' "$name" "${pc:+$pc }openssl speed ${dopts:-(sync)}" "" "${pc:+$pc }openssl speed $kopts"
    fi
done
echo
echo "kae's exit summaries, summed over the rounds of each row:"
python3 - "$KSTATS" <<'PY'
import sys
from collections import OrderedDict
rows = OrderedDict()
for line in open(sys.argv[1]):
    p = line.rstrip("\n").split("\t")
    if len(p) != 9:
        continue
    t = rows.setdefault(p[0], [0] * 7)
    for i, v in enumerate(p[2:]):
        t[i] += int(v)
for mode, (priv, offl, pauses, batches, lanes, scalar, inline) in rows.items():
    avg = f" (avg {lanes / batches:.1f} lanes)" if batches else ""
    print(f"  {mode:28} private ops {priv}, offloaded {offl}, async pauses {pauses}, "
          f"MB batches {batches}{avg}, MB scalar {scalar}"
          + (", inline on one CPU" if inline else ""))
PY
if [[ -n $WARNING ]]; then
    echo
    echo "$WARNING"
    why=${BACKEND_WHY#(}
    echo "  kae's reason: ${why%)}"
    echo "  (the multi-buffer kernel needs AVX-512F and AVX-512 IFMA; on such a CPU backend = auto takes it)"
fi

# The results and a chart next to each other in $OUT_DIR: they outlive the scratch directory.
CHART_DIR=${OUT_DIR:-${CARGO_TARGET_DIR:-$ROOT/target}/bench}
SVG="$CHART_DIR/mb-speed-$BACKEND-$(date +%Y%m%d-%H%M%S).svg"
if mkdir -p "$CHART_DIR" && cp "$RESULTS" "${SVG%.svg}.tsv" &&
    python3 "$ROOT/scripts/chart.py" --title "openssl speed, kae on the $BACKEND backend vs the default provider" \
        --columns label,mode,round,bits,sign_per_s,verify_per_s --config "rsa{bits} {mode}" \
        --series label --metric "sign_per_s=sign/s" --metric "verify_per_s=verify/s" \
        --ratio default,kae -o "$SVG" "$RESULTS" >/dev/null; then
    echo
    echo "results: ${SVG%.svg}.tsv"
    echo "chart:   $SVG"
else
    echo "mb-speed.sh: warning: could not write the chart" >&2
fi
