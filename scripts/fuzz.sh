#!/usr/bin/env bash
# Run kae's fuzz targets (fuzz/, cargo fuzz + libFuzzer + AddressSanitizer) for SECONDS
# each and print executions and findings per target. Exit status 1 when any target found
# something (crash, panic, failed invariant, ASan report, leak, timeout, OOM).
#
# Needs the nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz`).
# Corpora grow in fuzz/corpus/<target>/, findings land in fuzz/artifacts/<target>/
# (both ignored by git); fuzz/regressions/<target>/ (committed) holds the inputs of past
# findings, run first every time. Replay one finding:
#   cargo +nightly fuzz run -a <target> fuzz/artifacts/<target>/<file>
set -euo pipefail

usage() {
    cat <<'EOF'
usage: scripts/fuzz.sh [--target NAME]... [--list] SECONDS

Builds the fuzz targets (fuzz/, its own cargo project) and runs each for SECONDS seconds
(one libFuzzer process per target, one after the other).

  --target NAME   run only NAME (repeatable); default: every target
  --list          print the target names and exit
  -h, --help      this text

Targets: pkcs1_type1 pkcs1_type2 oaep pss x931 digest_info tls_premaster (padding
decoders against plain reference decoders), params (OSSL_PARAM handling of every
settable/import/get table), key_import (inconsistent key components), differential
(kae vs the default provider, decryption through EVP in two library contexts).

Environment: KAE_FUZZ_KNOWN=skip makes `differential` skip the two input classes of
already-filed differences (ciphertext length != modulus length, output buffer smaller
than the largest possible output) so a run can look for anything else.
FUZZ_ARGS: extra libFuzzer arguments (e.g. "-jobs=2"). KAE_FUZZ_TARGET_DIR: cargo's
target dir for the fuzz build (default fuzz/target).
EOF
}

ALL=(pkcs1_type1 pkcs1_type2 oaep pss x931 digest_info tls_premaster params key_import differential)
TARGETS=()
SECONDS_EACH=
while [[ $# -gt 0 ]]; do
    case "$1" in
        -h|--help) usage; exit 0 ;;
        --list) printf '%s\n' "${ALL[@]}"; exit 0 ;;
        --target)
            [[ $# -ge 2 ]] || { echo "fuzz.sh: --target needs a name" >&2; exit 2; }
            found=0
            for t in "${ALL[@]}"; do [[ "$t" == "$2" ]] && found=1; done
            [[ $found == 1 ]] || { echo "fuzz.sh: unknown target '$2' (see --list)" >&2; exit 2; }
            TARGETS+=("$2"); shift 2 ;;
        -*) echo "fuzz.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
        *)
            [[ -z "$SECONDS_EACH" ]] || { echo "fuzz.sh: unexpected argument '$1' (see --help)" >&2; exit 2; }
            [[ "$1" =~ ^[1-9][0-9]*$ ]] || { echo "fuzz.sh: SECONDS must be a positive integer, got '$1'" >&2; exit 2; }
            SECONDS_EACH=$1; shift ;;
    esac
done
[[ -n "$SECONDS_EACH" ]] || { usage >&2; exit 2; }
[[ ${#TARGETS[@]} -gt 0 ]] || TARGETS=("${ALL[@]}")

cd "$(dirname "$0")/.."
command -v cargo-fuzz >/dev/null || { echo "fuzz.sh: cargo-fuzz not installed (cargo install cargo-fuzz)" >&2; exit 1; }

# -a: debug assertions on (the padding code's debug_assert!s are part of what is checked).
FUZZ=(cargo +nightly fuzz)
# KAE_FUZZ_TARGET_DIR: where the fuzz build goes (.ci/run keeps one across runs).
DIR_ARGS=()
[[ -n ${KAE_FUZZ_TARGET_DIR:-} ]] && DIR_ARGS=(--target-dir "$KAE_FUZZ_TARGET_DIR")
echo "building fuzz targets..." >&2
"${FUZZ[@]}" build -a "${DIR_ARGS[@]}" >/dev/null 2>fuzz/build.log || { cat fuzz/build.log >&2; exit 1; }

LOGDIR=$(mktemp -d "${TMPDIR:-/tmp}/kae-fuzz.XXXXXX")
status=0
printf '%-14s %12s %10s  %s\n' target executions exec/s result
for t in "${TARGETS[@]}"; do
    mkdir -p "fuzz/corpus/$t" "fuzz/artifacts/$t"
    before=$(ls "fuzz/artifacts/$t" | wc -l)
    rc=0
    # shellcheck disable=SC2086
    # fuzz/regressions/<target>/ holds inputs of past findings: they run first, every time.
    seeds=()
    [[ -d "fuzz/regressions/$t" ]] && seeds=("fuzz/regressions/$t")
    "${FUZZ[@]}" run -a "${DIR_ARGS[@]}" "$t" "fuzz/corpus/$t" "${seeds[@]}" -- \
        -max_total_time="$SECONDS_EACH" -timeout=20 -rss_limit_mb=4096 \
        -print_final_stats=1 ${FUZZ_ARGS:-} >"$LOGDIR/$t.log" 2>&1 || rc=$?
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$LOGDIR/$t.log" | tail -1 | grep -o '[0-9]*$' || true)
    rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$LOGDIR/$t.log" | tail -1 | grep -o '[0-9]*$' || true)
    if [[ -z "$execs" ]]; then
        # A crash ends the run before the final stats: take the last status line.
        execs=$(grep -o '^#[0-9]*' "$LOGDIR/$t.log" | tail -1 | tr -d '#' || true)
    fi
    after=$(ls "fuzz/artifacts/$t" | wc -l)
    if [[ $rc -eq 0 && $after -eq $before ]]; then
        result=ok
    else
        status=1
        new=$(ls -t "fuzz/artifacts/$t" | head -1)
        reason=$(grep -m1 -E '^==[0-9]+==ERROR|panicked at|SUMMARY|deadly signal|Timeout|out-of-memory' "$LOGDIR/$t.log" || true)
        result="FINDING (exit $rc) ${new:+fuzz/artifacts/$t/$new} ${reason}"
        cp "$LOGDIR/$t.log" "fuzz/artifacts/$t/last-run.log"
    fi
    printf '%-14s %12s %10s  %s\n' "$t" "${execs:-?}" "${rate:-?}" "$result"
done
rm -rf "$LOGDIR"
exit $status
