#!/usr/bin/env bash
# The project's test command (usage: scripts/test.sh [--quick] [--help]; no other arguments).
#   --quick: the contributor's tier, under 2 minutes on 2 cores once built: the unit tests and
#            the in-process tests (two-provider cross-checks, Wycheproof, bad input, KEM,
#            implicit rejection, encoders, configuration errors); no module build, servers,
#            valgrind, version matrix or fuzzing. CI and the README's test command run it all:
#   1. scripts/build.sh             (cargo build --release; target/release/kae.so; and
#                                    --test-knobs: the test build, target/test-knobs/)
#   2. cargo test --release         (all tests; same profile, so one build), then
#      scripts/ifma-inlined.sh       (the module's IFMA kernel compiled as one piece), and
#      cargo build --release --benches (the benchmarks are not run, but must build)
#   3. scripts/ifma-emulate.sh      (the AVX-512 IFMA kernel run under an instruction emulator,
#                                    BochsCPU from PyPI, against the portable kernel)
#   4. scripts/valgrind.sh          (memcheck with leak checking: CLI, pool threads, ASYNC,
#                                    fork, a TLS server)
#   5. scripts/ctgrind.sh           (secret-taint check: no branch or address in kae's code
#                                    depends on key material or decrypted blocks)
#   6. scripts/compat.sh            (version matrix: OpenSSL 3.0 (system), 3.5, 3.6 and 4.0
#                                    cores built from the openssl-src crates, cached in
#                                    $KAE_COMPAT_CACHE or target/compat; kae 3.x and 4.0 builds)
#   7. scripts/fuzz.sh 10           (fuzz smoke run: every target 10 s, when cargo-fuzz and
#                                    the nightly toolchain are there; .ci/run installs them,
#                                    and under CI (KAE_CI=1) their absence is a failure)
# The short statistical timing test (tests/ct_timing.rs) runs inside step 2.
# A failing build stops here; otherwise every step runs and the script exits
# non-zero if any of them failed. Prints the time and result of each step.
# Environment: KAE_FUZZ_SECONDS (seconds per fuzz target, default 10), KAE_COMPAT_CACHE
# (cores of step 6), and those of each step's script (see its --help).
set -euo pipefail

usage() { sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; }
QUICK=0
while (($#)); do
    case $1 in
        --quick) QUICK=1; shift ;;
        -h | --help) usage; exit 0 ;;
        *) echo "test.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done

cd "$(dirname "$0")/.."

# The test builds link about 20 test binaries, the tools and the fuzz harness; with the
# release profile's cross-crate thin LTO each test binary costs about 4x the CPU to link
# (18 s against 4 s here). Tests check behaviour: they build without cross-crate LTO
# (in-crate optimisation stays; one consistent build for every step). scripts/build.sh and
# scripts/install.sh on their own build the module with LTO, as shipped.
export CARGO_PROFILE_RELEASE_LTO=${CARGO_PROFILE_RELEASE_LTO:-false}

declare -a SUMMARY=()
failed=0

# Tests append what they could not check here (tests/skip); the summary lists it.
export KAE_SKIP_LOG=${CARGO_TARGET_DIR:-$PWD/target}/skipped-checks.txt
mkdir -p "$(dirname "$KAE_SKIP_LOG")"
: >"$KAE_SKIP_LOG"

# step NAME command...: run, time and record; returns the command's status.
step() {
    local name=$1
    shift
    echo "=== $name: $*"
    local start=$SECONDS rc=0
    "$@" || rc=$?
    local result=ok
    if ((rc != 0)); then
        result="FAILED (exit $rc)"
        failed=1
    fi
    SUMMARY+=("$(printf '%-12s %5ds  %s' "$name" $((SECONDS - start)) "$result")")
    return "$rc"
}

# shellcheck disable=SC2317  # called through the EXIT trap
report() {
    echo "=== summary"
    local line
    for line in "${SUMMARY[@]}"; do echo "  $line"; done
    if [[ -s $KAE_SKIP_LOG ]]; then
        echo "  not checked here (skipped by the tests; under CI only what CI cannot provide):"
        sort -u "$KAE_SKIP_LOG" | sed 's/^/    /'
    fi
    if ((failed)); then echo "=== test.sh: FAILED"; else echo "=== test.sh: all steps passed"; fi
}
trap report EXIT

# The quick tier's integration test binaries: kae loaded into the test process, no servers.
QUICK_TESTS=(in_process crt_fault_log blinding_fork)
if ((QUICK)); then
    args=()
    for t in "${QUICK_TESTS[@]}"; do args+=(--test "$t"); done
    step unit cargo test --release --workspace --lib --bins || true
    step in-process cargo test --release -p kae --no-fail-fast "${args[@]}" || true
    exit "$failed"
fi

build_both() { scripts/build.sh && scripts/build.sh --test-knobs; }
step build build_both || exit 1
step cargo-test cargo test --release --workspace --no-fail-fast || true
step ifma-inlined scripts/ifma-inlined.sh "${CARGO_TARGET_DIR:-target}/release/kae.so" || true
step benches-build cargo build --release --workspace --benches || true
step ifma-emu scripts/ifma-emulate.sh || true
step valgrind env NO_BUILD=1 scripts/valgrind.sh || true
step ctgrind scripts/ctgrind.sh || true
step compat scripts/compat.sh || true
if cargo +nightly fuzz --version >/dev/null 2>&1; then
    step fuzz-smoke scripts/fuzz.sh "${KAE_FUZZ_SECONDS:-10}" || true
elif [[ ${KAE_CI:-0} == 1 ]]; then
    echo "=== fuzz-smoke: FAILED: CI installs the nightly toolchain's cargo-fuzz, and it is missing"
    SUMMARY+=("$(printf '%-12s %5ds  %s' fuzz-smoke 0 'FAILED (no cargo-fuzz under CI)')")
    failed=1
else
    echo "=== fuzz-smoke: SKIPPED (needs the nightly toolchain and cargo-fuzz: cargo install cargo-fuzz)"
    SUMMARY+=("$(printf '%-12s %5ds  %s' fuzz-smoke 0 'SKIPPED (no cargo-fuzz)')")
fi
exit "$failed"
