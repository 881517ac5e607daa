#!/usr/bin/env bash
# rerail loopback benchmark (not a test): in one run, between two processes on 127.0.0.1,
#   * throughput of 64 MiB messages through the rerail net plugin (window of 8 like NCCL,
#     RERAIL_TCP_STREAMS=S) vs iperf3 -P S                               target ratio >= 0.9
#   * small-message latency, rerail 8-byte ping-pong vs sockperf ping-pong (TCP; sockperf's smallest
#     message is 14 bytes), both as one-way latency = round trip / 2      target ratio <= 1.5
# Usage: scripts/bench-loopback.sh [S]      Env: BUILD_DIR (build), BENCH_SECONDS (5), STREAMS (2)
# Every process it starts is stopped on exit (trap). Figures are noisy on a shared CPU.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
BUILD_DIR=${BUILD_DIR:-build}
S=${1:-${STREAMS:-2}}
T=${BENCH_SECONDS:-5}
bench="$BUILD_DIR/tools/rerail-netbench"
for tool in iperf3 sockperf python3; do
  command -v "$tool" >/dev/null || { echo "bench: $tool is missing (scripts/setup.sh installs it)" >&2; exit 1; }
done
[ -x "$bench" ] || cmake --build "$BUILD_DIR" --target rerail-netbench nccl-net-rerail

pids=()
work=$(mktemp -d /tmp/rerail-bench.XXXXXX)
cleanup() {
  for p in "${pids[@]}"; do
    kill "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
  rm -rf "$work"
}
trap cleanup EXIT INT TERM

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_listen() {  # port
  for _ in $(seq 100); do
    ss -ltnH "sport = :$1" 2>/dev/null | grep -q . && return 0
    sleep 0.05
  done
  echo "bench: nothing listens on 127.0.0.1:$1" >&2
  return 1
}

echo "# rerail loopback benchmark: streams S=$S, ${T}s per reference tool, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"

# --- rerail (two processes: rerail-netbench and the peer it spawns) -------------------------------
RERAIL_TCP_IFNAME=lo RERAIL_TCP_STREAMS=$S "$bench" --size $((64 << 20)) --iters 64 --window 8 \
  --lat-size 8 --lat-iters 5000 | tee "$work/rerail.txt"
result=$(grep '^RESULT' "$work/rerail.txt")
rr_bw=$(sed -n 's/.*bw_GBps=\([0-9.]*\).*/\1/p' <<<"$result")
rr_lat=$(sed -n 's/.* lat_us=\([0-9.]*\).*/\1/p' <<<"$result")
rr_p50=$(sed -n 's/.*lat_p50_us=\([0-9.]*\).*/\1/p' <<<"$result")

# --- iperf3 -P S -----------------------------------------------------------------------------------
port=$(free_port)
iperf3 -s -B 127.0.0.1 -p "$port" -1 >"$work/iperf3-server.txt" 2>&1 &
pids+=($!)
wait_listen "$port"
iperf3 -c 127.0.0.1 -p "$port" -P "$S" -t "$T" -J >"$work/iperf3.json"
ip_bw=$(python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print("%.4f" % (j["end"]["sum_received"]["bits_per_second"] / 8e9))' "$work/iperf3.json")
echo "iperf3 -P $S: $ip_bw GB/s"

# --- sockperf ping-pong (TCP) ----------------------------------------------------------------------
port=$(free_port)
sockperf server --tcp -i 127.0.0.1 -p "$port" >"$work/sockperf-server.txt" 2>&1 &
pids+=($!)
wait_listen "$port"
sockperf ping-pong --tcp -i 127.0.0.1 -p "$port" -t "$T" -m 14 >"$work/sockperf.txt" 2>&1
sp_lat=$(sed -n 's/.*Summary: Latency is \([0-9.]*\) usec.*/\1/p' "$work/sockperf.txt" | tail -n 1)
sp_p50=$(sed -n 's/.*percentile 50.000 = *\([0-9.]*\).*/\1/p' "$work/sockperf.txt" | tail -n 1)
echo "sockperf ping-pong 14 B: one-way mean $sp_lat us, median $sp_p50 us"

python3 - "$rr_bw" "$ip_bw" "$rr_lat" "$sp_lat" "$rr_p50" "$sp_p50" "$S" <<'PY'
import sys
rr_bw, ip_bw, rr_lat, sp_lat, rr_p50, sp_p50 = map(float, sys.argv[1:7])
s = sys.argv[7]
bw_ratio = rr_bw / ip_bw if ip_bw else float("nan")
lat_ratio = rr_lat / sp_lat if sp_lat else float("nan")
p50_ratio = rr_p50 / sp_p50 if sp_p50 else float("nan")
print()
print(f"{'':28s}{'rerail':>12s}{'reference':>12s}{'ratio':>9s}  target")
print(f"{'throughput 64 MiB, GB/s':28s}{rr_bw:12.3f}{ip_bw:12.3f}{bw_ratio:9.2f}  >= 0.9 (iperf3 -P {s}) {'MET' if bw_ratio >= 0.9 else 'MISSED'}")
print(f"{'latency mean one-way, us':28s}{rr_lat:12.2f}{sp_lat:12.2f}{lat_ratio:9.2f}  <= 1.5 (sockperf) {'MET' if lat_ratio <= 1.5 else 'MISSED'}")
print(f"{'latency median one-way, us':28s}{rr_p50:12.2f}{sp_p50:12.2f}{p50_ratio:9.2f}  <= 1.5 (sockperf) {'MET' if p50_ratio <= 1.5 else 'MISSED'}")
PY
