#!/usr/bin/env bash
# rerail-perf over simulated hosts with injected faults (root only; skips with exit 77 otherwise).
# Makes 2 hosts x 2 rails (prefix rrperft), runs an all_reduce through the rerail plugin while host 0's
# rail 1 is slowed and then healed, and asserts: #wrong = 0, both faults ran (rc 0) and are in the
# timeline, both rails carried traffic, and nothing is left behind (namespaces, processes).
# Usage: perf_fault_run.sh RERAIL_PERF PLUGIN SOURCE_DIR
set -uo pipefail
perf=$1 plugin=$2 src=$3
source "$(dirname "$0")/lib.sh"
fault_fabric rrperft "$src" 2 2 400mbit
RERAIL_TCP_IFNAME=rail timeout 120 "$perf" all_reduce --plugin "$plugin" -N 2 --hosts 2 -C 2 -b 1M -e 8M -f 2 \
  -n 3 -w 1 --timeout 100 --rails-script "$src/scripts/netns-rails.sh" \
  --fault at=0.5s,host=0,rail=1,kind=slow:100mbit --fault at=1.5s,host=0,rail=1,kind=heal \
  --timeline "$work/tl.json" >"$work/out.txt"
rc=$?
cat "$work/out.txt"
[ $rc -eq 0 ] || { echo "FAIL: rerail-perf exited with $rc"; exit 1; }
grep -q "^# Out of bounds values : 0 OK" "$work/out.txt" || { echo "FAIL: wrong values"; exit 1; }
/usr/bin/python3 - "$work/tl.json" <<'PY' || exit 1
import json, sys
j = json.load(open(sys.argv[1]))
faults = [e for e in j["events"] if e["kind"] == "fault"]
assert len(faults) == 2, faults
assert all(e["text"].endswith("(rc 0)") for e in faults), faults
assert 0.4 < faults[0]["t_s"] < 1.5, faults
assert j["rails"] == ["rail0", "rail1"], j["rails"]
for i, name in enumerate(j["rails"]):
    assert sum(row[i] for row in j["gbps"]) > 0, name
print("PASS: faults at %s s, rails %s" % ([round(e["t_s"], 2) for e in faults], j["rails"]))
PY
fault_finish
if pgrep -f -- "--rendezvous $work" >/dev/null; then echo "FAIL: rank processes left"; exit 1; fi
exit 0
