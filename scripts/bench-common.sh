# Shared by scripts/nginx-bench.sh and scripts/haproxy-bench.sh (sourced, not run).
#
# Common knobs (environment):
#   ROUNDS        rounds; default and kae alternate who goes first         (default 3)
#   PAIRING       "sequential", "shared-cpu" or both (see press_pair)  (default both)
#   DURATION      seconds per kae-press measurement                    (default 10)
#   WARMUP        requests before each measurement, not recorded       (default 50)
#   FLAVOURS      handshake kinds, from: tls12-rsa (TLS 1.2, RSA key exchange),
#                 tls12-ecdhe (TLS 1.2, ECDHE-RSA), tls13 (TLS 1.3)
#   KEY_BITS      RSA key of the server certificate: 2048 or 4096 (default 2048); the
#                 configurations in the table and the TSV are labelled with it (rsa2048)
#   SERVER_CPUS   taskset CPU list for the server                      (default 0)
#   CLIENT_CPUS   taskset CPU list for kae-press                       (default 1)
#   OUT_DIR       where the results TSV and the SVG chart go (default target/bench)
#   KEEP_LOGS     1: keep the scratch directory (server logs, configs)
#   NO_BUILD      1: skip scripts/build.sh
#   NO_INSTALL    1: never apt-get install a missing server
#   CLIENT_OPENSSL_LIB  a directory with another OpenSSL 3's libssl.so.3 and libcrypto.so.3
#                 for kae-press's `--client openssl` only (the servers keep the system's)
# shellcheck shell=bash disable=SC2034  # PIN_SERVER etc. are used by the sourcing scripts

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ROUNDS=${ROUNDS:-3}
PAIRING=${PAIRING:-sequential shared-cpu}
DURATION=${DURATION:-10}
WARMUP=${WARMUP:-50}
KEY_BITS=${KEY_BITS:-2048}
SERVER_CPUS=${SERVER_CPUS:-0}
CLIENT_CPUS=${CLIENT_CPUS:-1}
OUT_DIR=${OUT_DIR:-${CARGO_TARGET_DIR:-$ROOT/target}/bench}

# bench_usage: the common knobs, for the --help of the sourcing scripts.
bench_usage() { sed -n '3,19p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

# bench_args LAST_HELP_LINE "$@": the bench scripts take no arguments, only --help (their header
# comment down to LAST_HELP_LINE, then the shared variables); anything else is refused.
bench_args() {
    local last=$1 me
    me=$(basename "$0")
    shift
    while (($#)); do
        case $1 in
            -h | --help)
                sed -n "2,${last}p" "$0" | sed 's/^# \{0,1\}//'
                echo
                bench_usage
                exit 0
                ;;
            *) echo "$me: unknown argument '$1' (see --help)" >&2; exit 2 ;;
        esac
    done
    bench_check_knobs "$me"
}

# bench_check_knobs NAME: refuses knob values the benchmark cannot use, before anything runs.
bench_check_knobs() {
    case $KEY_BITS in
        2048 | 4096) ;;
        *) echo "$1: KEY_BITS=$KEY_BITS: the server's RSA key must be 2048 or 4096 bits" >&2; exit 2 ;;
    esac
    if [[ -n "${CLIENT_OPENSSL_LIB:-}" ]]; then
        local lib
        for lib in libssl.so.3 libcrypto.so.3; do
            [[ -d "$CLIENT_OPENSSL_LIB" && -f "$CLIENT_OPENSSL_LIB/$lib" ]] || {
                echo "$1: CLIENT_OPENSSL_LIB=$CLIENT_OPENSSL_LIB: no $lib there (a directory with an OpenSSL 3 build's libraries)" >&2
                exit 2
            }
        done
        CLIENT_OPENSSL_LIB=$(cd "$CLIENT_OPENSSL_LIB" && pwd)
    fi
}

# Run directly instead of sourced: say what it is, run nothing.
if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
    case "${1:-}" in
        -h | --help) echo "bench-common.sh is sourced by scripts/nginx-bench.sh and scripts/haproxy-bench.sh, not run."; bench_usage; exit 0 ;;
        *) echo "bench-common.sh: not a command: run scripts/nginx-bench.sh or scripts/haproxy-bench.sh (see --help)" >&2; exit 2 ;;
    esac
fi

bench_log() { echo "$BENCH_NAME: $*" >&2; }
bench_die() { bench_log "$*"; exit 1; }

# ensure_cmd COMMAND PACKAGE: install PACKAGE with apt-get when COMMAND is missing.
ensure_cmd() {
    local cmd=$1 pkg=$2
    if command -v "$cmd" >/dev/null 2>&1 || [[ -x /usr/sbin/$cmd ]]; then return 0; fi
    [[ "${NO_INSTALL:-0}" == 1 ]] && bench_die "$cmd is not installed (apt-get install $pkg)"
    local sudo=()
    [[ $(id -u) == 0 ]] || sudo=(sudo)
    bench_log "installing $pkg (apt-get)"
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$pkg" >&2 ||
        { "${sudo[@]}" apt-get update -qq >&2 &&
          "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$pkg" >&2; } ||
        bench_die "could not install $pkg"
}

# bench_init NAME: build, locate the module and kae-press, make the scratch dir, the
# certificate and the two OpenSSL configurations, start the results file.
bench_init() {
    BENCH_NAME=$1
    ensure_cmd python3 python3
    ensure_cmd openssl openssl
    if [[ "${NO_BUILD:-0}" != 1 ]]; then
        "$ROOT/scripts/build.sh" >/dev/null || bench_die "build failed"
    fi
    MODDIR="${CARGO_TARGET_DIR:-$ROOT/target}/release"
    MODULE="$MODDIR/libkae.so"
    KAE_PRESS=${KAE_PRESS:-$MODDIR/kae-press}
    [[ -f "$MODULE" ]] || bench_die "$MODULE missing (run scripts/build.sh)"
    [[ -x "$KAE_PRESS" ]] || bench_die "$KAE_PRESS missing (cargo build --release --workspace)"

    PIN_SERVER=() PIN_CLIENT=()
    if command -v taskset >/dev/null 2>&1 && (($(nproc) >= 2)); then
        PIN_SERVER=(taskset -c "$SERVER_CPUS")
        PIN_CLIENT=(taskset -c "$CLIENT_CPUS")
    else
        bench_log "warning: fewer than 2 CPUs or no taskset: server and client are not pinned"
    fi
    if [[ -n "${CLIENT_OPENSSL_LIB:-}" ]]; then
        PIN_CLIENT+=(env "LD_LIBRARY_PATH=$CLIENT_OPENSSL_LIB")
        local version
        version=$(grep -a -o -m1 'OpenSSL 3\.[0-9]*\.[0-9]*[^ ]* [0-9]* [A-Z][a-z]* [0-9]*' \
            "$CLIENT_OPENSSL_LIB/libcrypto.so.3" | head -1)
        bench_log "kae-press's OpenSSL client: ${version:-unknown version} from $CLIENT_OPENSSL_LIB (the servers: the system's)"
    fi

    WORK=$(mktemp -d "${TMPDIR:-/tmp}/kae-$BENCH_NAME.XXXXXX")
    mkdir -p "$OUT_DIR"
    STAMP=$(date +%Y%m%d-%H%M%S)
    RESULTS="$OUT_DIR/$BENCH_NAME-$STAMP.tsv"
    python3 "$ROOT/scripts/bench_table.py" header >"$RESULTS"

    # Server key (RSA, $KEY_BITS bits) and certificate, made with the default provider only. The extension makes
    # it an X.509 v3 certificate, which rustls (kae-press's default client) requires.
    OPENSSL_CONF=/dev/null openssl req -x509 -newkey "rsa:$KEY_BITS" -nodes -days 2 \
        -subj /CN=localhost -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" \
        -keyout "$WORK/server.key" -out "$WORK/server.crt" 2>/dev/null ||
        bench_die "openssl req failed"
    local bits
    bits=$(OPENSSL_CONF=/dev/null openssl pkey -in "$WORK/server.key" -noout -text 2>/dev/null |
        sed -n 's/.*Private-Key: (\([0-9]*\) bit.*/\1/p')
    [[ $bits == "$KEY_BITS" ]] || bench_die "the server key has ${bits:-an unknown number of} bits, not $KEY_BITS"
    cat "$WORK/server.crt" "$WORK/server.key" >"$WORK/server.pem"

    # Default provider only: an empty configuration (the system openssl.cnf is not read).
    printf '# default provider only\n' >"$WORK/openssl-default.cnf"
    # kae + default, kae preferred: the shipped template with the module's absolute path.
    sed "s|^module = kae.so\$|module = $MODULE|" "$ROOT/provider-conf/openssl-nginx.cnf" \
        >"$WORK/openssl-kae.cnf"
    grep -q "^module = $MODULE\$" "$WORK/openssl-kae.cnf" ||
        bench_die "provider-conf/openssl-nginx.cnf has no 'module = kae.so' line to rewrite"
}

# The two servers of the sourcing script, by provider ("default", "kae"): port, main pid, the
# pids whose CPU time counts (comma list), log file. The script defines start_server PROVIDER
# (filling these) and sets STOP_SIGNAL, the signal that makes its server exit normally (so
# kae prints its summary).
declare -A PORT SRV_PID SRV_PIDS SRV_LOG

# stop_server PROVIDER: STOP_SIGNAL, up to 10 s to exit, then SIGKILL.
stop_server() {
    local pid=${SRV_PID[$1]:-}
    [[ -n "$pid" ]] || return 0
    kill "-$STOP_SIGNAL" "$pid" 2>/dev/null || true
    local i
    for ((i = 0; i < 100; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    SRV_PID[$1]=
}
bench_stop_server() { stop_server default || true; stop_server kae || true; }

# bench_run: starts both servers, runs press_pair for every round, flavour and concurrency,
# stops them and checks that kae did the work.
bench_run() {
    start_server default
    start_server kae
    local r flavour c
    for ((r = 1; r <= ROUNDS; r++)); do
        for flavour in $FLAVOURS; do
            for c in $CONCURRENCY; do
                press_pair "$r" "$flavour" "$c"
            done
        done
    done
    bench_stop_server
    check_kae_summary "${SRV_LOG[kae]}"
}

bench_cleanup() {
    bench_stop_server || true
    if [[ -n "${WORK:-}" ]]; then
        if [[ "${KEEP_LOGS:-0}" == 1 ]]; then bench_log "logs kept in $WORK"; else rm -rf "$WORK"; fi
    fi
}

# free_port: an unused loopback port.
free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# wait_port PORT: until something accepts connections on 127.0.0.1:PORT (10 s).
wait_port() {
    local i
    for ((i = 0; i < 200; i++)); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
        sleep 0.05
    done
    return 1
}

# flavour_opts FLAVOUR: kae-press options selecting that kind of handshake.
flavour_opts() {
    case $1 in
    tls12-rsa) echo "--client openssl --tls 1.2 --cipher AES256-GCM-SHA384" ;;
    tls12-ecdhe) echo "--client openssl --tls 1.2 --cipher ECDHE-RSA-AES256-GCM-SHA384" ;;
    tls13) echo "--tls 1.3" ;;
    *) bench_die "unknown flavour $1 (tls12-rsa, tls12-ecdhe, tls13)" ;;
    esac
}

# press_warm FLAVOUR CONNS PORT: $WARMUP handshakes that are not recorded.
press_warm() {
    local -a fopts
    read -r -a fopts <<<"$(flavour_opts "$1")"
    # The client must not pick up kae (or anything) from the caller's OPENSSL_CONF.
    OPENSSL_CONF=/dev/null "${PIN_CLIENT[@]}" "$KAE_PRESS" --json -c "$2" -n "$WARMUP" \
        "${fopts[@]}" "127.0.0.1:$3" >/dev/null 2>&1 || true
}

# press_measure CONFIG PROVIDER ROUND FLAVOUR CONNS PORT SERVER_PIDS: one measured kae-press
# run; appends a row to $RESULTS and prints a one-line summary. Returns 1 on failure.
press_measure() {
    local config=$1 provider=$2 round=$3 flavour=$4 conns=$5 port=$6 pids=$7
    local -a fopts
    read -r -a fopts <<<"$(flavour_opts "$flavour")"
    local out="$WORK/press-${config// /_}-$provider-$round.out"
    if ! OPENSSL_CONF=/dev/null "${PIN_CLIENT[@]}" "$KAE_PRESS" --json -c "$conns" -d "$DURATION" \
        "${fopts[@]}" --server-pid "$pids" "127.0.0.1:$port" >"$out" 2>"$out.err"; then
        bench_log "kae-press failed ($config, $provider, round $round):"
        cat "$out" "$out.err" >&2
        return 1
    fi
    local row
    row=$(python3 "$ROOT/scripts/bench_table.py" row "$config" "$provider" "$round" <"$out") ||
        { bench_log "no JSON line from kae-press"; return 1; }
    # One short append per row: safe when two measurements finish at the same time.
    printf '%s\n' "$row" >>"$RESULTS"
    python3 - "$out" "$config" "$provider" "$round" <<'PY' >&2
import json, sys
d = [json.loads(l) for l in open(sys.argv[1]) if l.startswith('{"kae_press"')][-1]
g = lambda k, f: "-" if d.get(k) is None else format(d[k], f)
print(f"    round {sys.argv[4]} {sys.argv[3]:7} {sys.argv[2]:37} {g('handshakes_per_s', '9.1f')} hs/s"
      f"  p99 {g('p99_ms', '7.2f')} ms  server {g('server_cpu_ms_per_handshake', '.3f')} cpu-ms/hs"
      f"  errors {d.get('errors')}  {d.get('protocol')} {d.get('cipher')}")
PY
}

# press_pair ROUND FLAVOUR CONNS: measures the default and the kae server (ports in PORT[],
# server pids in SRV_PIDS[]) in each mode of $PAIRING:
#   sequential  one after the other, default first in odd rounds and kae first in even ones;
#               each server has the server CPUs to itself (absolute handshakes/s).
#   shared-cpu  both at the same time: the two servers share the server CPUs, so at every
#               moment they run on the same machine (clock, steal time, caches). The ratio of
#               their handshakes/s is then the inverse ratio of their CPU per handshake,
#               without the drift of a shared host between two measurements.
press_pair() {
    local round=$1 flavour=$2 conns=$3 order="default kae" mode p
    ((round % 2 == 1)) || order="kae default"
    for p in $order; do press_warm "$flavour" "$conns" "${PORT[$p]}"; done
    for mode in $PAIRING; do
        case $mode in
        sequential)
            for p in $order; do
                press_measure "$flavour rsa$KEY_BITS c=$conns" "$p" "$round" "$flavour" "$conns" \
                    "${PORT[$p]}" "${SRV_PIDS[$p]}" || exit 1
            done
            ;;
        shared-cpu)
            local -a jobs=()
            for p in $order; do
                press_measure "$flavour rsa$KEY_BITS c=$conns shared-cpu" "$p" "$round" "$flavour" "$conns" \
                    "${PORT[$p]}" "${SRV_PIDS[$p]}" &
                jobs+=($!)
            done
            for p in "${jobs[@]}"; do wait "$p" || exit 1; done
            ;;
        *) bench_die "unknown PAIRING mode $mode (sequential, shared-cpu)" ;;
        esac
    done
}

# check_kae_summary LOGFILE: kae's exit summaries (KAE_LOG=info) must show private ops.
check_kae_summary() {
    local total
    total=$(sed -n 's/.*summary: private ops \([0-9]*\) ok.*/\1/p' "$1" | awk '{s += $1} END {print s + 0}')
    if ((total == 0)); then
        bench_log "the kae server did no private RSA operation through kae: the numbers would not be kae's"
        grep -m3 'kae' "$1" >&2 || true
        exit 1
    fi
    local offloaded
    offloaded=$(sed -n 's/.*summary: private ops [0-9]* ok[^(]*(\([0-9]*\) offloaded).*/\1/p' "$1" |
        awk '{s += $1} END {print s + 0}')
    bench_log "  kae did $total private operations, $offloaded of them offloaded (async jobs) ($(grep -c 'summary: private ops' "$1") process summaries)"
}

# bench_finish TITLE: the table and the chart.
bench_finish() {
    echo
    python3 "$ROOT/scripts/bench_table.py" table default kae "$RESULTS"
    echo "(server key: RSA, $KEY_BITS bits: KEY_BITS=$KEY_BITS)"
    local svg="${RESULTS%.tsv}.svg"
    python3 "$ROOT/scripts/chart.py" --title "$1, RSA-$KEY_BITS server key" --series provider --config "{config}" \
        --metric "handshakes_per_s=handshakes/s" --metric "p99_ms=p99 latency, ms" \
        --metric "server_cpu_ms_per_handshake=server CPU ms per handshake" \
        --ratio default,kae -o "$svg" "$RESULTS" >/dev/null
    echo
    echo "results: $RESULTS"
    echo "chart:   $svg"
}
