#!/usr/bin/env bash
# Run a few openssl commands that go through kae under valgrind (memcheck) and
# fail if valgrind reports invalid reads/writes, uses of uninitialised values or
# bad frees inside them. Leaks are not checked (openssl's own exit-time
# allocations make that noisy). Needs a built module (scripts/build.sh).
#
# Knobs: OPENSSL (binary), VALGRIND (binary), VG_TIMEOUT (seconds per command,
# default 180), KEEP_LOGS=1 (keep the work directory), NO_BUILD=1.
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD
OPENSSL=${OPENSSL:-openssl}
VALGRIND=${VALGRIND:-valgrind}
VG_TIMEOUT=${VG_TIMEOUT:-180}
VG_ERR=99

command -v "$VALGRIND" >/dev/null || { echo "valgrind.sh: valgrind not installed" >&2; exit 1; }
if [[ "${NO_BUILD:-0}" != 1 ]]; then
    "$ROOT/scripts/build.sh" >/dev/null
fi
MODDIR="${CARGO_TARGET_DIR:-$ROOT/target}/release"
[[ -e "$MODDIR/kae.so" ]] || { echo "valgrind.sh: $MODDIR/kae.so missing" >&2; exit 1; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/kae-valgrind.XXXXXX")
cleanup() { if [[ "${KEEP_LOGS:-0}" == 1 ]]; then echo "logs kept in $WORK"; else rm -rf "$WORK"; fi; }
trap cleanup EXIT
cd "$WORK"
export OPENSSL_CONF=/dev/null   # ignore the caller's config: exactly the providers named below
unset OPENSSL_MODULES

KAE=(-provider-path "$MODDIR" -provider kae -provider default -propquery provider=kae)

# Inputs made without valgrind and without kae.
"$OPENSSL" genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out key.pem 2>/dev/null
"$OPENSSL" pkey -in key.pem -pubout -out pub.pem
printf 'valgrind kae test\n' >msg.txt
"$OPENSSL" dgst -sha256 -binary -out dgst.bin msg.txt
printf 'secret session key 0123456789\n' >plain.txt
"$OPENSSL" pkeyutl -encrypt -pubin -inkey pub.pem -in plain.txt -out oaep.ct \
    -pkeyopt rsa_padding_mode:oaep -pkeyopt rsa_oaep_md:sha256
head -c 256 /dev/zero | tr '\0' '\377' >garbage-full.bin   # >= modulus
printf 'short garbage' >garbage-short.bin
{ printf '\000'; head -c 255 /dev/zero | tr '\0' 'Z'; } >garbage-mid.bin       # < modulus, bad padding

failures=0
n=0
# vg EXPECTED_EXIT NAME openssl-args...   (EXPECTED_EXIT "any": any normal exit)
vg() {
    local expect=$1 name=$2
    shift 2
    n=$((n + 1))
    local log="$WORK/$n-$name.vg.log" rc=0 start=$SECONDS
    timeout -k 10 "$VG_TIMEOUT" "$VALGRIND" -q --error-exitcode=$VG_ERR --leak-check=no \
        --errors-for-leak-kinds=none --log-file="$log" \
        "$OPENSSL" "$@" >"$WORK/$n-$name.out" 2>"$WORK/$n-$name.err" || rc=$?
    local t=$((SECONDS - start))
    if [[ $rc == "$VG_ERR" ]]; then
        echo "FAIL  $name: valgrind reported errors (${t}s)"
        cat "$log"
        failures=$((failures + 1))
    elif [[ $rc == 124 || $rc == 137 ]]; then
        echo "FAIL  $name: timed out after ${VG_TIMEOUT}s"
        failures=$((failures + 1))
    elif [[ $rc -gt 128 || ( $expect != any && $rc != "$expect" ) ]]; then
        echo "FAIL  $name: exit $rc, expected $expect (${t}s)"
        cat "$WORK/$n-$name.err"
        if [[ -s "$log" ]]; then cat "$log"; fi
        failures=$((failures + 1))
    else
        echo "ok    $name (exit $rc, ${t}s)"
    fi
}

vg 0 sign-pkcs1   pkeyutl -sign -inkey key.pem -in dgst.bin -out pkcs1.sig -pkeyopt digest:sha256 "${KAE[@]}"
vg 0 verify-pkcs1 pkeyutl -verify -pubin -inkey pub.pem -in dgst.bin -sigfile pkcs1.sig -pkeyopt digest:sha256 "${KAE[@]}"
vg 0 sign-pss     pkeyutl -sign -inkey key.pem -in dgst.bin -out pss.sig -pkeyopt digest:sha256 \
                  -pkeyopt rsa_padding_mode:pss -pkeyopt rsa_pss_saltlen:digest "${KAE[@]}"
vg 0 verify-pss   pkeyutl -verify -pubin -inkey pub.pem -in dgst.bin -sigfile pss.sig -pkeyopt digest:sha256 \
                  -pkeyopt rsa_padding_mode:pss -pkeyopt rsa_pss_saltlen:auto "${KAE[@]}"
vg 0 decrypt-oaep pkeyutl -decrypt -inkey key.pem -in oaep.ct -out oaep.pt \
                  -pkeyopt rsa_padding_mode:oaep -pkeyopt rsa_oaep_md:sha256 "${KAE[@]}"
vg 1 decrypt-bad-full  pkeyutl -decrypt -inkey key.pem -in garbage-full.bin -out bad1.pt \
                  -pkeyopt rsa_padding_mode:oaep "${KAE[@]}"
vg 1 decrypt-bad-short pkeyutl -decrypt -inkey key.pem -in garbage-short.bin -out bad2.pt \
                  -pkeyopt rsa_padding_mode:oaep -pkeyopt rsa_oaep_md:sha256 "${KAE[@]}"
vg 1 decrypt-bad-short-pkcs1 pkeyutl -decrypt -inkey key.pem -in garbage-short.bin -out bad4.pt \
                  -pkeyopt rsa_padding_mode:pkcs1 "${KAE[@]}"
# PKCS#1 v1.5 with bad padding: an error or an implicit-rejection message are
# both fine; only memory errors count here.
vg any decrypt-bad-pkcs1 pkeyutl -decrypt -inkey key.pem -in garbage-mid.bin -out bad3.pt \
                  -pkeyopt rsa_padding_mode:pkcs1 "${KAE[@]}"

# The results themselves must be right too (checked without valgrind / kae).
if ! cmp -s plain.txt oaep.pt; then
    echo "FAIL  decrypt-oaep produced wrong plaintext"
    failures=$((failures + 1))
fi
if ! "$OPENSSL" pkeyutl -verify -pubin -inkey pub.pem -in dgst.bin -sigfile pkcs1.sig \
        -pkeyopt digest:sha256 >/dev/null 2>&1; then
    echo "FAIL  default provider rejects kae's PKCS#1 signature"
    failures=$((failures + 1))
fi

if ((failures)); then
    echo "valgrind.sh: $failures of $n checks failed"
    KEEP_LOGS=1
    exit 1
fi
echo "valgrind.sh: all $n checks passed"
