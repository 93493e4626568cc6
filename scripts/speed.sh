#!/usr/bin/env bash
# Compare RSA throughput of OpenSSL's default provider with kae.
#
# usage: scripts/speed.sh [--module FILE] [--help]
#
# Runs `openssl speed -mr -elapsed` alternately with the default provider and
# with kae (default, kae, default, kae, ... for $ROUNDS rounds, so slow drifts
# of the machine hit both alike) and prints the medians side by side, with the ratio of the
# medians and the median of the per-round ratios ("paired").
# The module measured is printed first ("module: ..."), and under the table with the
# backend kae ran on (from its start-up line):
#   --module FILE    measure this module file, e.g. an installed one:
#                    --module "$(openssl version -m | cut -d'"' -f2)/kae.so"
#                    (also KAE_MODULE=FILE; nothing is built then)
#   (no --module)    the build tree's module: scripts/build.sh (unless NO_BUILD=1),
#                    then target/release/kae.so
#   -h, --help       this text
#
# Knobs (environment):
#   SECONDS_PER_RUN  seconds per algorithm and operation   (default 2)
#   ROUNDS           alternating rounds                    (default 3)
#   ALGS             algorithms                            (default "rsa2048 rsa3072 rsa4096")
#   KAE_PREFER       1: also set default_properties=?provider=kae for the kae
#                    runs. speed ignores -propquery for RSA; with kae alone on
#                    the command line kae serves RSA anyway (its default
#                    provider is private), so this is a safety net that keeps
#                    the numbers kae's if more providers get loaded  (default 1)
#   ASYNC_JOBS       -async_jobs counts of the async rows, e.g. "1 2 4 8 16" for the
#                    chart across job counts                  (default "8")
#   ASYNC_ROWS       0: sync rows only                        (default 1)
#   KEEP_LOGS        1: keep the raw speed output directory
#   NO_BUILD         1: skip scripts/build.sh
#   OPENSSL          openssl binary                           (default openssl)
#   OUT_DIR          where the chart goes                     (default target/bench)
set -euo pipefail

usage() { sed -n '2,32p' "$0" | sed 's/^# \{0,1\}//'; }
MODULE=${KAE_MODULE:-}
while (($#)); do
    case $1 in
        -h | --help) usage; exit 0 ;;
        --module)
            [[ $# -ge 2 && -n $2 ]] || { echo "speed.sh: --module needs a file" >&2; exit 2; }
            MODULE=$2
            shift
            ;;
        --module=*) MODULE=${1#*=} ;;
        *) echo "speed.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done
[[ -z $MODULE || $MODULE == /* ]] || MODULE="$PWD/$MODULE"

cd "$(dirname "$0")/.."
ROOT=$PWD
SECONDS_PER_RUN=${SECONDS_PER_RUN:-2}
ROUNDS=${ROUNDS:-3}
ALGS=${ALGS:-rsa2048 rsa3072 rsa4096}
ASYNC_JOBS=${ASYNC_JOBS:-8}
KAE_PREFER=${KAE_PREFER:-1}
OPENSSL=${OPENSSL:-openssl}
read -r -a ALG_LIST <<<"$ALGS"

if [[ -z $MODULE ]]; then
    if [[ "${NO_BUILD:-0}" != 1 ]]; then
        "$ROOT/scripts/build.sh" >/dev/null
    fi
    MODULE="${CARGO_TARGET_DIR:-$ROOT/target}/release/kae.so"
    [[ -e "$MODULE" ]] || { echo "speed.sh: $MODULE missing (run scripts/build.sh)" >&2; exit 1; }
fi
[[ -f "$MODULE" ]] || { echo "speed.sh: module $MODULE: no such file" >&2; exit 1; }
[[ $MODULE == *.so ]] || { echo "speed.sh: module $MODULE: the file name must end in .so (openssl loads NAME.so)" >&2; exit 1; }
# -provider-path DIR -provider NAME loads DIR/NAME.so; kae is then known as NAME.
MODDIR=$(dirname "$MODULE")
KAE_NAME=$(basename "$MODULE" .so)
echo "module: $MODULE$( [[ -L $MODULE ]] && echo " -> $(readlink -f "$MODULE")"), $(stat -c '%s bytes, modified %y' "$(readlink -f "$MODULE")" | cut -d. -f1)" >&2

WORK=$(mktemp -d "${TMPDIR:-/tmp}/kae-speed.XXXXXX")
cleanup() { if [[ "${KEEP_LOGS:-0}" == 1 ]]; then echo "logs kept in $WORK"; else rm -rf "$WORK"; fi; }
trap cleanup EXIT
RESULTS="$WORK/results.tsv"
: >"$RESULTS"

# Neutral config for the default runs (ignore the caller's OPENSSL_CONF), and
# a config that only prefers kae for the kae runs (kae itself is loaded with
# -provider-path/-provider on the command line).
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

# Test modes: NAME|default provider's extra options|kae's extra options; one row group per
# mode. The async rows compare kae offloading through ASYNC jobs (-async_jobs 8) with the
# default provider computing on the same number of application processes (-multi N):
# wall-clock throughput (-elapsed), which is what offload changes.
MODES=("sync||")
if [[ "${ASYNC_ROWS:-1}" == 1 ]]; then
    for jobs in $ASYNC_JOBS; do
        [[ "$jobs" =~ ^[1-9][0-9]*$ ]] || { echo "speed.sh: ASYNC_JOBS: bad count '$jobs'" >&2; exit 2; }
        MODES+=("multi1-async$jobs|-multi 1|-multi 1 -async_jobs $jobs")
    done
    for jobs in $ASYNC_JOBS; do
        MODES+=("multi2-async$jobs|-multi 2|-multi 2 -async_jobs $jobs")
    done
fi

# run_one LABEL MODE_NAME MODE_OPTS ROUND
run_one() {
    local label=$1 mode=$2 opts=$3 round=$4 conf
    local log="$WORK/$label-$mode-$round.log"
    local -a prov extra=()
    if [[ $label == kae ]]; then prov=("${PROV_kae[@]}"); conf=$KAE_CONF; else prov=("${PROV_default[@]}"); conf="$WORK/default.cnf"; fi
    if [[ -n "$opts" ]]; then read -r -a extra <<<"$opts"; fi
    echo "  round $round/$ROUNDS  $label  $mode ${ALG_LIST[*]}" >&2
    # KAE_LOG=info: kae prints its operation counts at exit (checked below).
    if ! KAE_LOG=info OPENSSL_CONF=$conf "$OPENSSL" speed -mr -elapsed -seconds "$SECONDS_PER_RUN" \
            "${prov[@]}" "${extra[@]}" "${ALG_LIST[@]}" >"$log" 2>"$log.err"; then
        echo "speed.sh: openssl speed failed ($label, $mode, round $round):" >&2
        cat "$log.err" >&2
        exit 1
    fi
    python3 "$ROOT/scripts/speed_table.py" extract "$label" "$mode" "$round" <"$log" >>"$RESULTS" || {
        echo "speed.sh: no RSA results in the output of the $label run:" >&2
        cat "$log" "$log.err" >&2
        exit 1
    }
    if [[ $label == kae ]]; then
        # "kae[pid] INFO: ... summary: private ops N ok / M failed, public ops ..."
        local summary private_ok
        summary=$(grep -m1 'summary: private ops' "$log.err" || true)
        private_ok=$(sed -n 's/.*private ops \([0-9]*\) ok.*/\1/p' <<<"$summary")
        if [[ -z "$private_ok" ]]; then
            echo "speed.sh: warning: no kae summary line (KAE_LOG=info) in the kae run; cannot confirm kae did the work" >&2
        elif ((private_ok == 0)); then
            echo "speed.sh: kae performed no RSA operation in the kae run: the numbers would not be kae's" >&2
            echo "  $summary" >&2
            exit 1
        else
            echo "    ${summary#*summary: }" >&2
        fi
        # "kae[pid] INFO: kae 0.1.0 in OpenSSL 3.0.19: backend cpu (auto; ...); pool ..."
        local backend
        backend=$(grep -m1 ': backend .*; pool ' "$log.err" | sed 's/.*: backend \(.*\); pool .*/\1/' || true)
        if [[ -n $backend && $backend != "${LAST_BACKEND:-}" ]]; then
            echo "    kae backend measured: $backend" >&2
            LAST_BACKEND=$backend
        fi
    fi
}

echo "openssl: $("$OPENSSL" version)  module: $MODULE" >&2
echo "runs: ${#MODES[@]} mode(s) x $ROUNDS rounds x 2 providers, ${SECONDS_PER_RUN}s per op" >&2
for m in "${MODES[@]}"; do
    IFS='|' read -r name dopts kopts <<<"$m"
    for ((r = 1; r <= ROUNDS; r++)); do
        run_one default "$name" "$dopts" "$r"
        run_one kae "$name" "$kopts" "$r"
    done
done

echo
python3 "$ROOT/scripts/speed_table.py" table default kae "$RESULTS"
echo "kae: $MODULE, backend ${LAST_BACKEND:-unknown (no start-up line in the kae runs)}"

# The same medians as an SVG bar chart (scripts/chart.py), with the raw results next to it,
# in $OUT_DIR (default target/bench): they outlive the scratch directory.
CHART_DIR=${OUT_DIR:-${CARGO_TARGET_DIR:-$ROOT/target}/bench}
SVG="$CHART_DIR/speed-$(date +%Y%m%d-%H%M%S).svg"
if mkdir -p "$CHART_DIR" && cp "$RESULTS" "${SVG%.svg}.tsv" &&
    python3 "$ROOT/scripts/chart.py" --title "openssl speed: default provider vs kae" \
        --columns label,mode,round,bits,sign_per_s,verify_per_s --config "rsa{bits} {mode}" \
        --series label --metric "sign_per_s=sign/s" --metric "verify_per_s=verify/s" \
        --ratio default,kae -o "$SVG" "$RESULTS" >/dev/null; then
    echo "chart: $SVG" >&2
else
    echo "speed.sh: warning: could not write the chart" >&2
fi
