#!/usr/bin/env bash
# rerail demo (the README's main job): two simulated hosts joined by 4 rails, each rail rate-limited
# with tc tbf so the rails and not the CPU set the pace; an all_reduce sweep through rerail-perf and
# the rerail net plugin while rail 1 of host 0 goes down and later heals. Prints the nccl-tests table
# (#wrong must be 0 everywhere), a one-paragraph summary (throughput before / during / after, longest
# stall, bytes re-sent) and writes the timeline PNG. Cleans up after itself, leaves nothing running.
#
# Needs root (network namespaces, tc, iptables). Run from a fresh clone: it installs and builds first.
# Env: DEMO_RATE (per-rail rate, tc syntax; default 200mbit), DEMO_OUT (output folder; default
#      demo-out), DEMO_FAULT_AT / DEMO_HEAL_AT (seconds; default 4 / 9), DEMO_MAX (largest size;
#      default 32M), RERAIL_NETNS_PREFIX (simulated hosts' names; default rrperfdemo),
#      DEMO_SKIP_SETUP=1 (skip scripts/setup.sh when everything is installed and built).
# Exit codes: 0 demo ran and every value was right; 1 wrong values or rerail-perf failed; 2 set-up.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"

if [ "$(id -u)" -ne 0 ]; then
  echo "demo: needs root (network namespaces, tc tbf, iptables); run: sudo scripts/demo.sh" >&2
  exit 2
fi
[ "${DEMO_SKIP_SETUP:-0}" = 1 ] || bash scripts/setup.sh

export RERAIL_NETNS_PREFIX=${RERAIL_NETNS_PREFIX:-rrperfdemo}
RATE=${DEMO_RATE:-200mbit}
OUT=${DEMO_OUT:-demo-out}
FAULT_AT=${DEMO_FAULT_AT:-4}
HEAL_AT=${DEMO_HEAL_AT:-9}
MAX=${DEMO_MAX:-32M}
PERF=${BUILD_DIR:-build}/tools/rerail-perf/rerail-perf
PLUGIN=${BUILD_DIR:-build}/net_plugin/libnccl-net-rerail.so
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
RAILS="bash scripts/netns-rails.sh"
HOSTS=2 NRAILS=4

perf_pid=""
cleanup() {
  if [ -n "$perf_pid" ] && kill -0 "$perf_pid" 2>/dev/null; then
    kill "$perf_pid" 2>/dev/null || true  # the launcher stops its ranks (they also die with it)
    wait "$perf_pid" 2>/dev/null || true
  fi
  $RAILS down >/dev/null 2>&1 || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

[ -x "$PERF" ] || { echo "demo: $PERF was not built" >&2; exit 2; }
[ -f "$PLUGIN" ] || { echo "demo: $PLUGIN was not built" >&2; exit 2; }
mkdir -p "$OUT"
$RAILS down >/dev/null 2>&1 || true  # leftovers of an interrupted run
echo "demo: ${HOSTS} simulated hosts x ${NRAILS} rails, every rail limited to ${RATE} (tc tbf)"
$RAILS up "$HOSTS" "$NRAILS" >/dev/null
for h in $(seq 0 $((HOSTS - 1))); do
  for r in $(seq 0 $((NRAILS - 1))); do $RAILS slow "$h" "$r" "$RATE" >/dev/null; done
done

# Rail 1 of host 0 goes down at FAULT_AT s and heals at HEAL_AT s (heal also lifts the rate limit, so
# the limit is put back right after it: the launcher runs faults due at the same time in order).
echo "demo: all_reduce sweep up to ${MAX}; rail 1 of host 0 down at ${FAULT_AT}s, healed at ${HEAL_AT}s"
set +e
RERAIL_TCP_IFNAME=rail "$PERF" all_reduce --plugin "$PLUGIN" -N 2 --hosts "$HOSTS" -C "$NRAILS" \
  -b 1M -e "$MAX" -f 2 -n 8 -w 2 -c 1 --timeout 240 \
  --fault "at=${FAULT_AT}s,host=0,rail=1,kind=down" \
  --fault "at=${HEAL_AT}s,host=0,rail=1,kind=heal" \
  --fault "at=${HEAL_AT}s,host=0,rail=1,kind=slow:${RATE}" \
  --timeline "$OUT/timeline.csv" -J "$OUT/results.json" >"$OUT/table.txt" 2>"$OUT/rerail-perf.log" &
perf_pid=$!
wait "$perf_pid"
rc=$?
perf_pid=""
set -e
cat "$OUT/table.txt"
echo "demo: the plugin logged $(grep -c 'NET/rerail' "$OUT/rerail-perf.log" || true) WARN lines (failovers, re-sends):" \
     "$OUT/rerail-perf.log"
echo
if [ -s "$OUT/timeline.csv" ]; then
  "$PY" scripts/plot.py "$OUT/timeline.csv" -o "$OUT/timeline.png" --summary \
    --title "rerail demo: all_reduce, 2 hosts x 4 rails at ${RATE}, rail 1 down ${FAULT_AT}s-${HEAL_AT}s"
else
  echo "demo: no timeline was written"
fi
echo
if [ "$rc" -eq 0 ] && grep -q "^# Out of bounds values : 0 OK" "$OUT/table.txt"; then
  echo "demo: every result verified (#wrong = 0); outputs in $OUT/ (table.txt, results.json, timeline.csv, timeline.png, rerail-perf.log)"
  exit 0
fi
echo "demo: rerail-perf exited with $rc (1: wrong values, 2: a rank failed — without multi-rail failover a" \
     "rail that goes down takes its connections with it); outputs in $OUT/" >&2
exit 1
