#!/usr/bin/env bash
# Run openssl commands that go through kae under valgrind (memcheck) and fail if
# valgrind reports invalid reads/writes, uses of uninitialised values, bad frees
# or (where leak checking is on) definitely lost memory inside them:
#   - synchronous pkeyutl sign/verify/encrypt/decrypt, good and bad input;
#   - `speed -async_jobs` with KAE_ASYNC=yes: pool worker threads, ASYNC jobs
#     that pause and are woken through kae's eventfd;
#   - `speed -multi 2 -async_jobs`: forked children that each start their own
#     pool (valgrind follows fork; one log per process);
#   - the HPRE backend against the test-only UADK simulator (hpre-sim): a sync
#     signature and `speed -async_jobs` with every 7th completion lost (failed
#     over to the CPU after a timeout; the device buffers freed at teardown);
#   - the multi-buffer backend on its portable lanes (KAE_MB_ENGINE=portable):
#     `speed -async_jobs 8` through its queues and idle-priority workers;
#   - a TLS server (s_server -async, kae preferred by configuration) doing a
#     TLS 1.2 RSA key exchange and a TLS 1.3 handshake (RSA-PSS signature) for
#     a client that uses the default provider only.
# Leak checking (--leak-check=full, definite leaks are errors) is on for every
# command. scripts/valgrind.supp holds the (narrow, commented) suppressions.
# Every command runs with KAE_LOG=info and must show kae's exit summary with
# the work it was meant to do, so a run in which kae did not load, or did not
# offload, fails instead of passing without having checked anything.
# Needs the built module (scripts/build.sh) and its test build (scripts/build.sh
# --test-knobs, for the portable multi-buffer engine). About 2-3 minutes.
#
# usage: scripts/valgrind.sh [--help]   (no other arguments)
# Knobs: OPENSSL (binary), VALGRIND (binary), VG_TIMEOUT (seconds per command,
# default 180), KEEP_LOGS=1 (keep the work directory), NO_BUILD=1.
set -euo pipefail

usage() { sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; }
while (($#)); do
    case $1 in
        -h | --help) usage; exit 0 ;;
        *) echo "valgrind.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done

cd "$(dirname "$0")/.."
ROOT=$PWD
OPENSSL=${OPENSSL:-openssl}
VALGRIND=${VALGRIND:-valgrind}
VG_TIMEOUT=${VG_TIMEOUT:-180}
VG_ERR=99

command -v "$VALGRIND" >/dev/null || { echo "valgrind.sh: valgrind not installed" >&2; exit 1; }
if [[ "${NO_BUILD:-0}" != 1 ]]; then
    "$ROOT/scripts/build.sh" >/dev/null
    "$ROOT/scripts/build.sh" --test-knobs >/dev/null
fi
MODDIR="${CARGO_TARGET_DIR:-$ROOT/target}/release"
[[ -e "$MODDIR/kae.so" ]] || { echo "valgrind.sh: $MODDIR/kae.so missing" >&2; exit 1; }
KNOBS_DIR="${CARGO_TARGET_DIR:-$ROOT/target}/test-knobs/release"
[[ -e "$KNOBS_DIR/kae.so" ]] || {
    echo "valgrind.sh: $KNOBS_DIR/kae.so missing (scripts/build.sh --test-knobs)" >&2
    exit 1
}

WORK=$(mktemp -d "${TMPDIR:-/tmp}/kae-valgrind.XXXXXX")
cleanup() { if [[ "${KEEP_LOGS:-0}" == 1 ]]; then echo "logs kept in $WORK"; else rm -rf "$WORK"; fi; }
trap cleanup EXIT
cd "$WORK"
export OPENSSL_CONF=/dev/null   # ignore the caller's config: exactly the providers named below
unset OPENSSL_MODULES
# Only the kae settings this script sets: none inherited from the caller.
for v in $(compgen -e | grep '^KAE_' || true); do unset "$v"; done
export KAE_LOG=info             # kae's exit summary on stderr (checked below)

KAE=(-provider-path "$MODDIR" -provider kae -provider default -propquery provider=kae)
SPEED=(speed -provider-path "$MODDIR" -provider kae -provider default -propquery provider=kae)

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
"$OPENSSL" req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=kae-valgrind \
    -keyout srv.key -out srv.pem 2>/dev/null
# kae preferred for every fetch, as provider-conf/openssl-prefer-kae.cnf does.
cat >prefer-kae.cnf <<EOF
openssl_conf = openssl_init
[openssl_init]
providers = provider_sect
alg_section = algorithm_sect
[provider_sect]
kae = kae_sect
default = default_sect
[kae_sect]
module = $MODDIR/kae.so
activate = 1
load-default = no
[default_sect]
activate = 1
[algorithm_sect]
default_properties = ?provider=kae
EOF

failures=0
n=0
# vg EXPECTED_EXIT NAME openssl-args...   (EXPECTED_EXIT "any": any normal exit)
# Runs openssl under memcheck with leak checking; one valgrind log per process
# (forked children included). Sets LAST_ERR to the command's stderr file.
vg() {
    local expect=$1 name=$2
    shift 2
    n=$((n + 1))
    local base="$WORK/$n-$name" rc=0 start=$SECONDS
    LAST_ERR="$base.err"
    timeout -k 10 "$VG_TIMEOUT" "$VALGRIND" -q --error-exitcode=$VG_ERR \
        --leak-check=full --show-leak-kinds=definite --errors-for-leak-kinds=definite \
        --fair-sched=yes --suppressions="$ROOT/scripts/valgrind.supp" --log-file="$base.vg.%p.log" \
        "$OPENSSL" "$@" >"$base.out" 2>"$base.err" || rc=$?
    local t=$((SECONDS - start))
    # A forked child's errors do not reach the parent's exit code: read every log.
    local vglog
    vglog=$(cat "$base".vg.*.log 2>/dev/null || true)
    if [[ $rc == "$VG_ERR" || -n "$vglog" ]]; then
        echo "FAIL  $name: valgrind reported errors (exit $rc, ${t}s)"
        printf '%s\n' "$vglog"
        failures=$((failures + 1))
    elif [[ $rc == 124 || $rc == 137 ]]; then
        echo "FAIL  $name: timed out after ${VG_TIMEOUT}s"
        failures=$((failures + 1))
    elif [[ $rc -gt 128 || ( $expect != any && $rc != "$expect" ) ]]; then
        echo "FAIL  $name: exit $rc, expected $expect (${t}s)"
        cat "$base.err"
        failures=$((failures + 1))
    else
        echo "ok    $name (exit $rc, ${t}s)"
    fi
}

# tls_server: s_server -async (KAE_ASYNC=yes, kae preferred by prefer-kae.cnf)
# under memcheck serves two handshakes: TLS 1.2 with RSA key exchange (kae
# decrypts the premaster) and TLS 1.3 (kae makes an RSA-PSS signature). The
# clients run without valgrind and with the default provider only, so they
# also verify kae's signature.
tls_server() {
    n=$((n + 1))
    local name=tls-server base="$WORK/$n-tls-server" rc=0 start=$SECONDS port="" i
    LAST_ERR="$base.err"
    OPENSSL_CONF="$WORK/prefer-kae.cnf" KAE_ASYNC=yes \
        timeout -k 10 "$VG_TIMEOUT" "$VALGRIND" -q --error-exitcode=$VG_ERR \
        --leak-check=full --show-leak-kinds=definite --errors-for-leak-kinds=definite \
        --fair-sched=yes --suppressions="$ROOT/scripts/valgrind.supp" --log-file="$base.vg.%p.log" \
        "$OPENSSL" s_server -accept 127.0.0.1:0 -cert srv.pem -key srv.key -async \
        -naccept 2 -www >"$base.out" 2>"$base.err" &
    local pid=$!
    for ((i = 0; i < 1200; i++)); do
        port=$(sed -n 's/^ACCEPT .*:\([0-9][0-9]*\)$/\1/p' "$base.out" | head -n 1)
        [[ -n $port ]] && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if [[ -z $port ]]; then
        echo "FAIL  $name: server did not start"
        cat "$base.err"
        failures=$((failures + 1))
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
        return
    fi
    local what opts proto
    for what in "tls12-rsa-kx|-tls1_2 -cipher AES256-GCM-SHA384|TLSv1.2" "tls13|-tls1_3|TLSv1.3"; do
        IFS='|' read -r what opts proto <<<"$what"
        # shellcheck disable=SC2086 # opts is a list of options
        if ! printf 'GET / HTTP/1.0\r\n\r\n' | timeout 120 "$OPENSSL" s_client \
                -connect "127.0.0.1:$port" -brief -CAfile srv.pem -verify_return_error \
                -ign_eof $opts >"$base.$what.out" 2>"$base.$what.err" ||
            ! grep -q "Protocol version: $proto" "$base.$what.err" ||
            ! grep -q 'HTTP/1.0 200 ok' "$base.$what.out"; then
            echo "FAIL  $name: $what handshake failed"
            cat "$base.$what.err"
            failures=$((failures + 1))
        fi
    done
    wait "$pid" || rc=$?
    local t=$((SECONDS - start)) vglog
    vglog=$(cat "$base".vg.*.log 2>/dev/null || true)
    if [[ $rc == "$VG_ERR" || -n "$vglog" ]]; then
        echo "FAIL  $name: valgrind reported errors (exit $rc, ${t}s)"
        printf '%s\n' "$vglog"
        failures=$((failures + 1))
    elif [[ $rc != 0 ]]; then
        echo "FAIL  $name: server exit $rc (${t}s)"
        cat "$base.err"
        failures=$((failures + 1))
    else
        echo "ok    $name (2 handshakes, ${t}s)"
    fi
}

# summary_sum FILE FIELD: sum of one number over kae's summary lines in FILE
# (FIELD: private, offloaded, pauses, lines).
summary_sum() {
    local file=$1 field=$2
    { grep -h 'summary: private ops ' "$file" 2>/dev/null || true; } | awk -v f="$field" '
        {
            for (i = 1; i <= NF; i++) {
                if ($i == "private" && $(i+1) == "ops") { priv += $(i+2) }
                if ($i == "async" && $(i+1) == "pauses") { p = $(i+2); sub(/,/, "", p); pauses += p }
                if ($i == "MB" && $(i+1) == "batches") { b = $(i+2); sub(/,/, "", b); batches += b }
            }
            if (match($0, /private ops [0-9]+ ok \/ [0-9]+ failed \([0-9]+ offloaded/)) {
                s = substr($0, RSTART, RLENGTH); sub(/.*\(/, "", s); off += s + 0
            }
            lines++
        }
        END {
            if (f == "private") print priv + 0
            else if (f == "offloaded") print off + 0
            else if (f == "pauses") print pauses + 0
            else if (f == "batches") print batches + 0
            else print lines + 0
        }'
}

# need NAME WHAT FIELD MIN: kae's summaries of the last command show at least MIN
# for FIELD (also fails when kae printed no summary, i.e. was not loaded).
need() {
    local name=$1 what=$2 field=$3 min=$4 got
    got=$(summary_sum "$LAST_ERR" "$field")
    if ((got < min)); then
        echo "FAIL  $name: $what: $got, expected at least $min (kae summaries:)"
        grep -h 'summary:' "$LAST_ERR" || echo "      (none: kae not loaded?)"
        failures=$((failures + 1))
    fi
}

vg 0 sign-pkcs1   pkeyutl -sign -inkey key.pem -in dgst.bin -out pkcs1.sig -pkeyopt digest:sha256 "${KAE[@]}"
need sign-pkcs1 "private ops done by kae" private 1
vg 0 verify-pkcs1 pkeyutl -verify -pubin -inkey pub.pem -in dgst.bin -sigfile pkcs1.sig -pkeyopt digest:sha256 "${KAE[@]}"
need verify-pkcs1 "kae summary lines (kae loaded)" lines 1
vg 0 sign-pss     pkeyutl -sign -inkey key.pem -in dgst.bin -out pss.sig -pkeyopt digest:sha256 \
                  -pkeyopt rsa_padding_mode:pss -pkeyopt rsa_pss_saltlen:digest "${KAE[@]}"
need sign-pss "private ops done by kae" private 1
vg 0 verify-pss   pkeyutl -verify -pubin -inkey pub.pem -in dgst.bin -sigfile pss.sig -pkeyopt digest:sha256 \
                  -pkeyopt rsa_padding_mode:pss -pkeyopt rsa_pss_saltlen:auto "${KAE[@]}"
need verify-pss "kae summary lines (kae loaded)" lines 1
vg 0 decrypt-oaep pkeyutl -decrypt -inkey key.pem -in oaep.ct -out oaep.pt \
                  -pkeyopt rsa_padding_mode:oaep -pkeyopt rsa_oaep_md:sha256 "${KAE[@]}"
need decrypt-oaep "private ops done by kae" private 1
vg 1 decrypt-bad-full  pkeyutl -decrypt -inkey key.pem -in garbage-full.bin -out bad1.pt \
                  -pkeyopt rsa_padding_mode:oaep "${KAE[@]}"
need decrypt-bad-full "kae summary lines (kae loaded)" lines 1
vg 1 decrypt-bad-short pkeyutl -decrypt -inkey key.pem -in garbage-short.bin -out bad2.pt \
                  -pkeyopt rsa_padding_mode:oaep -pkeyopt rsa_oaep_md:sha256 "${KAE[@]}"
need decrypt-bad-short "kae summary lines (kae loaded)" lines 1
# A ciphertext shorter than the modulus: refused, or (read as a number with
# leading zeros, as the default provider does) answered by implicit rejection.
vg any decrypt-bad-short-pkcs1 pkeyutl -decrypt -inkey key.pem -in garbage-short.bin -out bad4.pt \
                  -pkeyopt rsa_padding_mode:pkcs1 "${KAE[@]}"
need decrypt-bad-short-pkcs1 "kae summary lines (kae loaded)" lines 1
# PKCS#1 v1.5 with bad padding: an error or an implicit-rejection message are
# both fine; only memory errors count here.
vg any decrypt-bad-pkcs1 pkeyutl -decrypt -inkey key.pem -in garbage-mid.bin -out bad3.pt \
                  -pkeyopt rsa_padding_mode:pkcs1 "${KAE[@]}"
need decrypt-bad-pkcs1 "kae summary lines (kae loaded)" lines 1

# ---- ASYNC jobs offloaded to the pool threads (KAE_ASYNC=yes: on any CPU count) ----
KAE_ASYNC=yes vg 0 speed-async "${SPEED[@]}" -async_jobs 8 -seconds 2 rsa2048
need speed-async "private ops offloaded to the pool" offloaded 1
need speed-async "async pauses (woken through the eventfd)" pauses 1

# ---- fork: speed -multi forks two children, each starts its own pool ----
KAE_ASYNC=yes vg 0 speed-fork "${SPEED[@]}" -multi 2 -async_jobs 4 -seconds 1 rsa2048
need speed-fork "summary lines (parent + 2 children)" lines 3
need speed-fork "private ops offloaded in the children" offloaded 2

# ---- HPRE backend against the UADK simulator (test-only hpre-sim): buffers handed to the
# "device" live until its callback, requests that never complete are failed over to the CPU
# and their buffers freed at teardown, sessions are released with UADK ----
SIM="${CARGO_TARGET_DIR:-$ROOT/target}/release/libkae_hpre_sim.so"
if [[ -f $SIM ]]; then
    mkdir -p sysfs/hisi_hpre-0/device
    printf 'rsa\n' >sysfs/hisi_hpre-0/algorithms
    echo 0 >sysfs/hisi_hpre-0/isolate
    echo 1 >sysfs/hisi_hpre-0/flags
    echo 8 >sysfs/hisi_hpre-0/available_instances
    echo 0 >sysfs/hisi_hpre-0/device/numa_node
    hpre() {
        KAE_BACKEND=hpre KAE_STRICT=yes KAE_ASYNC=yes KAE_UADK_LIB="$SIM" KAE_UADK_CRYPTO_LIB="$SIM" \
            KAE_HPRE_SYSFS="$WORK/sysfs" KAE_SIM=1 KAE_SIM_LATENCY_US=200 "$@"
    }
    hpre vg 0 hpre-sign pkeyutl -sign -inkey key.pem -in dgst.bin -out hpre.sig -pkeyopt digest:sha256 "${KAE[@]}"
    need hpre-sign "private ops on HPRE (simulator)" offloaded 1
    if ! cmp -s pkcs1.sig hpre.sig; then
        echo "FAIL  hpre-sign: the signature differs from the CPU path's"
        failures=$((failures + 1))
    fi
    # Every 7th completion lost: failed over to the CPU after 100 ms, its buffers kept until
    # UADK is torn down at exit.
    KAE_SIM_DROP_EVERY=7 KAE_HPRE_TIMEOUT_MS=100 hpre vg 0 hpre-speed-async "${SPEED[@]}" \
        -async_jobs 8 -seconds 2 rsa2048
    need hpre-speed-async "private ops offloaded to HPRE (simulator)" offloaded 1
else
    echo "skip  hpre-*: $SIM not built (cargo build --release --workspace)"
fi

# ---- Multi-buffer backend on its portable lanes (valgrind has no AVX-512; only the test
# build of the module honours KAE_MB_ENGINE=portable):
# blinded requests through its queues and idle-priority workers, and the caller's check.
# valgrind runs one thread at a time and switches at each wake-up, so the worker finds one
# request queued each time and computes it with the scalar code: the kernel and lane buffers
# are memchecked by tests/mb_kernel.rs (its taint run), not here.
KAE_BACKEND=mb KAE_MB_ENGINE=portable KAE_ASYNC=yes vg 0 mb-speed-async \
    speed -provider-path "$KNOBS_DIR" -provider kae -provider default -propquery provider=kae \
    -async_jobs 8 -seconds 2 rsa2048
need mb-speed-async "private ops offloaded to the multi-buffer backend" offloaded 1
echo "      mb-speed-async: $(summary_sum "$LAST_ERR" batches) kernel calls under valgrind"

# ---- TLS: s_server -async under valgrind, clients without valgrind or kae ----
tls_server
need tls-server "private ops (one per handshake)" private 2
need tls-server "private ops offloaded" offloaded 1

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
if ! "$OPENSSL" pkeyutl -verify -pubin -inkey pub.pem -in dgst.bin -sigfile pss.sig \
        -pkeyopt digest:sha256 -pkeyopt rsa_padding_mode:pss -pkeyopt rsa_pss_saltlen:digest \
        >/dev/null 2>&1; then
    echo "FAIL  default provider rejects kae's PSS signature"
    failures=$((failures + 1))
fi

if ((failures)); then
    echo "valgrind.sh: $failures failed checks over $n commands"
    KEEP_LOGS=1
    exit 1
fi
echo "valgrind.sh: all $n checks passed"
