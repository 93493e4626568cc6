#!/usr/bin/env bash
# The project's one test command:
#   1. cargo build --release        (makes target/release/libkae.so + kae.so)
#   2. cargo test --release         (all tests; same profile, so one build)
#   3. scripts/valgrind.sh          (short memcheck run of kae via the CLI)
# Exits non-zero when any step fails; prints the time of each step.
set -euo pipefail

cd "$(dirname "$0")/.."

declare -a TIMES=()
step() {
    local name=$1
    shift
    echo "=== $name: $*"
    local start=$SECONDS
    "$@"
    TIMES+=("$(printf '%-22s %4ds' "$name" $((SECONDS - start)))")
}

report_times() {
    local rc=$?
    echo "=== timings"
    local t
    for t in "${TIMES[@]}"; do echo "  $t"; done
    if ((rc != 0)); then echo "=== test.sh: FAILED (exit $rc)"; else echo "=== test.sh: all steps passed"; fi
}
trap report_times EXIT

step build scripts/build.sh
step cargo-test cargo test --release --no-fail-fast
step valgrind env NO_BUILD=1 scripts/valgrind.sh
