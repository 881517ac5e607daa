#!/bin/bash
# rerail-plan on a fabric file: the order is a permutation, re-ranking beats rank order on alternating
# failures, and one NCCL graph file per node is written with no channel on node 0's dead rail 0.
set -euo pipefail
bin=$1; dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
"$bin" -i "$(dirname "$0")/fabric4x8.json" -c 8 --graph-dir "$dir" > "$dir/out.json"
python3 - "$dir" <<'PY'
import json, sys, os
d = sys.argv[1]; o = json.load(open(d + "/out.json"))
assert sorted(o["order"]) == list(range(6)), o["order"]
assert o["cost_planned"] < o["cost_naive"] * 0.8, (o["cost_naive"], o["cost_planned"])
assert sorted(o["split_keys"]) == list(range(6))
for n in range(6): assert os.path.getsize(f"{d}/node-{n}.xml") > 0
assert 'net dev="0"' not in open(d + "/node-0.xml").read()
print("speedup", o["speedup"])
PY
