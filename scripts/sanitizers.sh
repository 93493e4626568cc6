#!/usr/bin/env bash
# kae's unit tests and in-process integration tests under AddressSanitizer, and the
# pure-Rust padding / pool tests under miri. Prints the time each part takes; exit
# status 1 when a part fails.
#
# Needs the nightly toolchain with the miri and rust-src components
# (`rustup component add --toolchain nightly miri rust-src`).
set -euo pipefail

usage() {
    cat <<'EOF'
usage: scripts/sanitizers.sh [--asan-only | --miri-only] [--no-integration]

  --asan-only       only the AddressSanitizer run
  --miri-only       only the miri run
  --no-integration  ASan: unit tests (cargo test --lib) only, not the in-process
                    integration tests
  -h, --help        this text

AddressSanitizer (RUSTFLAGS=-Zsanitizer=address, nightly, target dir target/asan):
  cargo test --lib, then the integration tests that run kae inside the test process
  (the test binaries load the ASan-built libkae.so): in_process's bad_input,
  cross_provider and wycheproof modules, teardown, async_jobs, async_depth1, fork. Tests that spawn other programs
  (cli, async_cli, kae_stat, press, nginx, haproxy) are left out: the programs they run
  are not instrumented. libcrypto itself is not instrumented either; ASan still checks
  every heap block kae touches, whoever allocated it.
miri (cargo +nightly miri test --lib, target dir target/miri): the tests that never call
  libcrypto: rsa::padding::pure_tests (PKCS#1 type 1/2, implicit rejection, TLS
  premaster, OAEP, PSS, X9.31, DigestInfo, MGF1/HMAC over a plain-Rust SHA-256),
  rsa::padding::ct, the table checks of rsa::padding::digests, the sleeper's spin policy
  and CPU workers' start/shutdown (offload::offloader::tests::cpu_pool_has_no_poller_thread).
  The other offload tests build an RsaKey through libcrypto and cannot run under miri.
EOF
}

ASAN=1
MIRI=1
INTEGRATION=1
while [[ $# -gt 0 ]]; do
    case "$1" in
        -h|--help) usage; exit 0 ;;
        --asan-only) MIRI=0; shift ;;
        --miri-only) ASAN=0; shift ;;
        --no-integration) INTEGRATION=0; shift ;;
        *) echo "sanitizers.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
[[ $ASAN == 1 || $MIRI == 1 ]] || { echo "sanitizers.sh: --asan-only and --miri-only exclude each other" >&2; exit 2; }

cd "$(dirname "$0")/.."
TRIPLE=$(rustc +nightly -vV | sed -n 's/^host: //p')
status=0
summary=()

run_timed() { # label, command...
    local label=$1; shift
    local t0=$SECONDS rc=0
    echo "== $label: $*" >&2
    "$@" || rc=$?
    local dt=$((SECONDS - t0))
    if [[ $rc -eq 0 ]]; then
        summary+=("$(printf '%-34s ok      %5ss' "$label" "$dt")")
    else
        summary+=("$(printf '%-34s FAILED  %5ss (exit %s)' "$label" "$dt" "$rc")")
        status=1
    fi
}

if [[ $ASAN == 1 ]]; then
    # --export-dynamic: the ASan runtime is linked statically into the test executables;
    # the ASan-built libkae.so they load with OSSL_PROVIDER_load resolves __asan_* there.
    export RUSTFLAGS="-Zsanitizer=address -Clink-arg=-Wl,--export-dynamic ${RUSTFLAGS:-}"
    export RUSTDOCFLAGS="-Zsanitizer=address"
    # Leak checking stays on; libcrypto's process-lifetime allocations are still reachable
    # at exit and not reported. Test-spawned children of fork.rs leave with _exit.
    export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:detect_stack_use_after_return=1}"
    export LSAN_OPTIONS="suppressions=$PWD/scripts/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
    # Unset overrides that would point the tests elsewhere.
    unset KAE_MODULE
    # Debug profile: faster to build, debug assertions on; the arithmetic is libcrypto's anyway.
    ASAN_CARGO=(cargo +nightly test --target "$TRIPLE")
    export CARGO_TARGET_DIR=target/asan
    run_timed "asan build" "${ASAN_CARGO[@]}" --lib --tests --no-run
    run_timed "asan unit tests (--lib)" "${ASAN_CARGO[@]}" --lib
    if [[ $INTEGRATION == 1 ]]; then
        for t in in_process teardown async_jobs async_depth1 fork; do
            if [[ $t == in_process ]]; then
                run_timed "asan --test $t" "${ASAN_CARGO[@]}" --test "$t" -- bad_input:: \
                    cross_provider:: wycheproof::
            elif [[ $t == teardown ]]; then
                # teardown asserts that VmRSS stays flat over load/unload cycles; ASan's
                # quarantine keeps freed memory out of reuse and grows it by design, so
                # this one runs without quarantine (LeakSanitizer still checks it).
                ASAN_OPTIONS="$ASAN_OPTIONS:quarantine_size_mb=0" \
                    run_timed "asan --test $t" "${ASAN_CARGO[@]}" --test "$t"
            else
                run_timed "asan --test $t" "${ASAN_CARGO[@]}" --test "$t"
            fi
        done
    fi
    unset RUSTFLAGS RUSTDOCFLAGS CARGO_TARGET_DIR
fi

if [[ $MIRI == 1 ]]; then
    # Only tests that never reach libcrypto (miri stops the whole run at the first foreign
    # call). completion::sleeper's average_gap test is left out: it times real waits, and miri's
    # clock advances with every interpreted instruction.
    run_timed "miri (pure padding, offload)" cargo +nightly miri test --lib -- \
        rsa::padding::pure_tests rsa::padding::ct:: \
        rsa::padding::digests::tests::names_and_aliases \
        rsa::padding::digests::tests::block_lengths \
        rsa::padding::digests::tests::x931_ids \
        rsa::padding::digests::tests::digest_info_prefixes_are_well_formed \
        completion::sleeper::tests::spin_follows_short_gaps_and_stops_for_idle_ones \
        offload::offloader::tests::cpu_pool_has_no_poller_thread
fi

echo
printf '%s\n' "${summary[@]}"
exit $status
