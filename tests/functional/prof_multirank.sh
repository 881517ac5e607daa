#!/usr/bin/env bash
# Two ranks (two processes) record with libnccl-profiler-rerail.so; rank 1 fails over rail 1 -> 0 between
# its first and second collective. scripts/trace-summary.py must merge both traces into one valid trace and
# report that failover as the top stall.
# Usage: prof_multirank.sh DRIVER PROFILER_SO TRACE_SUMMARY_PY
set -euo pipefail
driver=$1 lib=$2 summary=$3
dir=$(mktemp -d /tmp/rerail-prof-multirank.XXXXXX)
trap 'rm -rf "$dir"' EXIT
export RERAIL_PROFILE_DIR=$dir RERAIL_PROFILE_MASK=coll,proxyop,net
"$driver" --rank 0 --nranks 2 --profiler "$lib" &
p0=$!
"$driver" --rank 1 --nranks 2 --profiler "$lib" --fail-rail 1 --stall-us 2500 &
p1=$!
wait $p0
wait $p1
ls "$dir"/*.trace.json | wc -l | grep -qx 2 || { echo "FAIL: expected 2 traces"; ls -l "$dir"; exit 1; }

out=$(python3 "$summary" -o "$dir/merged.json" --top 3 "$dir")
echo "$out"
python3 - "$dir/merged.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
ev = [e for e in t["traceEvents"] if e.get("ph") != "M"]
pids = sorted({e["pid"] for e in ev})
assert pids == [0, 1], pids
colls = [e for e in ev if e["cat"] == "coll"]
assert len(colls) == 6, len(colls)
fo = [e for e in ev if e.get("name") == "failover"]
assert len(fo) == 1 and fo[0]["pid"] == 1 and fo[0]["tid"] == 1001, fo
# The failover sits between rank 1's first and second collective (collectives end at their last proxy op).
r1 = sorted((e for e in colls if e["pid"] == 1), key=lambda e: e["ts"])
assert r1[0]["ts"] + r1[0]["dur"] < fo[0]["ts"] < r1[1]["ts"], (r1[0], fo[0], r1[1])
# After the failover, rank 1 moves rail 1's traffic to rail 0: no io on rail 1 later.
late = [e for e in ev if e["pid"] == 1 and e.get("name") == "io" and e["args"]["rail"] == 1 and e["ts"] > fo[0]["ts"]]
assert not late, late[:2]
# Perfetto's rule: complete events on one (pid, tid) nest perfectly.
tracks = {}
for e in ev:
    if e["ph"] == "X":
        tracks.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
for key, spans in tracks.items():
    spans.sort(key=lambda s: (s[0], -s[1]))
    stack = []
    for b, end in spans:
        while stack and stack[-1] <= b + 1e-6:
            stack.pop()
        assert not stack or end <= stack[-1] + 1e-6, (key, b, end, stack[-1])
        stack.append(end)
print("merged trace OK")
PY
grep -q "rank 1 comm 0000000000c0ffee .* rail 1 -> 0 stall 2.500 ms reason link-down" <<<"$out" \
  || { echo "FAIL: top stall line missing"; exit 1; }
echo PASS
