#!/usr/bin/env bash
# usage: scripts/nginx-bench.sh [--help]   (no other arguments; knobs in the environment)
#
# Full-handshake TLS benchmark of Debian's nginx with OpenSSL's default provider vs kae.
#
# Two nginx instances run side by side on loopback for the whole benchmark, one with the
# default provider only and one with kae loaded through OPENSSL_CONF, both pinned to
# $SERVER_CPUS with the same number of workers (the same CPU budget). kae-press (pinned to
# $CLIENT_CPUS) measures them in each mode of $PAIRING (scripts/bench-common.sh, press_pair):
# "sequential", one right after the other (default first in odd rounds, kae first in even
# ones; the idle instance costs nothing), and "shared-cpu", both at once, so the two servers
# split the server CPUs at every moment and the ratio is free of the ±10% drift a shared host
# shows between two measurements. The table gives medians over the rounds and the median of
# the per-round (paired) ratios.
#
# Stock nginx does not use OpenSSL's ASYNC mode: kae computes inline in the workers (the
# interesting result is parity and the CPU per handshake). Intel's asynch_mode_nginx with
# `ssl_asynch on;` is the nginx that offloads (docs/OPERATORS.md).
#
# Knobs (environment), besides those in scripts/bench-common.sh:
#   WORKERS       nginx worker_processes for both providers      (default 1: one core)
#   CONCURRENCY   kae-press connections, one or more             (default 16)
#   FLAVOURS      default "tls12-rsa tls12-ecdhe tls13"
#   NGINX         nginx binary                                    (default: from PATH, /usr/sbin)
#   NGINX_CONF    template to start from (default provider-conf/nginx.conf); it must keep the
#                 template's `listen 127.0.0.1:8443 ssl;` and `worker_processes` lines. For
#                 asynch_mode_nginx, use a copy with `ssl_asynch on;` in its http block.
# Output: the table on stdout, then the paths of the results TSV and the SVG chart.
set -euo pipefail

# shellcheck source=scripts/bench-common.sh
source "$(dirname "$0")/bench-common.sh"
bench_args 28 "$@"
WORKERS=${WORKERS:-1}
CONCURRENCY=${CONCURRENCY:-16}
FLAVOURS=${FLAVOURS:-tls12-rsa tls12-ecdhe tls13}

BENCH_NAME=nginx-bench
ensure_cmd nginx nginx
NGINX=${NGINX:-$(command -v nginx || echo /usr/sbin/nginx)}
trap bench_cleanup EXIT
bench_init nginx-bench

# One nginx.conf per provider from the template: its own port, our worker count; each
# instance runs in its own prefix directory (pid file, logs, temp dirs).
for provider in default kae; do
    PORT[$provider]=$(free_port)
    sed -e "s|listen 127.0.0.1:8443 ssl;|listen 127.0.0.1:${PORT[$provider]} ssl;|" \
        -e "s|^worker_processes [0-9]*;|worker_processes $WORKERS;|" \
        -e "s|ssl_certificate server.crt;|ssl_certificate $WORK/server.crt;|" \
        -e "s|ssl_certificate_key server.key;|ssl_certificate_key $WORK/server.key;|" \
        "${NGINX_CONF:-$ROOT/provider-conf/nginx.conf}" >"$WORK/nginx-$provider.conf"
    grep -q "listen 127.0.0.1:${PORT[$provider]} ssl;" "$WORK/nginx-$provider.conf" ||
        bench_die "template: no listen line to rewrite"
    grep -q "^worker_processes $WORKERS;" "$WORK/nginx-$provider.conf" ||
        bench_die "template: no worker_processes line"
done

# SIGQUIT: graceful shutdown of master and workers.
STOP_SIGNAL=QUIT

# start_server PROVIDER -> SRV_PID, SRV_PIDS (master,workers), SRV_LOG
start_server() {
    local provider=$1 prefix="$WORK/run-$1"
    mkdir -p "$prefix"
    SRV_LOG[$provider]="$prefix/error.log"
    OPENSSL_CONF="$WORK/openssl-$provider.cnf" KAE_LOG=info "${PIN_SERVER[@]}" \
        "$NGINX" -p "$prefix/" -c "$WORK/nginx-$provider.conf" -e "$prefix/error.log" \
        </dev/null >/dev/null 2>"$prefix/stderr" &
    SRV_PID[$provider]=$!
    wait_port "${PORT[$provider]}" ||
        { cat "$prefix/error.log" "$prefix/stderr" >&2; bench_die "nginx ($provider) did not start"; }
    local i workers=
    for ((i = 0; i < 100; i++)); do
        workers=$(pgrep -P "${SRV_PID[$provider]}" | paste -sd, -)
        [[ $(tr ',' '\n' <<<"$workers" | grep -c .) -ge $WORKERS ]] && break
        sleep 0.05
    done
    SRV_PIDS[$provider]="${SRV_PID[$provider]},$workers"
}

bench_log "nginx $("$NGINX" -v 2>&1 | sed 's/.*nginx\///'), $WORKERS worker(s) per instance; $(openssl version)"
bench_log "servers on CPU ${SERVER_CPUS}, kae-press on CPU ${CLIENT_CPUS}; $ROUNDS rounds x ${DURATION}s per measurement"
bench_log "flavours: $FLAVOURS; server key RSA-$KEY_BITS; concurrency: $CONCURRENCY"
bench_run

bench_finish "nginx $WORKERS worker(s): default provider vs kae, full TLS handshakes"
