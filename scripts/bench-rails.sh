#!/usr/bin/env bash
# rerail multi-rail benchmark (issue 4, "Benchmarks"; a benchmark, not a test): in ONE run, on 2
# simulated hosts x 4 rails (scripts/netns-rails.sh), every rail limited by tc tbf to the rate X,
# for each policy (RERAIL_POLICY=stripe, then failover) through rerail-perf and the rerail plugin:
#   1. raw TCP baseline: iperf3 -P 2 over one rail at X and over one at X/4 (ratios use these); and
#      iperf3 --bidir on every rail at once (one connection per rail, both ways, as sendrecv moves
#      data): the reference for sendrecv on equal rails                          target >= 0.95
#   2. homogeneous rails: sendrecv and all_reduce busbw vs 4 X                     target >= 0.95
#   3. rails X,X,X,X/4 (rail 3 slowed on both hosts): busbw vs 3 X + X/4            target >= 0.9
#   4. rail 1 of host 0 down mid-run (a long sendrecv, timeline in 10 ms bins of completed sends):
#      time from the fault until the mean over the next 0.5 s is >= 0.95 x 3 X (target <= 1 s), the
#      mean from fault + 1 s to the end of that timed loop, the longest stall target <= 100 ms
#   5. the same with a black hole (iptables DROP): longest stall                     target <= 1.5 s
#   6. BENCH_SOAK_S of saturated all_reduce without faults: failovers ("failed (" WARN lines) target 0
#   7. CPU seconds (user + sys, all rank processes) per GB moved
# Prints every rerail-perf table (nccl-tests style), one analysis line per fault run
# (scripts/rails-report.py) and a final summary table: figure, measured, target, ratio, PASS/FAIL.
# Figures measured on a shared or small machine are noisy; run it on an idle one.
#
# Usage: sudo scripts/bench-rails.sh [--quick]      (about 7 minutes; --quick: shorter runs, about 2.5)
# Env: BENCH_RATE (X, tc syntax with a unit: kbit, mbit or gbit; default 200mbit), BENCH_SOAK_S
#      (soak seconds; default 60, --quick 10), BENCH_POLICIES (default "stripe failover"),
#      BENCH_SIZE (message size; default 64M, --quick 32M), BENCH_ITERS (timed iterations; default 5, --quick 2),
#      BENCH_FAULT_S (seconds of each timed loop of the fault runs; default 10, --quick 5),
#      BENCH_FAULT_AT (fault time in s after start; default 3), BENCH_CHANNELS (rerail-perf -C: channels,
#      i.e. connections per peer; default 4, one per rail; 1: one connection striped over every rail),
#      BENCH_OUT (outputs; default
#      bench-out), BUILD_DIR (default build), RERAIL_NETNS_PREFIX (simulated hosts; default rrbh).
# Outputs in BENCH_OUT: per run <policy>-<run>.txt (table), .log (stderr: plugin WARN lines),
#      .json (-J), .timeline.json; summary.txt.
# Exit codes: 0 the benchmark ran (whatever the figures); 1 a run failed or rerail-perf found wrong
#      values; 2 set-up (not root, tools or build missing). Everything it creates is removed on exit.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"

QUICK=0
for a in "$@"; do
  case "$a" in
    --quick) QUICK=1 ;;
    -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
    *) echo "bench-rails: unknown argument '$a' (only --quick)" >&2; exit 2 ;;
  esac
done
if [ "$(id -u)" -ne 0 ]; then
  echo "bench-rails: needs root (network namespaces, tc tbf, iptables): sudo scripts/bench-rails.sh" >&2
  exit 2
fi

export RERAIL_NETNS_PREFIX=${RERAIL_NETNS_PREFIX:-rrbh}
RATE=${BENCH_RATE:-200mbit}
POLICIES=${BENCH_POLICIES:-stripe failover}
OUT=${BENCH_OUT:-bench-out}
FAULT_AT=${BENCH_FAULT_AT:-3}
CHANNELS=${BENCH_CHANNELS:-4}
case "$CHANNELS" in ''|*[!0-9]*|0) echo "bench-rails: BENCH_CHANNELS must be a positive integer, not '$CHANNELS'" >&2; exit 2 ;; esac
if [ "$QUICK" = 1 ]; then
  SOAK=${BENCH_SOAK_S:-10} ITERS=${BENCH_ITERS:-2} FAULT_S=${BENCH_FAULT_S:-5} IPERF_S=2 SIZE=${BENCH_SIZE:-32M}
else
  SOAK=${BENCH_SOAK_S:-60} ITERS=${BENCH_ITERS:-5} FAULT_S=${BENCH_FAULT_S:-10} IPERF_S=5 SIZE=${BENCH_SIZE:-64M}
fi
BUILD_DIR=${BUILD_DIR:-build}
PERF=$BUILD_DIR/tools/rerail-perf/rerail-perf
PLUGIN=$BUILD_DIR/net_plugin/libnccl-net-rerail.so
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
RAILS="bash scripts/netns-rails.sh"
HOSTS=2 NRAILS=4

for tool in iperf3 ip tc ss "$PY"; do
  command -v "$tool" >/dev/null || { echo "bench-rails: $tool is missing (scripts/setup.sh installs it)" >&2; exit 2; }
done
[ -x "$PERF" ] && [ -f "$PLUGIN" ] ||
  { echo "bench-rails: build first: cmake --build $BUILD_DIR --target rerail-perf nccl-net-rerail" >&2; exit 2; }
# X/4 in kbit for the slow rail (tc rates: kbit, mbit, gbit).
kbit=$(awk -v r="$RATE" 'BEGIN { n = r + 0; u = tolower(substr(r, length(n "") + 1));
  m = (u == "kbit") ? 1 : (u == "mbit") ? 1000 : (u == "gbit") ? 1000000 : 0; print (m && n > 0) ? n * m : 0 }')
[ "$kbit" != 0 ] || { echo "bench-rails: BENCH_RATE='$RATE' must be a number with kbit, mbit or gbit" >&2; exit 2; }
QRATE="$(awk -v k="$kbit" 'BEGIN { printf "%d", k / 4 }')kbit"

pids=()  # background processes (iperf3 servers, rerail-perf), stopped on exit
cleanup() {
  for p in "${pids[@]}"; do
    kill "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
  $RAILS down >/dev/null 2>&1 || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

failed=0   # a run failed or had wrong values
mkdir -p "$OUT"
ROWS="$OUT/summary.rows"
: >"$ROWS"
row() { echo "$*" >>"$ROWS"; }  # figure|policy|measured|unit|target op|target value|note

# Every rail at X; rail 3 of every host at X/4 when $1 = hetero.
set_rates() {
  local h r rate
  for h in $(seq 0 $((HOSTS - 1))); do
    for r in $(seq 0 $((NRAILS - 1))); do
      rate=$RATE
      [ "${1:-}" = hetero ] && [ "$r" = 3 ] && rate=$QRATE
      $RAILS heal "$h" "$r" >/dev/null
      $RAILS slow "$h" "$r" "$rate" >/dev/null
    done
  done
}

# Waits (up to 5 s) until something listens on TCP port $2 in namespace $1.
wait_listen() {
  local i
  for i in $(seq 100); do
    ip netns exec "$1" ss -ltnH "sport = :$2" 2>/dev/null | grep -q . && return
    sleep 0.05
  done
}

# iperf3 -P 2 from host 0 to host 1 over rail $1; writes GB/s (1e9 B/s) received to $2.
# (Not called in $(...): a subshell could not record the server in pids for the cleanup.)
iperf_rail() {
  local addr ns1="${RERAIL_NETNS_PREFIX}-h1" ns0="${RERAIL_NETNS_PREFIX}-h0" port=5201
  addr=$($RAILS addr 1 "$1")
  ip netns exec "$ns1" iperf3 -s -1 -B "$addr" -p "$port" >"$OUT/iperf3-server-rail$1.txt" 2>&1 &
  pids+=($!)
  wait_listen "$ns1" "$port"
  ip netns exec "$ns0" iperf3 -c "$addr" -p "$port" -P 2 -t "$IPERF_S" -J >"$OUT/iperf3-rail$1.json"
  wait "${pids[-1]}" 2>/dev/null || true
  "$PY" -c 'import json,sys; print("%.5f" % (json.load(open(sys.argv[1]))["end"]["sum_received"]["bits_per_second"] / 8e9))' \
    "$OUT/iperf3-rail$1.json" >"$2"
}

# iperf3 --bidir on every rail at once, host 0 <-> host 1, one connection per rail; writes the GB/s
# per direction (the mean of both directions, summed over the rails) to $1.
iperf_all_rails() {
  local ns1="${RERAIL_NETNS_PREFIX}-h1" ns0="${RERAIL_NETNS_PREFIX}-h0" r i first=${#pids[@]} clients=()
  for r in $(seq 0 $((NRAILS - 1))); do
    ip netns exec "$ns1" iperf3 -s -1 -B "$($RAILS addr 1 "$r")" -p $((5211 + r)) >"$OUT/iperf3-all-server-rail$r.txt" 2>&1 &
    pids+=($!)
  done
  for r in $(seq 0 $((NRAILS - 1))); do wait_listen "$ns1" $((5211 + r)); done
  for r in $(seq 0 $((NRAILS - 1))); do
    ip netns exec "$ns0" iperf3 -c "$($RAILS addr 1 "$r")" -p $((5211 + r)) --bidir -t "$IPERF_S" -J \
      >"$OUT/iperf3-all-rail$r.json" &
    clients+=($!)
  done
  wait "${clients[@]}" 2>/dev/null || true
  for i in "${pids[@]:$first}"; do wait "$i" 2>/dev/null || true; done
  "$PY" - "$OUT" "$NRAILS" >"$1" <<'PY'
import json, sys
total = 0.0
for r in range(int(sys.argv[2])):
    e = json.load(open("%s/iperf3-all-rail%d.json" % (sys.argv[1], r)))["end"]
    total += (e["sum_received"]["bits_per_second"] + e["sum_received_bidir_reverse"]["bits_per_second"]) / 2
print("%.5f" % (total / 8e9))
PY
}

# One rerail-perf run: perf NAME POLICY ARGS...; table on stdout, figures from NAME.json/.timeline.json.
perf() {
  local name=$1 pol=$2 rc
  shift 2
  echo
  echo "## $name (RERAIL_POLICY=$pol): rerail-perf $*"
  # In the background so that a TERM reaches the cleanup at once (the launcher stops its ranks).
  RERAIL_TCP_IFNAME=rail RERAIL_POLICY=$pol "$PERF" --plugin "$PLUGIN" --hosts "$HOSTS" -N 2 -C "$CHANNELS" \
    --no-progress --timeout $((SOAK + 240)) -J "$OUT/$name.json" --timeline "$OUT/$name.timeline.json" "$@" \
    >"$OUT/$name.txt" 2>"$OUT/$name.log" &
  pids+=($!)
  rc=0
  wait "${pids[-1]}" || rc=$?
  grep -v '^#  Rank\|^# Using ranks' "$OUT/$name.txt" || true
  if [ "$rc" -ne 0 ] || grep -q "Out of bounds values : [1-9]" "$OUT/$name.txt"; then
    echo "bench-rails: $name: rerail-perf exited with $rc (1: wrong values, 2: a rank failed); last lines of $OUT/$name.log:"
    tail -n 5 "$OUT/$name.log" | sed 's/^/    /'
    failed=1
    return 1
  fi
  local warns
  warns=$(grep -c 'NET/rerail' "$OUT/$name.log" || true)
  [ "$warns" = 0 ] || echo "# plugin WARN lines: $warns (in $OUT/$name.log)"
}

# busbw (GB/s) of collective $2 in $1.json: mean of its out-of-place and in-place cells at the largest size.
busbw() {
  "$PY" - "$OUT/$1.json" "$2" <<'PY'
import json, sys
r = [x for x in json.load(open(sys.argv[1]))["results"] if x["collective"] == sys.argv[2]]
big = max(x["size"] for x in r)
v = [x["busbw_gbps"] for x in r if x["size"] == big]
print("%.5f" % (sum(v) / len(v)))
PY
}
cpu_per_gb() { "$PY" -c 'import json,sys; print("%.4f" % json.load(open(sys.argv[1]))["cpu"]["cpu_s_per_gb"])' "$OUT/$1.json"; }
kv() { sed -n "s/^$1=//p" "$2"; }  # key file
fig() { local v; v=$(kv "$1" "$2"); echo "${v:-run failed}"; }  # key file: value or "run failed"
val() { if [ "$1" = 1 ]; then shift; "$@"; else echo "run failed"; fi; }  # ok cmd...: its value or "run failed"

echo "# rerail multi-rail benchmark$([ "$QUICK" = 1 ] && echo ' (--quick)'): $HOSTS simulated hosts x $NRAILS rails," \
     "X = $RATE per rail (tc tbf), $SIZE messages, -C $CHANNELS, policies: $POLICIES"
echo "# $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); figures on a shared machine are noisy"
$RAILS down >/dev/null 2>&1 || true
$RAILS up "$HOSTS" "$NRAILS" >/dev/null

# 1. Raw TCP baseline (the same tbf limits, the same run).
set_rates hetero
iperf_rail 0 "$OUT/x.txt"
iperf_rail 3 "$OUT/xq.txt"
X=$(cat "$OUT/x.txt") XQ=$(cat "$OUT/xq.txt")
echo "# iperf3 -P 2 over one rail: X_meas = $X GB/s at $RATE; X/4_meas = $XQ GB/s at $QRATE"
row "raw TCP rail at X (iperf3 -P 2)|-|$X|GB/s|info|-|"
row "raw TCP rail at X/4 (iperf3 -P 2)|-|$XQ|GB/s|info|-|"
set_rates
iperf_all_rails "$OUT/all.txt"
ALL=$(cat "$OUT/all.txt")
echo "# iperf3 --bidir on all $NRAILS rails at once: $ALL GB/s per direction at $RATE per rail"
row "raw TCP, all rails at once, both ways|-|$ALL|GB/s|info|-|"
T4=$(awk -v x="$X" 'BEGIN { print 4 * x }')
THET=$(awk -v x="$X" -v q="$XQ" 'BEGIN { print 3 * x + q }')
T3=$(awk -v x="$X" 'BEGIN { print 0.95 * 3 * x }')

common=(-b "$SIZE" -e "$SIZE" -w 1 -c 1)
for pol in $POLICIES; do
  # 2. Homogeneous rails.
  set_rates
  ok=1
  perf "$pol-homogeneous" "$pol" sendrecv,all_reduce "${common[@]}" -n "$ITERS" || ok=0
  for c in sendrecv all_reduce; do
    row "$c busbw, 4 rails at X|$pol|$(val $ok busbw "$pol-homogeneous" $c)|GB/s|>= 0.95 x|$T4|4 X_meas"
  done
  row "sendrecv busbw vs iperf3 on all rails|$pol|$(val $ok busbw "$pol-homogeneous" sendrecv)|GB/s|>= 0.95 x|$ALL|iperf3 --bidir, all rails at once"
  row "CPU per GB moved (homogeneous)|$pol|$(val $ok cpu_per_gb "$pol-homogeneous")|s/GB|info|-|"
  row "failover WARN lines, no-fault run above|$pol|$(grep -c 'failed (' "$OUT/$pol-homogeneous.log" || true)|count|info|-|"
  # 3. Heterogeneous rails X, X, X, X/4.
  set_rates hetero
  ok=1
  perf "$pol-heterogeneous" "$pol" sendrecv,all_reduce "${common[@]}" -n "$ITERS" || ok=0
  for c in sendrecv all_reduce; do
    row "$c busbw, rails X,X,X,X/4|$pol|$(val $ok busbw "$pol-heterogeneous" $c)|GB/s|>= 0.9 x|$THET|3 X_meas + X/4_meas"
  done
  # 4./5. One rail down / black-holed during a long sendrecv (10 ms timeline bins).
  for kind in down blackhole; do
    set_rates
    name="$pol-$kind"
    : >"$OUT/$name.report"
    if perf "$name" "$pol" sendrecv "${common[@]}" --duration "$FAULT_S" --timeline-bin-ms 10 \
         --fault "at=${FAULT_AT}s,host=0,rail=1,kind=$kind"; then
      "$PY" scripts/rails-report.py "$OUT/$name.timeline.json" --senders 2 --target "$T3" --explain >"$OUT/$name.report"
      grep '^#' "$OUT/$name.report" || true
      if [ "$(kv fault_in_timed_loop "$OUT/$name.report")" != 1 ]; then
        echo "bench-rails: $name: the fault did not fall inside the timed loop (setup too slow? raise BENCH_FAULT_S)"
        failed=1
      fi
    fi
    # A run that failed or missed the fault leaves the keys empty: "run failed" rows (FAIL).
    rec=$(fig fault_recovery_s "$OUT/$name.report")
    fault_after_gbps=$(fig fault_after_gbps "$OUT/$name.report")
    fault_stall_s=$(fig fault_stall_s "$OUT/$name.report")
    case "$rec" in -1|-1.0000) rec=never ;; esac
    if [ "$kind" = down ]; then
      row "link down: time to >= 0.95 x 3X|$pol|$rec|s|<=|1|"
      row "link down: mean from fault+1s vs 3X|$pol|$fault_after_gbps|GB/s|>= 0.95 x|$(awk -v x="$X" 'BEGIN { print 3 * x }')|"
      row "link down: longest stall|$pol|$fault_stall_s|s|<=|0.1|10 ms bins"
    else
      row "black hole: time to >= 0.95 x 3X|$pol|$rec|s|info|-|"
      row "black hole: mean from fault+1s vs 3X|$pol|$fault_after_gbps|GB/s|info|-|"
      row "black hole: longest stall|$pol|$fault_stall_s|s|<=|1.5|10 ms bins"
    fi
  done
  # 6./7. Saturated soak without faults: false failovers; CPU per GB.
  set_rates
  half=$(awk -v s="$SOAK" 'BEGIN { print s / 2 }')  # --duration is per timed loop: out-of-place + in-place
  ok=1
  perf "$pol-soak" "$pol" all_reduce "${common[@]}" --duration "$half" || ok=0
  # False failovers count even when they made the run fail.
  fo=$(grep -c 'failed (' "$OUT/$pol-soak.log" || true)
  row "soak ${SOAK}s: false failovers|$pol|$fo|count|<=|0|'failed (' WARN lines$([ $ok = 1 ] || echo ', run failed')"
  row "soak ${SOAK}s: all_reduce busbw|$pol|$(val $ok busbw "$pol-soak" all_reduce)|GB/s|info|-|"
  row "soak ${SOAK}s: CPU per GB moved|$pol|$(val $ok cpu_per_gb "$pol-soak")|s/GB|info|-|"
done

echo
"$PY" - "$ROWS" <<'PY' | tee "$OUT/summary.txt"
import math, sys
def fmt_ratio(r):  # truncated, so a ratio shown as 0.950 never FAILs a ">= 0.95" target
    return "%.3f" % (math.floor(r * 1000) / 1000)
print("# summary: figure, policy, measured, target, ratio (measured / target), result")
print("# %-38s %-9s %12s %-6s %-22s %7s  %s" % ("figure", "policy", "measured", "unit", "target", "ratio", "result"))
for line in open(sys.argv[1]):
    fig, pol, val, unit, op, tgt, note = (line.rstrip("\n").split("|") + [""] * 7)[:7]
    try:
        v = float(val)
    except ValueError:
        v = None
    ratio, res, target = "", "info", ""
    if op != "info":
        t = float(tgt)
        if op.startswith(">="):  # ">= F x": measured >= F * reference
            factor = float(op.split()[1])
            ratio = fmt_ratio(v / t) if v is not None and t > 0 else "-"
            ok = v is not None and v >= factor * t
            target = ">= %s x %.4g%s" % (factor, t, " (" + note + ")" if note else "")
        else:  # "<=": measured <= t
            ratio = "%.3f" % (v / t) if v is not None and t > 0 else "-"
            ok = v is not None and v <= t
            target = "<= %g%s" % (t, " (" + note + ")" if note else "")
        res = "PASS" if ok else "FAIL"
    shown = ("%.4f" % v).rstrip("0").rstrip(".") if v is not None else val
    print("  %-38s %-9s %12s %-6s %-22s %7s  %s" % (fig, pol, shown, unit, target, ratio, res))
PY
if [ "$failed" != 0 ]; then
  echo "bench-rails: at least one run failed or had wrong values (see above); outputs in $OUT/" >&2
  exit 1
fi
echo "bench-rails: done; outputs in $OUT/"
