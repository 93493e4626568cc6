#!/usr/bin/env bash
# Performance of the HPRE backend against the UADK simulator (hpre-sim; test-only: this
# machine has no HPRE, so the "device" is a software stand-in).
#
# usage: scripts/hpre-perf.sh [--help]
#
#   1. cargo bench --bench hpre_cost: kae's own cost per HPRE operation with an
#      instantaneous simulator that does no arithmetic (submission, poll, callback,
#      completion, wake-up), throughput with LATENCY_US of device latency and 64 requests
#      in flight from one thread, the poller's CPU share, and an idle poller's CPU time.
#   2. scripts/speed.sh with kae on HPRE: the simulator computing the RSA in software on
#      this machine's CPUs (SIM_DEVICE_THREADS threads) after LATENCY_US; sync and
#      -async_jobs 64 rows against the default provider, alternating rounds, medians. The
#      device's arithmetic shares the CPUs with everything else here, so these rows show
#      that the machinery works end to end, not what an accelerator gains.
#
# Knobs (environment): LATENCY_US (150), SIM_DEVICE_THREADS (1), ALGS (rsa2048),
# ROUNDS (3), SECONDS_PER_RUN (2), NO_BUILD=1 (skip the build), SKIP_SPEED=1 (step 1 only).
set -euo pipefail

usage() { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; }
while (($#)); do
    case $1 in
        -h | --help) usage; exit 0 ;;
        *) echo "hpre-perf.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done

cd "$(dirname "$0")/.."
ROOT=$PWD
LATENCY_US=${LATENCY_US:-150}
[[ $LATENCY_US =~ ^[0-9]+$ ]] || { echo "hpre-perf.sh: LATENCY_US must be a whole number" >&2; exit 2; }
if [[ ${NO_BUILD:-0} != 1 ]]; then
    scripts/build.sh >/dev/null
fi
SIM="${CARGO_TARGET_DIR:-$ROOT/target}/release/libkae_hpre_sim.so"
[[ -f $SIM ]] || { echo "hpre-perf.sh: $SIM missing (cargo build --release --workspace)" >&2; exit 1; }

echo "=== 1. kae's own cost per HPRE operation (cargo bench --bench hpre_cost)"
KAE_HPRE_BENCH_LATENCY_US=$LATENCY_US cargo bench --bench hpre_cost 2>/dev/null | grep '^hpre'

[[ ${SKIP_SPEED:-0} == 1 ]] && exit 0

echo
echo "=== 2. openssl speed, kae on HPRE (simulator, ${LATENCY_US} µs latency) vs the default provider"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/kae-hpre-perf.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
dev="$WORK/sysfs/hisi_hpre-0"
mkdir -p "$dev/device"
printf 'rsa\ndh\n' >"$dev/algorithms"
echo 0 >"$dev/isolate"
echo 1 >"$dev/flags"
echo 16 >"$dev/available_instances"
echo 0 >"$dev/device/numa_node"
export KAE_BACKEND=hpre KAE_STRICT=yes KAE_UADK_LIB="$SIM" KAE_UADK_CRYPTO_LIB="$SIM"
export KAE_HPRE_SYSFS="$WORK/sysfs" KAE_SIM=1 KAE_SIM_LATENCY_US=$LATENCY_US
export KAE_SIM_DEVICE_THREADS=${SIM_DEVICE_THREADS:-1}
ALGS=${ALGS:-rsa2048} ASYNC_JOBS=64 NO_BUILD=1 scripts/speed.sh
