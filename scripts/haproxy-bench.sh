#!/usr/bin/env bash
# usage: scripts/haproxy-bench.sh [--help]   (no other arguments; knobs in the environment)
#
# Full-handshake TLS benchmark of Debian's HAProxy (ssl-mode-async) with OpenSSL's default
# provider vs kae, at several client concurrency levels.
#
# Two HAProxy instances (loopback, one thread each) run side by side for the whole benchmark:
# one with the default provider only, one with kae loaded through OPENSSL_CONF; both have the
# same configuration, ssl-mode-async included, and are pinned to $SERVER_CPUS. kae-press
# (pinned to $CLIENT_CPUS) measures them for every concurrency level and flavour in each mode
# of $PAIRING (scripts/bench-common.sh, press_pair): back to back (default first in odd
# rounds, kae first in even ones) and at the same time, sharing the server CPU. The table
# gives medians and the median of the per-round (paired) ratios. With the default provider nothing pauses. With kae,
# private-key operations inside HAProxy's ASYNC jobs go to kae's queue pool when offload can
# help. The multi-buffer backend batches them even on the one server CPU; on the CPU backend
# kae's `async = auto` computes inline when the process may run on one CPU only (the default
# SERVER_CPUS=0), because CPU workers on the server's own core only take turns with HAProxy's
# thread. Set KAE_ASYNC=yes to force the offload anyway (to measure its cost), or
# SERVER_CPUS=0,1 to give the workers a core (then the client shares it).
#
# Knobs (environment), besides those in scripts/bench-common.sh:
#   CONCURRENCY   kae-press connections, one run per value       (default "1 8 32 128")
#   FLAVOURS      default "tls13"  (also: tls12-rsa tls12-ecdhe)
#   NBTHREAD      HAProxy threads                                (default 1)
#   KEY_BITS      the server's RSA key: 2048 (default) or 4096, anything else is refused. With
#                 FLAVOURS=tls12-rsa every handshake is one RSA decryption with that key:
#                 KEY_BITS=4096 FLAVOURS=tls12-rsa scripts/haproxy-bench.sh. The configurations
#                 in the table, the TSV and the chart carry the size ("tls12-rsa rsa4096 c=8").
#   HAPROXY       haproxy binary                                 (default: from PATH, /usr/sbin)
# Output: the table on stdout, then the paths of the results TSV and the SVG chart.
set -euo pipefail

# shellcheck source=scripts/bench-common.sh
source "$(dirname "$0")/bench-common.sh"
bench_args 29 "$@"
CONCURRENCY=${CONCURRENCY:-1 8 32 128}
FLAVOURS=${FLAVOURS:-tls13}
NBTHREAD=${NBTHREAD:-1}

BENCH_NAME=haproxy-bench
ensure_cmd haproxy haproxy
HAPROXY=${HAPROXY:-$(command -v haproxy || echo /usr/sbin/haproxy)}
trap bench_cleanup EXIT
bench_init haproxy-bench

for provider in default kae; do
PORT[$provider]=$(free_port)
cat >"$WORK/haproxy-$provider.cfg" <<CFG
# Written by scripts/haproxy-bench.sh: one TLS frontend answering every request itself.
global
    # Handshakes run in OpenSSL ASYNC jobs (kae pauses them while its pool computes).
    ssl-mode-async
    # Threads of the one HAProxy process.
    nbthread $NBTHREAD
    # Far above the benchmark's concurrency.
    maxconn 4096
    # No session cache: every connection is a full handshake.
    tune.ssl.cachesize 0

defaults
    mode http
    timeout connect 5s
    timeout client 30s
    timeout server 30s

frontend bench
    # TLS 1.2 (RSA or ECDHE-RSA key exchange) and 1.3; no tickets, so no resumption.
    bind 127.0.0.1:${PORT[$provider]} ssl crt $WORK/server.pem ssl-min-ver TLSv1.2 no-tls-tickets ciphers AES256-GCM-SHA384:AES128-GCM-SHA256:ECDHE-RSA-AES256-GCM-SHA384:ECDHE-RSA-AES128-GCM-SHA256
    # Fixed answer, no backend.
    http-request return status 200 content-type text/plain string "ok\n"
CFG
done
OPENSSL_CONF="$WORK/openssl-kae.cnf" "$HAPROXY" -c -q -f "$WORK/haproxy-kae.cfg" ||
    bench_die "haproxy rejects the generated configuration"

# SIGUSR1: soft stop; HAProxy exits normally, so kae prints its summary.
STOP_SIGNAL=USR1

# start_server PROVIDER -> SRV_PID, SRV_PIDS (the same: one process), SRV_LOG
start_server() {
    SRV_LOG[$1]="$WORK/haproxy-$1.log"
    OPENSSL_CONF="$WORK/openssl-$1.cnf" KAE_LOG=info "${PIN_SERVER[@]}" \
        "$HAPROXY" -db -f "$WORK/haproxy-$1.cfg" </dev/null >/dev/null 2>"${SRV_LOG[$1]}" &
    SRV_PID[$1]=$!
    SRV_PIDS[$1]=${SRV_PID[$1]}
    wait_port "${PORT[$1]}" || { cat "${SRV_LOG[$1]}" >&2; bench_die "haproxy ($1) did not start"; }
}

bench_log "$("$HAPROXY" -v | head -n1), nbthread $NBTHREAD, ssl-mode-async; $(openssl version)"
bench_log "servers on CPU ${SERVER_CPUS}, kae-press on CPU ${CLIENT_CPUS}; $ROUNDS rounds x ${DURATION}s per measurement"
bench_log "flavours: $FLAVOURS; server key RSA-$KEY_BITS; concurrency: $CONCURRENCY; KAE_ASYNC=${KAE_ASYNC:-(unset: auto)}"
bench_run
grep -m1 'summary: private ops' "${SRV_LOG[kae]}" | sed 's/.*summary: /    kae: /' >&2 || true
grep -m1 'compute inline' "${SRV_LOG[kae]}" | sed 's/.*INFO: /    kae: /' >&2 || true

bench_finish "HAProxy ssl-mode-async, nbthread $NBTHREAD: default provider vs kae, full TLS handshakes"
