#!/usr/bin/env bash
# The main job: build kae, install it on this machine (OpenSSL's MODULESDIR, or
# MODULESDIR=... for a directory of your own), check that `openssl -provider kae` loads
# the installed module, and print `openssl speed` for the default provider and the
# installed kae side by side (scripts/speed.sh --module <installed kae.so>).
#
# usage: scripts/run.sh [--help]
#   scripts/run.sh                                                 # install into `openssl version -m`
#   MODULESDIR=$PWD/local/lib PREFIX=$PWD/local scripts/run.sh     # install into ./local (no root)
# Environment: those of scripts/install.sh (PREFIX, MODULESDIR, DESTDIR is not supported
# here) and of scripts/speed.sh (SECONDS_PER_RUN, ROUNDS, ALGS, ...).
set -euo pipefail

usage() { sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; }
while (($#)); do
    case $1 in
        -h | --help) usage; exit 0 ;;
        *) echo "run.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
[[ -z "${DESTDIR:-}" ]] || { echo "run.sh: DESTDIR is for staging (scripts/install.sh); it cannot be measured here" >&2; exit 2; }

# A relative MODULESDIR or PREFIX means: from where run.sh was started.
if [[ -n "${MODULESDIR:-}" && $MODULESDIR != /* ]]; then export MODULESDIR="$PWD/$MODULESDIR"; fi
if [[ -n "${PREFIX:-}" && $PREFIX != /* ]]; then export PREFIX="$PWD/$PREFIX"; fi
cd "$(dirname "$0")/.."

scripts/install.sh
dir=${MODULESDIR:-$(openssl version -m | sed -n 's/^MODULESDIR: *"\(.*\)"$/\1/p')}
openssl list -providers -provider-path "$dir" -provider kae
NO_BUILD=1 scripts/speed.sh --module "$dir/kae.so"
