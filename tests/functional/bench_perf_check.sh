#!/usr/bin/env bash
# rerail-perf's benchmark outputs on loopback: --duration runs the timed loop for that long (phase
# events in the timeline say so), --timeline-bin-ms sets the bins, the CPU / bytes-moved lines and
# the JSON "cpu" object are there and consistent, and scripts/rails-report.py reads the timeline.
# Also: rails-report.py and bench-rails.sh refuse bad input with exit 2.
# Usage: bench_perf_check.sh RERAIL_PERF PLUGIN SOURCE_DIR
set -euo pipefail
perf=$1 plugin=$2 src=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
set +e
timeout 100 "$perf" sendrecv -N 2 --plugin "$plugin" -b 1M -e 1M -w 1 -c 1 -C 2 --duration 1 --timeout 90 \
  --timeline-bin-ms 10 --timeline "$work/tl.json" -J "$work/r.json" >"$work/out.txt"
rc=$?
set -e
cat "$work/out.txt"
[ "$rc" -eq 0 ] || { echo "FAIL: rerail-perf exited with $rc"; exit 1; }
grep -q "duration: 1s" "$work/out.txt" || { echo "FAIL: the preamble does not show --duration"; exit 1; }
grep -Eq '^# CPU: user [0-9.]+ s, sys [0-9.]+ s, per GB moved: [0-9.]+ s$' "$work/out.txt" ||
  { echo "FAIL: no '# CPU:' line"; exit 1; }
/usr/bin/python3 "$src/scripts/rails-report.py" "$work/tl.json" --senders 2 --explain >"$work/report.txt"
cat "$work/report.txt"
/usr/bin/python3 - "$work" <<'PY'
import json, sys
w = sys.argv[1]
r = json.load(open(w + "/r.json"))
tl = json.load(open(w + "/tl.json"))
rep = dict(l.strip().split("=", 1) for l in open(w + "/report.txt") if "=" in l and not l.startswith("#"))
cpu = r["cpu"]
def fail(m): sys.exit("FAIL: " + m)
if not (cpu["user_s"] + cpu["sys_s"] > 0): fail("no CPU time in %r" % cpu)
cells = [x for x in r["results"] if x["collective"] == "sendrecv"]
if len(cells) != 2: fail("expected 2 sendrecv cells, got %d" % len(cells))
# Each rank sends at least the timed loops' bytes; >= 1 s per loop at the measured time per iteration.
timed = sum(max(1, round(1e6 / c["time_us"])) for c in cells) * 2 * (1 << 20)
if cpu["bytes_moved"] < timed: fail("bytes_moved %d < %d timed bytes" % (cpu["bytes_moved"], timed))
if abs(cpu["cpu_s_per_gb"] - (cpu["user_s"] + cpu["sys_s"]) / (cpu["bytes_moved"] / 1e9)) > 1e-6: fail("cpu_s_per_gb")
if abs(tl["bin_s"] - 0.01) > 1e-12: fail("bin_s %r" % tl["bin_s"])
if abs(sum(tl["completed_gbps"]) * tl["bin_s"] * 1e9 - cpu["bytes_moved"]) > 1e-6 * cpu["bytes_moved"] + 1:
    fail("completed series does not add up to bytes_moved")
phases = [e for e in tl["events"] if e["kind"] == "phase"]
if len(phases) != 4: fail("expected 4 phase events, got %r" % phases)
loops = [(b["t_s"], e["t_s"]) for b, e in zip(phases[0::2], phases[1::2])]
if any(e - b < 0.99 for b, e in loops): fail("a timed loop ran less than --duration: %r" % loops)
if rep.get("series") != "completed" or float(rep["timed_s"]) < 2.0: fail("rails-report: %r" % rep)
print("PASS: duration, bins, CPU line and JSON, completed series, rails-report")
PY
# Bad input: clear message, exit 2.
echo '{"not": "a timeline"}' >"$work/bad.json"
set +e
/usr/bin/python3 "$src/scripts/rails-report.py" "$work/bad.json" 2>"$work/err.txt"; rc=$?
set -e
[ "$rc" -eq 2 ] && grep -q "cannot read" "$work/err.txt" || { echo "FAIL: rails-report on bad input: rc $rc"; exit 1; }
set +e
bash "$src/scripts/bench-rails.sh" --bogus 2>"$work/err.txt"; rc=$?
set -e
[ "$rc" -eq 2 ] && grep -q "unknown argument" "$work/err.txt" || { echo "FAIL: bench-rails.sh --bogus: rc $rc"; exit 1; }
echo "PASS: bad input refused"
