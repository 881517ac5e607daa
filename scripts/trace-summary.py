#!/usr/bin/env python3
"""Merge rerail per-rank profiler traces into one Chrome/Perfetto trace and print the top stalls.

Usage:
  scripts/trace-summary.py [-o merged.json] [--top N] PATH [PATH ...]

PATH is a *.trace.json written by libnccl-profiler-rerail.so, or a directory holding them
(RERAIL_PROFILE_DIR). Each trace's timestamps are relative to its process's first profiler init;
otherData.t0_unix_ns says when that was, so the traces are shifted onto one time line (as good as the
hosts' clocks agree). Each (rank, comm) keeps its own process row (pid = rank, or rank + 100000 * k
for the k-th further communicator of the same rank).

Printed: per-rail totals from rerail's net events, the failovers with the longest stalls (time from
the last progress on the failed link to its detection), and the longest network steps.
Exit status: 0 on success, 1 when no trace could be read, 2 on bad arguments.
"""
import argparse
import glob
import json
import os
import sys


def load_traces(paths):
    files = []
    for p in paths:
        if os.path.isdir(p):
            files.extend(sorted(glob.glob(os.path.join(p, "*.trace.json"))))
        else:
            files.append(p)
    traces = []
    for f in files:
        try:
            with open(f) as fh:
                t = json.load(fh)
        except (OSError, ValueError) as e:
            print(f"trace-summary: skipping {f}: {e}", file=sys.stderr)
            continue
        if not isinstance(t, dict) or "traceEvents" not in t:
            print(f"trace-summary: skipping {f}: not a Chrome trace object", file=sys.stderr)
            continue
        t.setdefault("otherData", {})
        traces.append((f, t))
    return traces


def merge(traces):
    """Returns (merged trace dict, list of (rank, comm, event) for every non-metadata event)."""
    t0s = [t["otherData"].get("t0_unix_ns", 0) for _, t in traces]
    base = min(t0s) if t0s else 0
    used = {}
    out, flat, sources = [], [], []
    for (path, t), t0 in zip(traces, t0s):
        other = t["otherData"]
        rank = int(other.get("rank", 0))
        comm = str(other.get("comm", "?"))
        k = used.get(rank, 0)
        used[rank] = k + 1
        pid = rank + 100000 * k
        shift_us = (t0 - base) / 1000.0
        sources.append({"file": path, "rank": rank, "comm": comm, "pid": pid, "shift_us": shift_us})
        for e in t["traceEvents"]:
            e = dict(e)
            e["pid"] = pid
            if e.get("ph") != "M" and "ts" in e:
                e["ts"] = e["ts"] + shift_us
                flat.append((rank, comm, e))
            out.append(e)
    merged = {"displayTimeUnit": "ns", "otherData": {"format": "rerail-trace-merged/1", "t0_unix_ns": base,
                                                      "sources": sources}, "traceEvents": out}
    return merged, flat


def rail_totals(flat):
    totals = {}
    for rank, comm, e in flat:
        if e.get("cat") != "net":
            continue
        a = e.get("args", {})
        if "rail" not in a:
            continue
        r = totals.setdefault((rank, a["rail"]), {"send": 0, "recv": 0, "failovers": 0, "stall_ns": 0})
        if a.get("kind") == "io":
            r[a.get("dir", "send")] += int(a.get("bytes", 0))
        elif a.get("kind") == "failover":
            r["failovers"] += 1
            r["stall_ns"] += int(a.get("stall_ns", 0))
    return totals


def report(flat, top, stream):
    totals = rail_totals(flat)
    print("Per-rail traffic (rerail net events)", file=stream)
    print(f"  {'rank':>4} {'rail':>4} {'sent MiB':>10} {'recv MiB':>10} {'failovers':>9} {'stall ms':>9}", file=stream)
    for (rank, rail), r in sorted(totals.items()):
        print(f"  {rank:>4} {rail:>4} {r['send'] / 2**20:>10.2f} {r['recv'] / 2**20:>10.2f} "
              f"{r['failovers']:>9} {r['stall_ns'] / 1e6:>9.3f}", file=stream)

    fails = [(int(e["args"].get("stall_ns", 0)), rank, comm, e) for rank, comm, e in flat
             if e.get("cat") == "net" and e.get("args", {}).get("kind") == "failover"]
    fails.sort(key=lambda x: (-x[0], x[3]["ts"]))
    print(f"Top {top} failover stalls", file=stream)
    if not fails:
        print("  (no failovers)", file=stream)
    for stall, rank, comm, e in fails[:top]:
        a = e["args"]
        to = a.get("to_rail", "-")
        print(f"  rank {rank} comm {comm} t={e['ts'] / 1e3:.3f} ms rail {a.get('rail')} -> {to} "
              f"stall {stall / 1e6:.3f} ms reason {a.get('reason', '?')} requeued {a.get('bytes', 0)} B",
              file=stream)

    steps = [(float(e.get("dur", 0.0)), rank, comm, e) for rank, comm, e in flat
             if e.get("cat") in ("proxystep", "net") and e.get("ph") == "X"]
    steps.sort(key=lambda x: -x[0])
    print(f"Top {top} longest network steps", file=stream)
    for dur, rank, comm, e in steps[:top]:
        a = e.get("args", {})
        where = f"rail {a['rail']}" if "rail" in a else f"track {e.get('tid')}"
        print(f"  rank {rank} comm {comm} t={e['ts'] / 1e3:.3f} ms {e.get('name')} on {where}: {dur:.1f} us",
              file=stream)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="+", help="trace files or directories")
    ap.add_argument("-o", "--output", help="write the merged trace here")
    ap.add_argument("--top", type=int, default=10, help="rows per table (default 10)")
    args = ap.parse_args(argv)
    if args.top < 1:
        ap.error("--top must be at least 1")
    traces = load_traces(args.paths)
    if not traces:
        print("trace-summary: no readable trace", file=sys.stderr)
        return 1
    merged, flat = merge(traces)
    if args.output:
        tmp = args.output + ".tmp"
        with open(tmp, "w") as fh:
            json.dump(merged, fh)
        os.replace(tmp, args.output)
        print(f"merged {len(traces)} trace(s), {len(flat)} events -> {args.output}")
    report(flat, args.top, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
