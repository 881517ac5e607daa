#!/usr/bin/python3
"""Plot rerail-sim CSVs: one PNG per CSV, one panel per failure pattern, throughput vs nodes.
Usage: plot.py docs/planner-sim-spine0.125.csv [...]  (writes <csv>.png beside each)."""
import csv, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

for path in sys.argv[1:]:
    rows = list(csv.DictReader(open(path)))
    pats = list(dict.fromkeys(r["pattern"] for r in rows))
    fig, axes = plt.subplots(2, (len(pats) + 1) // 2, figsize=(14, 7), sharey=True)
    for ax, pat in zip(axes.flat, pats):
        sub = [r for r in rows if r["pattern"] == pat]
        x = [int(r["nodes"]) for r in sub]
        for key, style in (("none", "k:"), ("pair", "c--"), ("redist", "b-o"), ("rerank", "g-s"), ("bound", "r-")):
            ax.plot(x, [float(r[key]) for r in sub], style, label=key)
        ax.set_xscale("log", base=2)
        ax.set_title(pat)
        ax.set_xlabel("nodes (8 rails)")
        ax.set_ylim(0, 1.05)
        ax.grid(alpha=.3)
    axes.flat[0].set_ylabel("ring all-reduce throughput / fault-free")
    axes.flat[0].legend()
    fig.suptitle(path)
    fig.tight_layout()
    fig.savefig(path.rsplit(".", 1)[0] + ".png", dpi=80)
