#!/usr/bin/env bash
# Black holes under NCCL-like collectives (root only; skips with exit 77 otherwise): 2 hosts x 2 rails,
# rerail-perf with 4 channels and every collective at 4 B .. 64 KiB (mostly eager sends), while
# rail 1 is black-holed for 2.5 s and healed, four times, on alternating hosts. An eager send
# completes once written, so NCCL (and rerail-perf) stop driving its comm; when its link is
# black-holed, only that comm's own progress can read the receiver's link-down notice and re-send
# it (net_plugin/idle_sends.h). Without that the run stalls until its deadline (2 of 13 such
# runs with one black hole each before the fix). Asserts: rc 0, #wrong 0, every fault ran (rc 0),
# nothing left behind.
# Usage: perf_blackhole_idle.sh RERAIL_PERF PLUGIN SOURCE_DIR
set -uo pipefail
perf=$1 plugin=$2 src=$3
source "$(dirname "$0")/lib.sh"
fault_fabric rrpbi "$src" 2 2 2gbit
faults=()
for k in 0 1 2 3; do
  at=$((800 + k * 4000))
  faults+=(--fault "at=${at}ms,host=$((k % 2)),rail=1,kind=blackhole" --fault "at=$((at + 2500))ms,host=$((k % 2)),rail=1,kind=heal")
done
RERAIL_TCP_IFNAME=rail timeout 170 "$perf" all --plugin "$plugin" -N 2 --hosts 2 -C 4 -b 4 -e 64K -f 4 \
  -n 1 -w 0 -c 1 --duration 0.45 --timeout 150 --rails-script "$src/scripts/netns-rails.sh" "${faults[@]}" \
  --timeline "$work/tl.json" --no-progress >"$work/out.txt" 2>"$work/err.txt"
rc=$?
grep -v '^#' "$work/out.txt" | head -5
grep -c 'WARN' "$work/err.txt" | sed 's/^/WARN lines: /'
if [ $rc -ne 0 ]; then
  echo "FAIL: rerail-perf exited with $rc"
  grep -m3 'WARN.*deadline\|WARN.*rror' "$work/err.txt"
  [ -n "${PBI_KEEP:-}" ] && cp "$work/err.txt" "$PBI_KEEP"
  exit 1
fi
grep -q "^# Out of bounds values : 0 OK" "$work/out.txt" || { echo "FAIL: wrong values"; exit 1; }
/usr/bin/python3 - "$work/tl.json" <<'PY' || exit 1
import json, sys
j = json.load(open(sys.argv[1]))
faults = [e for e in j["events"] if e["kind"] == "fault"]
assert len(faults) == 8, faults
assert all(e["text"].endswith("(rc 0)") for e in faults), faults
print("PASS: %d faults at %s s" % (len(faults), [round(e["t_s"], 1) for e in faults]))
PY
fault_finish
exit 0
