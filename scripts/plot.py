#!/usr/bin/python3
"""rerail timeline plot: throughput per rail over time with fault and failover markers.

Reads the file `rerail-perf --timeline FILE` writes (CSV or JSON, by extension) and writes a PNG
(matplotlib, Agg backend: no display needed). With --summary it also prints one paragraph:
throughput before / during / after the first fault window, the longest stall and the bytes re-sent.

Usage: scripts/plot.py TIMELINE [-o OUT.png] [--title T] [--summary]
Exit codes: 0 ok, 2 unreadable or malformed input (message on stderr).
"""
import argparse
import re
import sys

from timeline_io import load_timeline

try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: E402
except ImportError:
    sys.exit("plot.py: matplotlib is missing; install Debian's python3-matplotlib and run with /usr/bin/python3")

RESENT_RE = re.compile(r"(\d+)\s*(?:bytes|B)\s*re-?sent|re-?sen[dt]\w*\s*(?:of\s*)?(\d+)\s*(?:bytes|B)", re.I)
FAILOVER_RE = re.compile(r"fail(?:ed)?\s*over|failover|fail(?:ed)?\s*back|failback|re-?admit|migrat|link down|"
                         r"rail \S+ .*(?:failed|down|up)\b", re.I)
SMOOTH_BINS = 5  # plotted lines are 0.5 s moving averages of the 100 ms bins


def load(path):
    """Returns (t_s list, rail names, gbps rows [bin][rail], events [(t, kind, text)], meta dict)."""
    tl = load_timeline(path)
    return tl["t"], tl["rails"], tl["rows"], tl["events"], tl["meta"]

def window_mean(t, totals, lo, hi):
    vals = [v for ts, v in zip(t, totals) if lo <= ts < hi]
    return sum(vals) / len(vals) if vals else 0.0


def summary(t, rows, events, meta):
    totals = [sum(r) for r in rows]
    active = [ts for ts, v in zip(t, totals) if v > 0]
    if not active:
        return "No traffic was recorded."
    start, end = active[0], active[-1] + (t[1] - t[0] if len(t) > 1 else 0.1)
    faults = [(ts, text) for ts, kind, text in events if kind == "fault"]
    down = [ts for ts, text in faults if re.search(r"kind=(down|blackhole)", text)]
    heal = [ts for ts, text in faults if "kind=heal" in text]
    f0 = down[0] if down else None
    h0 = next((ts for ts in heal if f0 is not None and ts > f0), None)
    before = window_mean(t, totals, start, f0 if f0 is not None else end)
    parts = ["Throughput before the fault: %.3f GB/s" % before]
    if f0 is not None:
        during = window_mean(t, totals, f0, h0 if h0 is not None else end)
        parts.append("during (rail down from t=%.1f s%s): %.3f GB/s (%.0f %% of before)" % (
            f0, " to %.1f s" % h0 if h0 is not None else "", during, 100.0 * during / before if before else 0))
        if h0 is not None:
            after = window_mean(t, totals, h0, end)
            parts.append("after the heal: %.3f GB/s (%.0f %% of before)" % (after, 100.0 * after / before if before else 0))
    # Longest stall: the longest run of bins with no bytes inside the active span.
    bin_s = t[1] - t[0] if len(t) > 1 else 0.1
    run = best = 0
    best_at = None
    for ts, v in zip(t, totals):
        if ts < start or ts > end:
            continue
        run = run + 1 if v == 0 else 0
        if run > best:
            best, best_at = run, ts - (run - 1) * bin_s
    stall = "longest stall: %.1f s%s" % (best * bin_s, " (from t=%.1f s)" % best_at if best else "")
    resent = meta.get("resent_bytes")
    if resent is None:
        found = [int(a or b) for _, kind, text in events if kind == "plugin" for a, b in RESENT_RE.findall(text)]
        resent = str(sum(found)) if found else None
    failovers = sum(1 for _, kind, text in events if kind == "plugin" and FAILOVER_RE.search(text))
    return "%s; %s; bytes re-sent: %s; plugin failover/failback events: %d." % (
        ", ".join(parts), stall, resent if resent is not None else "n/a (the plugin reported none)", failovers)


def smooth(vals, k=SMOOTH_BINS):
    out, acc = [], 0.0
    for i, v in enumerate(vals):
        acc += v
        if i >= k:
            acc -= vals[i - k]
        out.append(acc / min(i + 1, k))
    return out


def plot(t, rails, rows, events, out, title, per_rail):
    fig, ax = plt.subplots(figsize=(11, 5), dpi=110)
    prefix = "" if per_rail else "dev "
    for i, name in enumerate(rails):
        ax.plot(t, smooth([r[i] for r in rows]), label=prefix + name, linewidth=1.2)
    totals = [sum(r) for r in rows]
    ax.plot(t, totals, color="grey", linewidth=0.6, alpha=0.5, label="total (100 ms)")
    ax.plot(t, smooth(totals), label="total", color="black", linewidth=1.8)
    ymax = max(totals + [1e-9])
    seen = set()
    nfault = 0
    for ts, kind, text in events:
        if kind == "fault":
            label = "fault" if "fault" not in seen else None
            ax.axvline(ts, color="red", linestyle="--", linewidth=1.2, label=label)
            m = re.search(r"host=(\d+)[,;]rail=(\d+)[,;]kind=([^ ]+)", text)
            short = "h%s r%s %s" % m.groups() if m else text.split(" (rc")[0]
            ax.text(ts, ymax * (1.24 - 0.07 * (nfault % 3)), " " + short, ha="left", va="center", fontsize=8,
                    color="red")
            nfault += 1
        elif FAILOVER_RE.search(text):
            label = "plugin failover/failback" if "plugin" not in seen else None
            ax.axvline(ts, color="darkorange", linestyle=":", linewidth=1.2, label=label)
        else:
            continue
        seen.add(kind)
    ax.set_xlabel("time since start (s)")
    ax.set_ylabel("throughput (GB/s sent, 0.5 s mean)")
    if not per_rail:
        title += "\n(lines are NCCL devices: the plugin published no per-rail counters)"
    ax.set_ylim(0, ymax * 1.3)
    ax.set_title(title, fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12), fontsize=8, ncol=len(rails) + 4, frameon=False)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("timeline", help="rerail-perf --timeline file (.csv or .json)")
    ap.add_argument("-o", "--out", help="PNG to write (default: TIMELINE with .png)")
    ap.add_argument("--title", default="rerail-perf: throughput per rail")
    ap.add_argument("--summary", action="store_true", help="print the before/during/after paragraph")
    args = ap.parse_args()
    try:
        t, rails, rows, events, meta = load(args.timeline)
    except (OSError, ValueError, KeyError) as e:
        print("plot.py: cannot read %s: %s" % (args.timeline, e), file=sys.stderr)
        return 2
    out = args.out or re.sub(r"\.(csv|json)$", "", args.timeline) + ".png"
    per_rail = int(meta.get("ranks_with_rail_counters", 0)) > 0
    plot(t, rails, rows, events, out, args.title, per_rail)
    print("plot.py: wrote %s" % out)
    if args.summary:
        print(summary(t, rows, events, meta))
    return 0


if __name__ == "__main__":
    sys.exit(main())
