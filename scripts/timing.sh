#!/usr/bin/env bash
# Statistical timing test, long mode (dudect method: Welch's t-test between a valid and an
# invalid input class, interleaved at random, with cropped percentiles). Times kae's
# padding decoders on the decrypted block: PKCS#1 v1.5 with implicit rejection (valid vs
# invalid padding), OAEP (valid vs invalid), TLS premaster (right vs wrong client
# version), and reports PKCS#1 v1.5 without implicit rejection (whose error is returned by
# design) without a bound. Fails when max |t| >= 4.5 for a bounded decoder.
# The short mode (2*10^5 measurements) is part of `cargo test --release` (tests/ct_timing.rs).
#
# usage: scripts/timing.sh [N]
#   N   measurements per decoder (default 1000000)
# Best run on an otherwise idle machine; noise lowers |t| rather than raising it (the
# classes are interleaved at random), but makes small leaks harder to see.
set -euo pipefail

usage() { sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; }

N=1000000
case $# in
    0) ;;
    1)
        case $1 in
            -h | --help) usage; exit 0 ;;
            -*) echo "timing.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
            *[!0-9]* | '') echo "timing.sh: N must be a number (see --help)" >&2; exit 2 ;;
            *) N=$1 ;;
        esac
        ;;
    *) echo "timing.sh: at most one argument (see --help)" >&2; exit 2 ;;
esac

cd "$(dirname "$0")/.."
start=$SECONDS
KAE_TIMING_N=$N cargo test --release --test ct_timing timing_long -- --ignored --nocapture \
    --test-threads=1
echo "timing.sh: $N measurements per decoder, $((SECONDS - start))s"
