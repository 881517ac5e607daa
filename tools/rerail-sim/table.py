#!/usr/bin/python3
"""Markdown tables from a rerail-sim CSV: one table per fabric, rows pattern x nodes, ring and tree
columns (naive = rerail redistribution in rank order, re-ranked, bound, mean gain [min, max] over
seeds). Usage: table.py docs/planner-sim.csv > docs/planner-sim-tables.md"""
import csv, sys
from collections import defaultdict

rows = list(csv.DictReader(open(sys.argv[1])))
by = defaultdict(dict)
for r in rows:
    by[(r["fabric"], r["pattern"], int(r["nodes"]))][r["algo"]] = r
fabrics = list(dict.fromkeys(r["fabric"] for r in rows))
seeds = rows[0]["seeds"] if rows else "?"


def cell(r):
    g, lo, hi = (100 * (float(r[k]) - 1) for k in ("gain", "gain_min", "gain_max"))
    return "%.3f | %.3f | %.3f | %.3f | %+.1f %% [%+.0f, %+.0f]" % (
        float(r["redist"]), float(r["rerank"]), float(r["graph"]), float(r["bound"]), g, lo, hi)


for fab in fabrics:
    print(f"\n### {fab} ({seeds} seeds per point)\n")
    print("| pattern | nodes | ring naive | ring rerank | ring graph | ring bound | ring gain [min, max] "
          "| tree naive | tree rerank | tree graph | tree bound | tree gain [min, max] |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for (f, pat, n), a in by.items():
        if f == fab:
            print(f"| {pat} | {n} | {cell(a['ring'])} | {cell(a['tree'])} |")
