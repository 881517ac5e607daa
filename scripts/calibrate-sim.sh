#!/bin/bash
# calibrate-sim.sh — measured (rerail-perf on a 4-host x 4-rail namespace fabric, every rail limited
# to RATE by tc tbf) vs simulated (the rerail-plan / rerail-sim cost model) throughput ratios for:
# healthy, one rail down on host 0, one rail of host 0 at RATE/2. REPS runs per scenario, the three
# scenarios interleaved per repetition (so drifting machine load hits them alike). Prints one line
# per scenario:
#   scenario  busbw(mean)  measured_ratio(mean +- sd over REPS)  simulated_ratio  sim/measured
# and the 1-minute load average sampled before and after every run. The model: this fabric is
# rail-only (one bridge per rail), rerail's TCP policy stripes every connection over the links both
# ends keep (planner Policy::kStripe), rank order, NCCL's default channel maps: rerail-plan's
# ring_naive. Needs root (network namespaces). Env: BUILD_DIR (build), RATE (200mbit), SIZE (32M),
# DURATION (s per run, 20), REPS (3), RERAIL_NETNS_PREFIX (rrcal), OUT (BUILD_DIR/calib-out).
# Not run by ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}; RATE=${RATE:-200mbit}; SIZE=${SIZE:-32M}; DURATION=${DURATION:-20}; REPS=${REPS:-3}
OUT=${OUT:-$BUILD_DIR/calib-out}; export RERAIL_NETNS_PREFIX=${RERAIL_NETNS_PREFIX:-rrcal}
HOSTS=4; NRAILS=4; CHANNELS=56
PERF=$BUILD_DIR/tools/rerail-perf/rerail-perf
PLAN=$BUILD_DIR/tools/rerail-plan
PLUGIN=$BUILD_DIR/net_plugin/libnccl-net-rerail.so
RAILS="bash scripts/netns-rails.sh"
for f in "$PERF" "$PLAN" "$PLUGIN"; do
  [ -e "$f" ] || { echo "calibrate-sim: build first: $f missing (targets rerail-perf rerail-plan nccl-net-rerail)" >&2; exit 2; }
done
[ "$(id -u)" -eq 0 ] || { echo "calibrate-sim: must run as root" >&2; exit 2; }
mkdir -p "$OUT"
trap '$RAILS down >/dev/null 2>&1 || true' EXIT
$RAILS up $HOSTS $NRAILS >/dev/null

rate_num() { echo "${1%%[a-z]*}"; }  # 200mbit -> 200
half_rate="$(( $(rate_num "$RATE") / 2 ))${RATE##*[0-9]}"

setup() {  # scenario -> rails all at RATE, then the scenario's fault on host 0 rail 1
  for ((h = 0; h < HOSTS; h++)); do for ((r = 0; r < NRAILS; r++)); do
    $RAILS heal $h $r >/dev/null; $RAILS slow $h $r "$RATE" >/dev/null
  done; done
  case $1 in
    healthy) ;;
    rail-down) $RAILS fail 0 1 >/dev/null ;;
    slow-rail) $RAILS heal 0 1 >/dev/null; $RAILS slow 0 1 "$half_rate" >/dev/null ;;
  esac
}

measure() {  # -> busbw (rerail-perf busbw_gbps) of the largest size, out-of-place
  RERAIL_TCP_IFNAME=rail "$PERF" all_reduce --plugin "$PLUGIN" --hosts $HOSTS -N $HOSTS -C $NRAILS \
    -b "$SIZE" -e "$SIZE" --duration "$DURATION" --no-progress --timeout $((DURATION * 4 + 120)) \
    -J "$OUT/$1.json" >"$OUT/$1.txt" 2>"$OUT/$1.log"
  python3 -c 'import json,sys; r=[x for x in json.load(open(sys.argv[1]))["results"] if x["placement"]=="out-of-place"]; print(r[-1]["busbw_gbps"])' "$OUT/$1.json"
}
load1() { cut -d' ' -f1 /proc/loadavg; }

simulate() {  # -> planned cost of the scenario's fabric with rerail-plan (same cost model as rerail-sim)
  local b="[1,1,1,1]" h1="[1,1,1,1]"
  case $1 in rail-down) h1="[1,0,1,1]" ;; slow-rail) h1="[1,0.5,1,1]" ;; esac
  echo "{\"rails\":4,\"kind\":\"rail-only\",\"policy\":\"stripe\",\"bw\":[$h1,$b,$b,$b]}" >"$OUT/$1.fabric.json"
  "$PLAN" -i "$OUT/$1.fabric.json" -c $CHANNELS --objective ring --maps default |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["ring_naive"])'
}

declare -A bus cost
loads=""
for s in healthy rail-down slow-rail; do cost[$s]=$(simulate $s); done
for ((k = 0; k < REPS; k++)); do
  for s in healthy rail-down slow-rail; do
    setup $s
    loads+="$(load1) "
    bus[$s]+="$(measure $s.$k) "
    loads+="$(load1) "
  done
done
printf '%-10s %10s %22s %15s %12s\n' scenario busbw measured_ratio simulated_ratio sim/measured
for s in healthy rail-down slow-rail; do
  python3 - "$s" "${bus[$s]}" "${bus[healthy]}" "${cost[$s]}" "${cost[healthy]}" <<'PY'
import statistics as st, sys
name, b, b0, c, c0 = sys.argv[1], [float(x) for x in sys.argv[2].split()], [float(x) for x in sys.argv[3].split()], float(sys.argv[4]), float(sys.argv[5])
ratios = [x / y for x, y in zip(b, b0)]  # per repetition: against that repetition's healthy run
m = st.mean(ratios); sd = st.stdev(ratios) if len(ratios) > 1 else 0.0; sim = c0 / c
print("%-10s %10.4f %14.3f +- %5.3f %15.3f %12.3f" % (name, st.mean(b), m, sd, sim, sim / m if m else float("nan")))
PY
done
python3 -c 'import statistics as st,sys; v=[float(x) for x in sys.argv[1:]]; print("load average (1 min) during runs: min %.2f mean %.2f max %.2f over %d samples" % (min(v), st.mean(v), max(v), len(v)))' $loads
