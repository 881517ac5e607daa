#!/usr/bin/env bash
# rerail loopback benchmark (not a test): in one run, between two processes on 127.0.0.1,
#   * throughput of 64 MiB messages through the rerail net plugin (window of 8 like NCCL) with
#     RERAIL_TCP_STREAMS=1 and 4, vs iperf3 -P 1 and -P 4; the best of each side is compared
#                                                                         target ratio >= 0.95
#   * 8-byte ping-pong latency (round trip / 2) vs a raw TCP ping-pong whose ends spin on non-blocking
#     sockets (`rerail-perf netbench --only raw`: no plugin, no framing)  target ratio <= 1.2
#     sockperf ping-pong (TCP, 14 bytes, its smallest) is printed beside it for reference
#   * rerail's latency again with RERAIL_TCP_DUPLEX=0 (one connection per direction, as NCCL opens
#     them; the default pairs them so that replies ride the requests' connection, net_plugin/duplex.h)
#   * for reference, raw TCP (bench/tcp-stream, no plugin) moving the same 64 MiB messages between the
#     same footprint of buffers as rerail's throughput run (8 per side): iperf3 copies from and to one
#     cache-resident block, rerail from and to 512 MiB per side; this line shows what the kernel path
#     reaches with rerail's buffers (best of blocking and spinning)
# rerail and the reference tools alternate for BENCH_ROUNDS rounds and the medians are compared, so a
# load change on a shared host hits both sides alike. Figures are only good on an idle machine.
# Usage: scripts/bench-loopback.sh
# Besides the ratio of the medians, the median of the per-round ratios is printed for latency: each
# round measures rerail and the raw reference back to back, so a host whose speed drifts between
# rounds (a shared VM: the raw reference alone varied 8.2-12.7 us per round trip within minutes)
# moves both sides of a round's ratio alike.
# Env: BUILD_DIR (build), STREAMS ("1 4": the stream counts tried on both sides), BENCH_ROUNDS (3),
#      BENCH_SECONDS (3, per reference-tool run), LAT_ITERS (20000 round trips per latency figure),
#      BENCH_ONLY (lat: the latency figures only, for more rounds in the same time)
# Every process it starts is stopped on exit (trap).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
BUILD_DIR=${BUILD_DIR:-build}
STREAMS=${STREAMS:-1 4}
T=${BENCH_SECONDS:-3}
LAT_ITERS=${LAT_ITERS:-20000}
R=${BENCH_ROUNDS:-3}
ONLY=${BENCH_ONLY:-}
case "$ONLY" in ""|lat) ;; *) echo "bench: BENCH_ONLY must be empty or lat, not '$ONLY'" >&2; exit 2 ;; esac
perf="$BUILD_DIR/tools/rerail-perf/rerail-perf"
for tool in iperf3 sockperf python3 ss; do
  command -v "$tool" >/dev/null || { echo "bench: $tool is missing (scripts/setup.sh installs it)" >&2; exit 1; }
done
stream="$BUILD_DIR/bench/tcp-stream"
[ -x "$perf" ] && [ -x "$stream" ] || cmake --build "$BUILD_DIR" --target rerail-perf nccl-net-rerail tcp-stream

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
field() { sed -n "s/\(.*[ ]\|^\)$1=\([0-9.]*\).*/\2/p" "$2"; }

echo "# rerail loopback benchmark: streams {$STREAMS}, $R alternating rounds, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
sp_port=$(free_port)
sockperf server --tcp -i 127.0.0.1 -p "$sp_port" >"$work/sockperf-server.txt" 2>&1 &
pids+=($!)
wait_listen "$sp_port"

: >"$work/rows"
for round in $(seq "$R"); do
  rr_best=0 ip_best=0 rr_desc="" ip_desc="" raw_bw=0
  for S in $STREAMS; do
    [ "$ONLY" = lat ] && break
    # rerail throughput (rerail-perf netbench spawns its peer process; both load the plugin)
    RERAIL_TCP_IFNAME=lo RERAIL_TCP_STREAMS=$S "$perf" netbench --only bw --size $((64 << 20)) --iters 32 --window 8 \
      >"$work/rr-bw.txt"
    rr_bw=$(field bw_GBps "$work/rr-bw.txt")
    # iperf3 -P S
    port=$(free_port)
    iperf3 -s -B 127.0.0.1 -p "$port" -1 >"$work/iperf3-server.txt" 2>&1 &
    pids+=($!)
    wait_listen "$port"
    iperf3 -c 127.0.0.1 -p "$port" -P "$S" -t "$T" -J >"$work/iperf3.json"
    ip_bw=$(python3 -c 'import json,sys; print("%.4f" % (json.load(open(sys.argv[1]))["end"]["sum_received"]["bits_per_second"] / 8e9))' "$work/iperf3.json")
    rr_desc+=" S=$S $rr_bw" ip_desc+=" -P $S $ip_bw"
    rr_best=$(python3 -c "print(max($rr_best, $rr_bw))")
    ip_best=$(python3 -c "print(max($ip_best, $ip_bw))")
  done
  # raw TCP over rerail's buffers (64 MiB messages, 8 buffers per side), blocking and spinning
  for spin in 0 1; do
    [ "$ONLY" = lat ] && break
    "$stream" --size $((64 << 20)) --count 32 --buffers 8 --spin "$spin" >"$work/raw-bw.txt"
    raw_bw=$(python3 -c "print(max($raw_bw, $(field bw_GBps "$work/raw-bw.txt")))")
  done
  # rerail latency, the raw spinning reference right after it, rerail with two one-way connections,
  # then sockperf
  RERAIL_TCP_IFNAME=lo "$perf" netbench --only lat --lat-size 8 --lat-iters "$LAT_ITERS" >"$work/rr-lat.txt"
  rr_lat=$(field lat_us "$work/rr-lat.txt")
  rr_p50=$(field lat_p50_us "$work/rr-lat.txt")
  "$perf" netbench --only raw --lat-size 8 --lat-iters "$LAT_ITERS" >"$work/raw-lat.txt"
  raw_lat=$(field raw_lat_us "$work/raw-lat.txt")
  raw_p50=$(field raw_lat_p50_us "$work/raw-lat.txt")
  RERAIL_TCP_DUPLEX=0 RERAIL_TCP_IFNAME=lo "$perf" netbench --only lat --lat-size 8 --lat-iters "$LAT_ITERS" >"$work/two-lat.txt"
  two_lat=$(field lat_us "$work/two-lat.txt")
  two_p50=$(field lat_p50_us "$work/two-lat.txt")
  sockperf ping-pong --tcp -i 127.0.0.1 -p "$sp_port" -t "$T" -m 14 >"$work/sockperf.txt" 2>&1
  sp_lat=$(sed -n 's/.*Summary: Latency is \([0-9.]*\) usec.*/\1/p' "$work/sockperf.txt" | tail -n 1)
  sp_p50=$(sed -n 's/.*percentile 50.000 = *\([0-9.]*\).*/\1/p' "$work/sockperf.txt" | tail -n 1)
  bw_desc=""
  [ "$ONLY" = lat ] || bw_desc="GB/s rerail$rr_desc, iperf3$ip_desc, raw TCP on rerail's buffers $raw_bw; "
  printf 'round %d: %sone-way latency mean/median us: rerail %.2f/%.2f, two connections %.2f/%.2f, raw spinning TCP %.2f/%.2f, sockperf %.2f/%.2f\n' \
    "$round" "$bw_desc" "$rr_lat" "$rr_p50" "$two_lat" "$two_p50" "$raw_lat" "$raw_p50" "$sp_lat" "$sp_p50"
  echo "$rr_best $ip_best $rr_lat $raw_lat $rr_p50 $raw_p50 $sp_lat $sp_p50 $raw_bw $two_lat $two_p50" >>"$work/rows"
done

python3 - "$work/rows" "$STREAMS" <<'PY'
import statistics, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1]) if l.strip()]
streams = sys.argv[2].split()
med = [statistics.median(col) for col in zip(*rows)]
lat_only = med[0] == 0 and med[1] == 0
rr_bw, ip_bw, rr_lat, raw_lat, rr_p50, raw_p50, sp_lat, sp_p50, raw_bw, two_lat, two_p50 = med
def ratio(a, b): return a / b if b else float("nan")
def verdict(ok): return "MET" if ok else "MISSED"
print()
print(f"medians of {len(rows)} rounds          rerail   reference    ratio  target")
r = ratio(rr_bw, ip_bw)
best = "/".join(streams)
if not lat_only:
    print(f"{'throughput 64 MiB, GB/s':28s}{rr_bw:12.3f}{ip_bw:12.3f}{r:9.2f}  >= 0.95, best of {best} streams vs iperf3 -P {best}: {verdict(r >= 0.95)}")
    print(f"{'  (raw TCP, rerail buffers)':28s}{'':12s}{raw_bw:12.3f}{ratio(rr_bw, raw_bw):9.2f}  reference only: the kernel path with rerail's 512 MiB per side")
r = ratio(rr_lat, raw_lat)
print(f"{'latency mean one-way, us':28s}{rr_lat:12.2f}{raw_lat:12.2f}{r:9.2f}  <= 1.2 vs raw spinning TCP: {verdict(r <= 1.2)}")
r = ratio(rr_p50, raw_p50)
print(f"{'latency median one-way, us':28s}{rr_p50:12.2f}{raw_p50:12.2f}{r:9.2f}  <= 1.2 vs raw spinning TCP: {verdict(r <= 1.2)}")
print(f"{'  (RERAIL_TCP_DUPLEX=0)':28s}{two_lat:8.2f}/{two_p50:.2f}{'':10s}{ratio(two_lat, raw_lat):6.2f}/{ratio(two_p50, raw_p50):.2f}  reference only: one connection per direction, mean/median vs raw spinning TCP")
def per_round(i, j):
    return statistics.median(ratio(row[i], row[j]) for row in rows)
print(f"{'  per-round ratios, median':28s}{'':24s}  mean/median: default {per_round(2, 3):.2f}/{per_round(4, 5):.2f}, "
      f"RERAIL_TCP_DUPLEX=0 {per_round(9, 3):.2f}/{per_round(10, 5):.2f}")
print(f"{'  (sockperf mean/median, us)':28s}{'':12s}{sp_lat:8.2f}/{sp_p50:.2f}  rerail/sockperf {ratio(rr_lat, sp_lat):.2f}/{ratio(rr_p50, sp_p50):.2f}")
PY
