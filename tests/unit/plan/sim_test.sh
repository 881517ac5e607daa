#!/bin/bash
# rerail-sim smoke: one lost NIC of 8 gives redist = 7/8 of fault-free (the bound) for rings on every
# fabric, no failover dies, re-ranking is never below rank order (ring objective) and never above
# the bound.
set -euo pipefail
bin=$1; dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
"$bin" --nodes 8 32 --seeds 2 --fabrics rail-only 1:4 full --objective ring --csv "$dir/sim.csv" > /dev/null
python3 - "$dir/sim.csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert len(rows) == 3 * 6 * 2 * 2, len(rows)
for r in rows:
    v = {k: float(r[k]) for k in ("none", "pair", "redist", "rerank", "graph", "bound")}
    assert v["rerank"] <= v["bound"] + 1e-9 and v["graph"] <= v["bound"] + 1e-9, r
    if r["algo"] == "ring":
        assert v["rerank"] >= v["redist"] - 1e-9, r
        if r["pattern"] == "one-nic":
            assert v["none"] == 0 and abs(v["redist"] - 0.875) < 1e-9, r
PY
