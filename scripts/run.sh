#!/usr/bin/env bash
# The main job: build kae, install it on this machine (OpenSSL's MODULESDIR, or
# MODULESDIR=... for a local directory), check that `openssl -provider kae` loads
# it, and print `openssl speed` for the default provider and kae side by side.
#
#   scripts/run.sh                          # install into `openssl version -m`
#   MODULESDIR=$PWD/local PREFIX=$PWD/local scripts/run.sh   # install into ./local (no root)
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install.sh
if [[ -n "${MODULESDIR:-}" ]]; then
    openssl list -providers -provider-path "$MODULESDIR" -provider kae
else
    openssl list -providers -provider kae
fi
NO_BUILD=1 scripts/speed.sh
