#!/usr/bin/env bash
# Full-handshake TLS benchmark of Debian's HAProxy (ssl-mode-async) with OpenSSL's default
# provider vs kae, at several client concurrency levels.
#
# For each round: start HAProxy (loopback, one thread) with the default provider only, run
# kae-press at every concurrency level and flavour, stop it; start it again with kae loaded
# through OPENSSL_CONF, run the same, stop it. default and kae alternate for $ROUNDS rounds
# and the table shows medians. The server is pinned to $SERVER_CPUS and kae-press to
# $CLIENT_CPUS. Both runs use the same configuration, ssl-mode-async included: with the
# default provider nothing pauses; with kae each handshake's private-key operation goes to
# kae's queue pool while HAProxy's thread serves other connections. kae's pool threads belong
# to the HAProxy process, so they run on $SERVER_CPUS too and their CPU time counts as
# server CPU.
#
# Knobs (environment), besides those in scripts/bench-common.sh:
#   CONCURRENCY   kae-press connections, one run per value       (default "1 8 32 128")
#   FLAVOURS      default "tls13"  (also: tls12-rsa tls12-ecdhe)
#   NBTHREAD      HAProxy threads                                (default 1)
#   HAPROXY       haproxy binary                                 (default: from PATH, /usr/sbin)
# Output: the table on stdout, then the paths of the results TSV and the SVG chart.
set -euo pipefail

# shellcheck source=scripts/bench-common.sh
source "$(dirname "$0")/bench-common.sh"
CONCURRENCY=${CONCURRENCY:-1 8 32 128}
FLAVOURS=${FLAVOURS:-tls13}
NBTHREAD=${NBTHREAD:-1}

BENCH_NAME=haproxy-bench
ensure_cmd haproxy haproxy
HAPROXY=${HAPROXY:-$(command -v haproxy || echo /usr/sbin/haproxy)}
trap bench_cleanup EXIT
bench_init haproxy-bench

PORT=$(free_port)
cat >"$WORK/haproxy.cfg" <<CFG
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
    bind 127.0.0.1:$PORT ssl crt $WORK/server.pem ssl-min-ver TLSv1.2 no-tls-tickets ciphers AES256-GCM-SHA384:AES128-GCM-SHA256:ECDHE-RSA-AES256-GCM-SHA384:ECDHE-RSA-AES128-GCM-SHA256
    # Fixed answer, no backend.
    http-request return status 200 content-type text/plain string "ok\n"
CFG
OPENSSL_CONF="$WORK/openssl-kae.cnf" "$HAPROXY" -c -q -f "$WORK/haproxy.cfg" ||
    bench_die "haproxy rejects the generated configuration"

SERVER_PID=
bench_stop_server() {
    [[ -n "$SERVER_PID" ]] || return 0
    # SIGUSR1: soft stop; HAProxy exits normally, so kae prints its summary.
    kill -USR1 "$SERVER_PID" 2>/dev/null || true
    local i
    for ((i = 0; i < 100; i++)); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
    SERVER_PID=
}

# start_server PROVIDER ROUND -> SERVER_PID, SERVER_LOG
start_server() {
    SERVER_LOG="$WORK/haproxy-$1-$2.log"
    OPENSSL_CONF="$WORK/openssl-$1.cnf" KAE_LOG=info "${PIN_SERVER[@]}" \
        "$HAPROXY" -db -f "$WORK/haproxy.cfg" </dev/null >/dev/null 2>"$SERVER_LOG" &
    SERVER_PID=$!
    wait_port "$PORT" || { cat "$SERVER_LOG" >&2; bench_die "haproxy did not start"; }
}

bench_log "$("$HAPROXY" -v | head -n1), nbthread $NBTHREAD, ssl-mode-async; $(openssl version)"
bench_log "server on CPU ${SERVER_CPUS}, kae-press on CPU ${CLIENT_CPUS}; $ROUNDS rounds x ${DURATION}s per measurement"
bench_log "flavours: $FLAVOURS; concurrency: $CONCURRENCY"
for ((r = 1; r <= ROUNDS; r++)); do
    for provider in default kae; do
        start_server "$provider" "$r"
        for flavour in $FLAVOURS; do
            for c in $CONCURRENCY; do
                press "$flavour c=$c" "$provider" "$r" "$flavour" "$c" "$PORT" "$SERVER_PID"
            done
        done
        bench_stop_server
        if [[ $provider == kae ]]; then
            check_kae_summary "$SERVER_LOG"
            grep -m1 'summary: private ops' "$SERVER_LOG" | sed 's/.*summary: /    kae: /' >&2 || true
        fi
    done
done

bench_finish "HAProxy ssl-mode-async, nbthread $NBTHREAD: default provider vs kae, full TLS handshakes"
