#!/usr/bin/python3
"""rerail timeline analysis for scripts/bench-rails.sh: stalls, recovery after a fault, averages.

Reads the file `rerail-perf --timeline FILE` writes (.json preferred: it carries the "completed"
series, bytes of sends the receiver acknowledged; .csv: the per-rail columns are used instead) and
prints one `key=value` line per figure (machine-readable, for the bench script), then with
--explain one human sentence.

Only the timed loops count ("phase" events `timed begin|end ...` from rerail-perf): the gaps between
loops (barriers, input fill, verification) are the benchmark's, not the plugin's. Throughput is
per sender (--senders: the summed throughput divided by the number of ranks that send at the same
time; 2 hosts exchanging both ways = 2), in GB/s (1e9 B/s) like nccl-tests.

Figures
  bin_s, series            bin width; "completed" or "rails"
  timed_s                  seconds inside timed loops
  avg_gbps                 mean throughput per sender over the timed loops
  stall_s, stall_at_s      longest run of bins with no byte completed (all rails summed) inside a
                           timed loop, and when it began
  fault_at_s               first fault of kind down or blackhole (absent: no fault -> no fault_* keys)
  fault_before_gbps        mean throughput in the timed loop before the fault
  fault_recovery_s         time from the fault to the first instant t (bin start) from which the
                           mean throughput over [t, t + --window-s) is >= --target (-1: never, before
                           the timed loop ended); a window rather than one bin, so the bytes still
                           completing right after the fault or a burst between two stalls do not
                           count as recovered
  fault_after_gbps         mean throughput over [fault + --settle-s, end of that timed loop]
  fault_stall_s            longest stall that begins at or after the fault in that loop
  plugin_events            plugin WARN lines in the timeline; plugin_failures: those with "failed ("
  resent_bytes             from the plugin's rail-health board (meta), when published

Usage: scripts/rails-report.py TIMELINE [--senders N] [--target GBPS] [--window-s S]
                               [--settle-s S] [--explain]
Exit codes: 0 ok, 2 unreadable or malformed input (message on stderr).
"""
import argparse
import re
import sys

from timeline_io import load_timeline


def load(path):
    """Returns (bin_s, series name, totals per bin, events [(t, kind, text)], meta)."""
    tl = load_timeline(path)
    if tl["completed"]:
        return tl["bin_s"], "completed", tl["completed"], tl["events"], tl["meta"]
    return tl["bin_s"], "rails", [sum(r) for r in tl["rows"]], tl["events"], tl["meta"]


def timed_windows(events):
    """[(begin_s, end_s)] of rerail-perf's timed loops, from its "phase" events."""
    out, begin = [], None
    for ts, kind, text in sorted(events, key=lambda e: e[0]):
        if kind != "phase":
            continue
        if text.startswith("timed begin"):
            begin = ts
        elif text.startswith("timed end") and begin is not None:
            out.append((begin, ts))
            begin = None
    return out


class Series:
    def __init__(self, bin_s, totals, senders):
        self.bin_s = bin_s
        self.v = [x / senders for x in totals]

    def bins(self, lo, hi):
        """Indices of the bins lying entirely inside [lo, hi)."""
        first = int(lo / self.bin_s + 0.999999)
        last = int(hi / self.bin_s + 1e-9)  # exclusive
        return range(max(first, 0), min(last, len(self.v)))

    def mean(self, lo, hi):
        idx = self.bins(lo, hi)
        return sum(self.v[i] for i in idx) / len(idx) if len(idx) else 0.0

    def longest_stall(self, lo, hi, start_from=None):
        """(seconds, start time) of the longest run of empty bins in [lo, hi) (runs starting >= start_from)."""
        best, best_at, run, run_at = 0, None, 0, None
        for i in self.bins(lo, hi):
            if self.v[i] == 0:
                if run == 0:
                    run_at = i * self.bin_s
                run += 1
                if (start_from is None or run_at >= start_from - self.bin_s) and run > best:
                    best, best_at = run, run_at
            else:
                run = 0
        return best * self.bin_s, best_at


def analyse(bin_s, series_name, totals, events, meta, a):
    s = Series(bin_s, totals, a.senders)
    wins = timed_windows(events)
    if not wins:  # not from a phase-marking rerail-perf: the active span is the window
        active = [i for i, v in enumerate(s.v) if v > 0]
        wins = [(active[0] * bin_s, (active[-1] + 1) * bin_s)] if active else []
    out = {"bin_s": bin_s, "series": series_name, "timed_s": sum(e - b for b, e in wins)}
    out["avg_gbps"] = (sum(s.mean(b, e) * (e - b) for b, e in wins) / out["timed_s"]) if out["timed_s"] > 0 else 0.0
    stall, at = 0.0, None
    for b, e in wins:
        st, sat = s.longest_stall(b, e)
        if st > stall:
            stall, at = st, sat
    out["stall_s"], out["stall_at_s"] = stall, at if at is not None else -1
    faults = [ts for ts, kind, text in events if kind == "fault" and re.search(r"kind=(down|blackhole)", text)]
    if faults:
        f = faults[0]
        win = next(((b, e) for b, e in wins if b <= f < e), None)
        out["fault_at_s"] = f
        if win is None:
            out["fault_in_timed_loop"] = 0
        else:
            b, e = win
            out["fault_in_timed_loop"] = 1
            out["fault_before_gbps"] = s.mean(b, f)
            out["fault_after_gbps"] = s.mean(f + a.settle_s, e)
            out["fault_recovery_s"] = recovery(s, f, e, a)
            out["fault_stall_s"] = s.longest_stall(b, e, start_from=f)[0]
    plugin = [text for _, kind, text in events if kind == "plugin"]
    out["plugin_events"] = len(plugin)
    out["plugin_failures"] = sum(1 for t in plugin if "failed (" in t)
    if "resent_bytes" in meta:
        out["resent_bytes"] = int(meta["resent_bytes"])
    return out


def recovery(s, fault, end, a):
    """Seconds from the fault to the first window of --window-s with mean >= target; -1 if none."""
    if a.target is None:
        return -1.0
    width = max(1, int(round(a.window_s / s.bin_s)))
    for i in s.bins(fault, end):
        if i + width > len(s.v) or (i + width) * s.bin_s > end + 1e-9:
            break
        if sum(s.v[i:i + width]) / width >= a.target:
            return max(0.0, i * s.bin_s - fault)
    return -1.0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("timeline")
    p.add_argument("--senders", type=float, default=1, help="divide the summed throughput by this")
    p.add_argument("--target", type=float, help="recovery target, GB/s per sender")
    p.add_argument("--window-s", type=float, default=0.5, help="window of the recovery test (default 0.5)")
    p.add_argument("--settle-s", type=float, default=1.0, help="fault_after_gbps starts this long after the fault")
    p.add_argument("--explain", action="store_true", help="also print one human sentence")
    a = p.parse_args()
    if a.senders <= 0:
        sys.exit("rails-report: --senders must be > 0")
    try:
        data = load(a.timeline)
    except (OSError, ValueError, KeyError, IndexError, TypeError) as e:
        print("rails-report: cannot read %s: %s" % (a.timeline, e), file=sys.stderr)
        return 2
    out = analyse(*data, a)
    for k, v in out.items():
        print("%s=%s" % (k, ("%.4f" % v) if isinstance(v, float) else v))
    if a.explain:
        msg = "timed %.1f s at %.3f GB/s per sender; longest stall %.0f ms" % (
            out["timed_s"], out["avg_gbps"], out["stall_s"] * 1e3)
        if out.get("fault_in_timed_loop"):
            rec = out["fault_recovery_s"]
            msg += "; fault at %.2f s: %.3f GB/s before, %.3f GB/s from +%.1f s, back to target %s" % (
                out["fault_at_s"], out["fault_before_gbps"], out["fault_after_gbps"], a.settle_s,
                "after %.2f s" % rec if rec >= 0 else "never")
        print("# " + msg)
    return 0


if __name__ == "__main__":
    sys.exit(main())
