#!/usr/bin/python3
"""Plot a rerail-sim CSV: <csv-stem>-ring.png and <csv-stem>-tree.png, one panel per fabric (rows) and
failure pattern (columns), throughput relative to fault-free vs nodes, one line per strategy.
Usage: plot.py docs/planner-sim.csv"""
import csv, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

STYLE = (("none", "k:"), ("pair", "c--"), ("redist", "b-o"), ("rerank", "g-s"), ("graph", "m-^"), ("xrail", "y--"), ("bound", "r-"))

for path in sys.argv[1:]:
    rows = list(csv.DictReader(open(path)))
    fabrics = list(dict.fromkeys(r["fabric"] for r in rows))
    pats = list(dict.fromkeys(r["pattern"] for r in rows))
    for algo in ("ring", "tree"):
        fig, axes = plt.subplots(len(fabrics), len(pats), figsize=(3 * len(pats), 2.4 * len(fabrics)),
                                 sharey=True, squeeze=False)
        for i, fab in enumerate(fabrics):
            for j, pat in enumerate(pats):
                ax = axes[i][j]
                sub = [r for r in rows if r["fabric"] == fab and r["pattern"] == pat and r["algo"] == algo]
                x = [int(r["nodes"]) for r in sub]
                for key, style in STYLE:
                    ax.plot(x, [float(r[key]) for r in sub], style, label=key, ms=4)
                ax.set_xscale("log", base=2)
                ax.set_ylim(0, 1.05)
                ax.grid(alpha=.3)
                if i == 0:
                    ax.set_title(pat)
                if j == 0:
                    ax.set_ylabel(fab)
                if i == len(fabrics) - 1:
                    ax.set_xlabel("nodes (8 rails)")
        axes[0][0].legend(fontsize=7)
        fig.suptitle(f"{path}: {algo} all-reduce throughput / fault-free (mean over seeds)")
        fig.tight_layout()
        fig.savefig(path.rsplit(".", 1)[0] + f"-{algo}.png", dpi=60)
