#!/usr/bin/env bash
# Secret-taint check (ctgrind style). Builds examples/ctgrind.rs, runs it under valgrind
# memcheck with the key's private components, the blinding pair and every decrypted block
# marked undefined, and summarises with scripts/ctgrind_report.py: per operation the
# secret-dependent branches / addresses found in kae's code and in libcrypto.
# Fails when kae's code has one in any operation (sign PKCS#1 / PSS / X9.31, decrypt
# PKCS#1 with and without implicit rejection, OAEP, TLS premaster), or when the canary
# (a deliberate secret branch) is not seen. libcrypto's findings are reported only.
#
# usage: scripts/ctgrind.sh [--bits N] [--keep] [OPERATION...]
#   --bits N   RSA modulus size (default 2048)
#   --keep     keep the valgrind XML log (path printed)
#   OPERATION  a subset of the operations (see: target/release/examples/ctgrind --list)
# Knobs: VALGRIND (binary), NO_BUILD=1, CTGRIND_TIMEOUT (seconds, default 1200).
set -euo pipefail

usage() { sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; }

cd "$(dirname "$0")/.."
ROOT=$PWD
VALGRIND=${VALGRIND:-valgrind}
BITS=2048
KEEP=0
OPS=()
while (($#)); do
    case $1 in
        -h | --help) usage; exit 0 ;;
        --bits)
            [[ $# -ge 2 && $2 =~ ^[0-9]+$ ]] || { echo "ctgrind.sh: --bits needs a number" >&2; exit 2; }
            BITS=$2
            shift 2
            ;;
        --keep) KEEP=1; shift ;;
        -*) echo "ctgrind.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
        *) OPS+=("$1"); shift ;;
    esac
done

command -v "$VALGRIND" >/dev/null || { echo "ctgrind.sh: valgrind not installed" >&2; exit 1; }
command -v python3 >/dev/null || { echo "ctgrind.sh: python3 not installed" >&2; exit 1; }
[[ $(uname -m) == x86_64 ]] || { echo "ctgrind.sh: the client requests are x86_64 only" >&2; exit 1; }
if [[ "${NO_BUILD:-0}" != 1 ]]; then
    cargo build --release --example ctgrind >&2
fi
BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/examples/ctgrind"
[[ -x $BIN ]] || { echo "ctgrind.sh: $BIN missing" >&2; exit 1; }
if ((${#OPS[@]})); then
    known=$("$BIN" --list)
    for op in "${OPS[@]}"; do
        grep -qx -- "$op" <<<"$known" || { echo "ctgrind.sh: unknown operation $op; known: $(echo $known)" >&2; exit 2; }
    done
    # The canary proves the marking works: always run it.
    grep -qx canary < <(printf '%s\n' "${OPS[@]}") || OPS+=(canary)
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/kae-ctgrind.XXXXXX")
cleanup() { if ((KEEP)); then echo "ctgrind.sh: log kept: $WORK/ctgrind.xml"; else rm -rf "$WORK"; fi; }
trap cleanup EXIT

start=$SECONDS
rc=0
# --error-exitcode is not used: the report decides. Inline frames and 60 callers so each
# report reaches the harness's op_* frame.
timeout -k 10 "${CTGRIND_TIMEOUT:-1200}" "$VALGRIND" --tool=memcheck --track-origins=yes \
    --num-callers=60 --error-limit=no --read-inline-info=yes --leak-check=no \
    --xml=yes --xml-file="$WORK/ctgrind.xml" \
    "$BIN" --bits "$BITS" "${OPS[@]}" >"$WORK/out.txt" 2>&1 || rc=$?
cat "$WORK/out.txt"
if ((rc != 0)) || ! grep -qx 'ctgrind: done' "$WORK/out.txt"; then
    echo "ctgrind.sh: FAIL: the harness failed under valgrind (exit $rc)"
    KEEP=1
    exit 1
fi
echo "ctgrind.sh: valgrind run took $((SECONDS - start))s"
python3 "$ROOT/scripts/ctgrind_report.py" "$WORK/ctgrind.xml" "$ROOT"
