#!/bin/bash
# rerail-plan on a fabric file (rail-only, nodes 0-2 lost rails 0-2: adjacent unlike failures): the
# order is a permutation, re-ranking reaches the ring bound (7 shared rails per edge instead of 6),
# and one NCCL graph file per node is written with no channel on node 0's dead rail 0.
set -euo pipefail
bin=$1; dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
"$bin" -i "$(dirname "$0")/fabric8x8-railonly.json" -c 56 --graph-dir "$dir" > "$dir/out.json"
python3 - "$dir" <<'PY'
import json, sys, os
d = sys.argv[1]; o = json.load(open(d + "/out.json"))
assert sorted(o["order"]) == list(range(8)), o["order"]
assert abs(o["ring_naive"] - 56 / 600) < 1e-12, o["ring_naive"]
assert abs(o["ring_planned"] - o["ring_bound"]) < 1e-12, (o["ring_planned"], o["ring_bound"])
assert o["tree_planned"] <= o["tree_naive"] + 1e-12, (o["tree_naive"], o["tree_planned"])
assert o["cost_planned"] < o["cost_naive"], (o["cost_naive"], o["cost_planned"])
assert sorted(o["split_keys"]) == list(range(8))
for n in range(8): assert os.path.getsize(f"{d}/node-{n}.xml") > 0
assert 'net dev="0"' not in open(d + "/node-0.xml").read()
print("speedup", o["speedup"])
PY
# Graph files name no dead NIC, so they need the per-node maps.
if "$bin" -i "$(dirname "$0")/fabric8x8-railonly.json" -c 56 --maps default --graph-dir "$dir" >/dev/null 2>&1; then
  echo "--maps default with --graph-dir must be refused" >&2; exit 1
fi
