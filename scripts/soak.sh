#!/usr/bin/env bash
# The long fault, load and teardown checks ("Faults and load at scale", issue 19). The same
# tests run in short form in `cargo test --release`; this script runs them long:
#   faults    tests/hpre.rs faults_at_scale_are_all_counted_and_never_released with
#             KAE_FAULT_OPS=$FAULT_OPS (100000) RSA-2048 signatures from 4 threads of ASYNC
#             jobs on the HPRE simulator, about 1% busy refusals, device errors, lost
#             completions (timeouts) and wrong results, an isolation per provider instance:
#             no failed operation, no wrong signature released (each verified with the public
#             key), every injected fault in kae's counters, kae's threads gone after each
#             unload, a clean last round on the device. About 2-4 minutes.
#   soak      tests/haproxy.rs haproxy_soak_memory_fds_and_handshakes_stay_flat for
#             KAE_SOAK_SECS=$SOAK_SECS (600): HAProxy ssl-mode-async with kae under kae-press
#             (TLS 1.3 and TLS 1.2 RSA key exchange) on loopback: VmRSS within 5% after the
#             warm-up, descriptors at rest unchanged, no failed handshake; then
#             tests/nginx.rs nginx_kill_9_of_a_worker_mid_load_leaves_the_other_serving for
#             KAE_KILL_SECS=$KILL_SECS (60): nginx (2 workers; HAProxy 2.6 has one worker
#             process) with kae, one worker SIGKILLed mid-load, the other goes on serving.
#   teardown  tests/teardown.rs load_use_unload_cycles with KAE_TEARDOWN_ROUNDS=$TEARDOWN_ROUNDS
#             (1000) under valgrind memcheck (leak checking, scripts/valgrind.supp): load kae,
#             sign (async and inline), unload, every round; no memcheck error, no definite or
#             indirect leak, no kae thread left. About 1.5-2 s per round (1000: 35 min).
# Each step ends with one line `PASS step: figures` or `FAIL step: why`; the exit status is 1
# when a step failed.
#
# usage: scripts/soak.sh [--help] [STEP...]   (STEP: faults, soak, teardown; default all)
# Knobs (environment): FAULT_OPS, SOAK_SECS, KILL_SECS, TEARDOWN_ROUNDS (above), VALGRIND
# (binary), NO_BUILD=1 (use what is built), KEEP_LOGS=1 (keep the logs' directory).
set -euo pipefail

usage() { sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'; }
STEPS=()
while (($#)); do
    case $1 in
        -h | --help) usage; exit 0 ;;
        faults | soak | teardown) STEPS+=("$1") ;;
        *) echo "soak.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done
((${#STEPS[@]})) || STEPS=(faults soak teardown)
FAULT_OPS=${FAULT_OPS:-100000}
SOAK_SECS=${SOAK_SECS:-600}
KILL_SECS=${KILL_SECS:-60}
TEARDOWN_ROUNDS=${TEARDOWN_ROUNDS:-1000}
for knob in FAULT_OPS:1 SOAK_SECS:10 KILL_SECS:3 TEARDOWN_ROUNDS:5; do
    name=${knob%:*} least=${knob#*:}
    value=${!name}
    if ! [[ $value =~ ^[0-9]+$ ]] || ((10#$value < least)); then
        echo "soak.sh: $name=$value: a whole number, at least $least" >&2
        exit 2
    fi
done

cd "$(dirname "$0")/.."
ROOT=$PWD
VALGRIND=${VALGRIND:-valgrind}
export CARGO_PROFILE_RELEASE_LTO=${CARGO_PROFILE_RELEASE_LTO:-false}
# Only the kae settings the tests set: none inherited from the caller.
for v in $(compgen -e | grep '^KAE_' || true); do unset "$v"; done

WORK=$(mktemp -d "${TMPDIR:-/tmp}/kae-soak.XXXXXX")
cleanup() { if [[ "${KEEP_LOGS:-0}" == 1 ]]; then echo "logs kept in $WORK"; else rm -rf "$WORK"; fi; }
trap cleanup EXIT

TESTS=(--test hpre --test haproxy --test nginx --test teardown)
if [[ "${NO_BUILD:-0}" != 1 ]]; then
    echo "=== build (cargo build --release --workspace; the test binaries)"
    cargo build --release --workspace >"$WORK/build.log" 2>&1 ||
        { tail -n 30 "$WORK/build.log"; echo "FAIL build"; exit 1; }
fi
cargo test --release --no-run "${TESTS[@]}" >"$WORK/build-tests.log" 2>&1 ||
    { tail -n 30 "$WORK/build-tests.log"; echo "FAIL build: the test binaries"; exit 1; }

failed=0
result() { # result STEP RC FIGURES
    if (($2 == 0)); then echo "PASS $1: $3"; else echo "FAIL $1 (exit $2): $3"; failed=1; fi
}
# cargo_test LOG TEST-BINARY FILTER: runs one test, its output in LOG; the exit status.
cargo_test() {
    local log=$1 bin=$2 filter=$3 rc=0
    cargo test --release --test "$bin" "$filter" -- --nocapture --test-threads=1 \
        >"$log" 2>&1 || rc=$?
    grep -q 'test result: ok. 1 passed' "$log" || ((rc)) || rc=1
    return "$rc"
}

step_faults() {
    echo "=== faults: $FAULT_OPS RSA-2048 signatures with ~1% injected faults (HPRE simulator)"
    local log=$WORK/faults.log rc=0 start=$SECONDS
    KAE_FAULT_OPS=$FAULT_OPS cargo_test "$log" hpre faults_at_scale_are_all_counted || rc=$?
    grep 'faults at scale: epoch' "$log" | sed 's/^/    /' || true
    local total
    total=$(grep -m1 -o 'faults at scale: TOTAL.*' "$log" || true)
    ((rc == 0)) || { grep -E 'panicked|assert|WATCHDOG|failed' "$log" | head -n 20 | sed 's/^/    /'; }
    result faults "$rc" "${total#faults at scale: TOTAL }; $((SECONDS - start)) s"
}

step_soak() {
    echo "=== soak: HAProxy ssl-mode-async + kae under kae-press for $SOAK_SECS s"
    local log=$WORK/soak.log rc=0 line
    KAE_SOAK_SECS=$SOAK_SECS cargo_test "$log" haproxy haproxy_soak_memory_fds || rc=$?
    line=$(grep -m1 -o 'haproxy soak: .*' "$log" || true)
    ((rc == 0)) || { grep -E 'panicked|grew|failed' "$log" | head -n 20 | sed 's/^/    /'; }
    result soak "$rc" "${line#haproxy soak: }"
    echo "=== soak: nginx (2 workers) + kae, kill -9 of a worker during a $KILL_SECS s load"
    log=$WORK/kill.log rc=0
    KAE_KILL_SECS=$KILL_SECS cargo_test "$log" nginx nginx_kill_9_of_a_worker || rc=$?
    line=$(grep -m1 -o 'nginx kill -9: .*' "$log" || true)
    ((rc == 0)) || { grep -E 'panicked|failed|died' "$log" | head -n 20 | sed 's/^/    /'; }
    result kill-9 "$rc" "${line#nginx kill -9: }"
}

step_teardown() {
    echo "=== teardown: $TEARDOWN_ROUNDS load/use/unload rounds under valgrind memcheck"
    command -v "$VALGRIND" >/dev/null || { result teardown 1 "valgrind is not installed"; return; }
    local bin rc=0 start=$SECONDS
    bin=$(cargo test --release --no-run --test teardown --message-format=json 2>/dev/null |
        grep -o '"executable":"[^"]*teardown-[^"]*"' | head -n1 | cut -d'"' -f4 || true)
    [[ -x "$bin" ]] || { result teardown 1 "teardown test binary not found"; return; }
    KAE_TEARDOWN_ROUNDS=$TEARDOWN_ROUNDS "$VALGRIND" --tool=memcheck --leak-check=full \
        --show-leak-kinds=definite,indirect --errors-for-leak-kinds=definite,indirect \
        --error-exitcode=99 --suppressions="$ROOT/scripts/valgrind.supp" \
        --log-file="$WORK/teardown.vg.log" \
        "$bin" --exact load_use_unload_cycles --nocapture --test-threads=1 \
        >"$WORK/teardown.log" 2>&1 || rc=$?
    local errors definite indirect reachable inuse line
    errors=$(grep -o 'ERROR SUMMARY: [0-9,]* errors' "$WORK/teardown.vg.log" | tail -n1 | grep -o '[0-9,]*' | head -n1 || true)
    definite=$(grep -o 'definitely lost: [0-9,]* bytes in [0-9,]* blocks' "$WORK/teardown.vg.log" | tail -n1 || true)
    indirect=$(grep -o 'indirectly lost: [0-9,]* bytes in [0-9,]* blocks' "$WORK/teardown.vg.log" | tail -n1 || true)
    reachable=$(grep -o 'still reachable: [0-9,]* bytes in [0-9,]* blocks' "$WORK/teardown.vg.log" | tail -n1 || true)
    inuse=$(grep -o 'in use at exit: [0-9,]* bytes in [0-9,]* blocks' "$WORK/teardown.vg.log" | tail -n1 || true)
    line=$(grep -m1 -o 'teardown: [0-9]* rounds.*' "$WORK/teardown.log" || true)
    grep -q 'test result: ok. 1 passed' "$WORK/teardown.log" || ((rc)) || rc=1
    [[ "$errors" == 0 ]] || ((rc)) || rc=1
    if ((rc)); then
        grep -E 'panicked|WATCHDOG|assert' "$WORK/teardown.log" | head -n 10 | sed 's/^/    /'
        grep -E -A12 'Invalid|uninitialised|definitely lost in|indirectly lost in' \
            "$WORK/teardown.vg.log" | head -n 60 | sed 's/^/    /'
    fi
    result teardown "$rc" "${line#teardown: }; memcheck: ${errors:-?} errors, ${definite:-definitely lost: 0 (no leak summary)}, ${indirect:-indirectly lost: 0}, ${reachable:-still reachable: 0} (${inuse:-in use at exit: ?}: the same after 10 rounds means nothing grows per round); $((SECONDS - start)) s"
}

for s in "${STEPS[@]}"; do "step_$s"; done
if ((failed)); then echo "=== soak.sh: FAILED"; exit 1; fi
echo "=== soak.sh: all steps passed"
