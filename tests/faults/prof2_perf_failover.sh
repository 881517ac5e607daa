#!/usr/bin/env bash
# rerail-perf --profiler over simulated hosts with a rail taken down mid-run (root only; exit 77 skips).
# Makes 2 hosts x 2 rails (prefix rrprof2), runs an all_reduce through the rerail net plugin with the
# rerail profiler loaded by rerail-perf (NCCL's events emulated, the plugin given the profiler callback),
# takes host 0's rail 1 down, and asserts on rank 0's trace: the failover is an instant event on the
# "rail 1" track (args.rail 1, nothing on rail 0), it lies inside a collective, and its parent is that
# collective or the next; the summary counts it on rail 1; no wrong values; nothing left behind.
# Usage: prof2_perf_failover.sh RERAIL_PERF NET_PLUGIN PROFILER SOURCE_DIR
set -uo pipefail
perf=$1 plugin=$2 profiler=$3 src=$4
source "$(dirname "$0")/lib.sh"
fault_fabric rrprof2 "$src" 2 2 400mbit
RERAIL_TCP_IFNAME=rail RERAIL_PROFILE_DIR="$work/prof" RERAIL_PROFILE_MASK=coll,net \
  timeout 50 "$perf" all_reduce --plugin "$plugin" --profiler "$profiler" -N 2 --hosts 2 -C 2 -b 2M -e 2M \
  -n 40 -w 1 -c 1 --timeout 45 --rails-script "$src/scripts/netns-rails.sh" \
  --fault at=0.6s,host=0,rail=1,kind=down --no-progress >"$work/out.txt" 2>"$work/err.txt"
rc=$?
cat "$work/out.txt"
[ $rc -eq 0 ] || { echo "FAIL: rerail-perf exited with $rc"; tail -30 "$work/err.txt"; exit 1; }
grep -q "^# Out of bounds values : 0 OK" "$work/out.txt" || { echo "FAIL: wrong values"; exit 1; }
/usr/bin/python3 - "$work/prof" <<'PY' || { tail -30 "$work/err.txt"; exit 1; }
import glob, json, sys
d = sys.argv[1]
traces = sorted(glob.glob(d + "/rerail-r0-*.trace.json"))
assert len(traces) == 1, "rank 0 trace missing: %s" % glob.glob(d + "/*")
t = json.load(open(traces[0]))
evs = [e for e in t["traceEvents"] if e["ph"] != "M"]
names = {e["tid"]: e["args"]["name"] for e in t["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"}
by_id = {e["args"]["id"]: e for e in evs}
colls = sorted((e for e in evs if e["cat"] == "coll"), key=lambda e: e["ts"])
fo = [e for e in evs if e["cat"] == "net" and e["args"].get("kind") == "failover"]
io = [e for e in evs if e["cat"] == "net" and e["args"].get("kind") == "io"]
assert io, "no IO spans from the net plugin"
assert fo, "no failover instant in rank 0's trace"
for f in fo:
    assert f["ph"] == "i" and f["s"] == "t", f
    assert f["args"]["rail"] == 1, "failover on the wrong rail: %s" % f
    assert f["tid"] % 10000 == 1001 and names.get(f["tid"], "").startswith("rail 1"), (f, names.get(f["tid"]))
    assert f["args"].get("to_rail", 0) == 0, f
f = min(fo, key=lambda e: e["ts"])
k = max(i for i, c in enumerate(colls) if c["ts"] <= f["ts"])
c = colls[k]
assert f["ts"] <= c["ts"] + c["dur"], "failover at %.0f us is outside collective #%d [%.0f, %.0f]" % (
    f["ts"], k, c["ts"], c["ts"] + c["dur"])
p = f["args"]["parent"]
parents = [c["args"]["id"]] + ([colls[k + 1]["args"]["id"]] if k + 1 < len(colls) else [])
assert p in parents, "failover's parent %s is not collective #%d or the next (%s)" % (p, k, parents)
assert 0 < k < len(colls) - 1, "the failover should fall between the first and the last collective (k=%d)" % k
s = json.load(open(traces[0].replace(".trace.json", ".summary.json")))
print("PASS: failover %s at %.0f us on track '%s' inside collective #%d of %d (%s, %.0f..%.0f us); %d IO spans" % (
    json.dumps(f["args"]), f["ts"], names[f["tid"]], k, len(colls), c["name"], c["ts"], c["ts"] + c["dur"], len(io)))
print("summary rails:", json.dumps(s.get("rails", s.get("per_rail", "?")))[:400])
PY
fault_finish
if pgrep -f -- "--rendezvous $work" >/dev/null; then echo "FAIL: rank processes left"; exit 1; fi
exit 0
