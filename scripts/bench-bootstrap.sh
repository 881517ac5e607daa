#!/usr/bin/env bash
# Exchange-time benchmark of the rootless bootstrap: 8..256 ranks (threads of one process) on
# simulated hosts (loopback addresses 127.78.0.x), Bruck and ring, with the connections each host
# carries next to a star through one root. Bounded (timeout) and light enough for a 2-core machine;
# figures taken on a shared machine are noisy.
# Usage: scripts/bench-bootstrap.sh [--ranks 8,16,...] [--hosts 4] [--repeats 3] [--algorithm both]
#        Env: BUILD_DIR (default build), BENCH_TIMEOUT_S (default 300)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$here/build}
BIN=$BUILD_DIR/bootstrap/rerail-bootstrap
if [ ! -x "$BIN" ]; then
  [ -f "$BUILD_DIR/build.ninja" ] || cmake -S "$here" -B "$BUILD_DIR" -G Ninja >/dev/null
  cmake --build "$BUILD_DIR" --target rerail-bootstrap-cli >/dev/null
fi
# 256 ranks need 2 threads and a few sockets each.
ulimit -n 8192 2>/dev/null || true
echo "# $(date -u +%FT%TZ) $(nproc) cores, $(uname -r); ephemeral range $(tr '\t' '-' < /proc/sys/net/ipv4/ip_local_port_range)"
exec timeout "${BENCH_TIMEOUT_S:-300}" "$BIN" bench --ranks 8,16,32,64,128,256 --hosts 4 --repeats 3 --algorithm both "$@"
