#!/bin/bash
# sim.sh — runs N seeds of the deterministic network simulator (tests/sim/, issue #11) against the
# real sans-I/O core and prints seeds/s and a summary; a violation prints its seed and repro line.
#   scripts/sim.sh N [FROM]        N seeds starting at FROM (default 1)
#   scripts/sim.sh --bench         throughput of one connection vs the link sum at 0.2-400 Gbit/s
# Env: BUILD_DIR (build), SIM_ARGS (extra rerail-simnet flags, e.g. "--max-size 67108864 --keep-going").
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
SIM=$BUILD_DIR/tests/sim/rerail-simnet
[ -x "$SIM" ] || { echo "sim.sh: build first: cmake --build $BUILD_DIR --target rerail-simnet" >&2; exit 2; }
if [ "${1:-}" = "--bench" ]; then exec "$SIM" --bench; fi
N=${1:?usage: scripts/sim.sh N [FROM] | --bench}
FROM=${2:-1}
# shellcheck disable=SC2086
exec "$SIM" --seeds "$N" --from "$FROM" ${SIM_ARGS:-}
