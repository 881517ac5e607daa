#!/usr/bin/env bash
# rerail demo (the README's main-job command). Until the multi-rail failover demo lands, it runs
# the loopback benchmark: rerail vs iperf3 throughput and vs sockperf latency.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
bash scripts/setup.sh
if [ -x scripts/bench-loopback.sh ]; then
  exec bash scripts/bench-loopback.sh
fi
echo "demo: the loopback benchmark is not built yet" >&2
exit 1
