#!/usr/bin/env bash
# Full-handshake TLS benchmark of Debian's nginx with OpenSSL's default provider vs kae.
#
# For each round: start nginx (loopback) with the default provider only, run kae-press
# against it for every flavour and concurrency, stop it; start it again with kae loaded
# through OPENSSL_CONF, run the same, stop it. default and kae alternate for $ROUNDS rounds
# so slow drifts of the machine hit both alike; the table shows medians. The server is
# pinned to $SERVER_CPUS and kae-press to $CLIENT_CPUS, and both providers get the same
# number of workers, so the server has the same CPU budget in both runs.
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
WORKERS=${WORKERS:-1}
CONCURRENCY=${CONCURRENCY:-16}
FLAVOURS=${FLAVOURS:-tls12-rsa tls12-ecdhe tls13}

BENCH_NAME=nginx-bench
ensure_cmd nginx nginx
NGINX=${NGINX:-$(command -v nginx || echo /usr/sbin/nginx)}
trap bench_cleanup EXIT
bench_init nginx-bench

PORT=$(free_port)
# nginx.conf from the template: our port and worker count; it sits next to server.crt/.key.
sed -e "s|listen 127.0.0.1:8443 ssl;|listen 127.0.0.1:$PORT ssl;|" \
    -e "s|^worker_processes [0-9]*;|worker_processes $WORKERS;|" \
    "${NGINX_CONF:-$ROOT/provider-conf/nginx.conf}" >"$WORK/nginx.conf"
grep -q "listen 127.0.0.1:$PORT ssl;" "$WORK/nginx.conf" || bench_die "template: no listen line to rewrite"
grep -q "^worker_processes $WORKERS;" "$WORK/nginx.conf" || bench_die "template: no worker_processes line"

SERVER_PID=
bench_stop_server() {
    [[ -n "$SERVER_PID" ]] || return 0
    kill -QUIT "$SERVER_PID" 2>/dev/null || true
    local i
    for ((i = 0; i < 100; i++)); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
    SERVER_PID=
}

# start_server PROVIDER ROUND -> SERVER_PID, SERVER_PIDS (master,workers), SERVER_LOG
start_server() {
    local provider=$1 round=$2 prefix="$WORK/run-$1-$2"
    mkdir -p "$prefix"
    SERVER_LOG="$prefix/error.log"
    OPENSSL_CONF="$WORK/openssl-$provider.cnf" KAE_LOG=info "${PIN_SERVER[@]}" \
        "$NGINX" -p "$prefix/" -c "$WORK/nginx.conf" -e "$SERVER_LOG" </dev/null >/dev/null 2>"$prefix/stderr" &
    SERVER_PID=$!
    wait_port "$PORT" || { cat "$SERVER_LOG" "$prefix/stderr" >&2; bench_die "nginx did not start"; }
    local i workers=
    for ((i = 0; i < 100; i++)); do
        workers=$(pgrep -P "$SERVER_PID" | paste -sd, -)
        [[ $(tr ',' '\n' <<<"$workers" | grep -c .) -ge $WORKERS ]] && break
        sleep 0.05
    done
    SERVER_PIDS="$SERVER_PID,$workers"
}

bench_log "nginx $("$NGINX" -v 2>&1 | sed 's/.*nginx\///'), $WORKERS worker(s); $(openssl version)"
bench_log "server on CPU ${SERVER_CPUS}, kae-press on CPU ${CLIENT_CPUS}; $ROUNDS rounds x ${DURATION}s per measurement"
bench_log "flavours: $FLAVOURS; concurrency: $CONCURRENCY"
for ((r = 1; r <= ROUNDS; r++)); do
    for provider in default kae; do
        start_server "$provider" "$r"
        for flavour in $FLAVOURS; do
            for c in $CONCURRENCY; do
                press "$flavour c=$c" "$provider" "$r" "$flavour" "$c" "$PORT" "$SERVER_PIDS"
            done
        done
        bench_stop_server
        if [[ $provider == kae ]]; then check_kae_summary "$SERVER_LOG"; fi
    done
done

bench_finish "nginx $WORKERS worker(s): default provider vs kae, full TLS handshakes"
