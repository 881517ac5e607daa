#!/usr/bin/env bash
# rerail — repeated real-fault runs on a simulated 2-host multi-rail fabric (root only): the liveness
# and data-integrity check of the resilient connection under black holes and random fault sequences.
#
#   scripts/fault-runs.sh blackhole [--runs N] [--rate RATE] [--rails K] [--seconds S] [--msg BYTES]
#       N runs (default 20); run i black-holes rail i mod K of host i mod 2 at a random moment in the
#       first half of the stream; the receivers post 1..8 receives ahead (drawn per run: NCCL re-posts
#       a slot only once the GPU consumed it).
#   scripts/fault-runs.sh random [--seeds N] [--seed0 S] [--rate RATE] [--rails K] [--seconds S] [--msg BYTES]
#       N seeds (default 5), each a stream of S seconds (default 600) with a fault every 1-3 s drawn
#       from the seed: rail down, black hole, slow (RATE/10), heal; at times a single rail is left,
#       never none.
# Every run streams verified messages both ways (net_fault_peer: window 8, sizes vary, contents and
# order checked) through libnccl-net-rerail.so with the default RERAIL_* settings unless set in the
# environment. A run passes when both peers end cleanly: no error, no hang (nothing unfinished
# FAULT_PEER_HANG_MS = 20 s after the stream's end), 0 bad messages, every message sent received.
# Prints one line per run and a summary; exits 0 when every run passed, 1 otherwise, 77 when not root.
# In random mode, a host whose longest gap between two completed receives exceeds FAULT_GAP_MS
# (default 2000) also gets the faults of the moments before that gap ended (its cause), from the run's
# fault schedule.
# Env: BUILD_DIR (build), RERAIL_NETNS_PREFIX (rrfr), FAULT_GAP_MS (2000).
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-build}
[ -d "$BUILD_DIR" ] || BUILD_DIR="$here/$BUILD_DIR"
PEER="$BUILD_DIR/tests/net_fault_peer"
SO="$BUILD_DIR/net_plugin/libnccl-net-rerail.so"
mode=${1:-}
shift || true
runs=20 seeds=5 seed0=1 rate=1gbit nrails=4 seconds="" msg=$((4 << 20))
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs=$2; shift 2 ;;
    --seeds) seeds=$2; shift 2 ;;
    --seed0) seed0=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --rails) nrails=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --msg) msg=$2; shift 2 ;;
    *) echo "fault-runs: unknown argument $1" >&2; exit 2 ;;
  esac
done
case "$mode" in
  blackhole) seconds=${seconds:-6} ;;
  random) seconds=${seconds:-600} ;;
  *) sed -n '2,22p' "$0"; exit 2 ;;
esac
[ -x "$PEER" ] && [ -f "$SO" ] || { echo "fault-runs: build first ($PEER, $SO)" >&2; exit 2; }
# shellcheck source=../tests/faults/lib.sh
source "$here/tests/faults/lib.sh"
fault_fabric "${RERAIL_NETNS_PREFIX:-rrfr}" "$here" 2 "$nrails" "$rate"

# Starts both peers (env $1), exchanges their handles; sets pid0 pid1.
start_peers() {
  local env=$1 h
  for h in 0 1; do
    rm -f "$work/in$h" "$work/out$h"
    mkfifo "$work/in$h"
    # shellcheck disable=SC2086
    ip netns exec "$RERAIL_NETNS_PREFIX-h$h" env NCCL_DEBUG=WARN RERAIL_TCP_IFNAME=rail FAULT_PEER_HANG_MS=20000 $env \
      "$PEER" "$SO" "$((seconds * 1000))" "$msg" <"$work/in$h" >"$work/out$h" 2>"$work/log$h" &
    eval "pid$h=$!"
  done
  exec 5>"$work/in0" 6>"$work/in1"
  local t
  for t in $(seq 100); do
    grep -q HANDLE "$work/out0" 2>/dev/null && grep -q HANDLE "$work/out1" 2>/dev/null && break
    sleep 0.1
  done
  grep HANDLE "$work/out1" >&5
  grep HANDLE "$work/out0" >&6
}

# Waits for both peers; prints the verdict line; returns 0 when the run passed.
finish_peers() {
  local label=$1 r0 r1 ok=1
  wait "$pid0"; local e0=$?
  wait "$pid1"; local e1=$?
  exec 5>&- 6>&-
  r0=$(grep RESULT "$work/out0"); r1=$(grep RESULT "$work/out1")
  field() { sed -n "s/.* $2=\([0-9.]*\).*/\1/p" <<<"$1"; }
  [ "$e0" = 0 ] && [ "$e1" = 0 ] || ok=0
  [ "$(field "$r0" sent)" = "$(($(field "$r1" recv) + 1))" ] || ok=0
  [ "$(field "$r1" sent)" = "$(($(field "$r0" recv) + 1))" ] || ok=0
  printf '%s %s  host0: %s (exit %s)  host1: %s (exit %s)\n' "$([ $ok = 1 ] && echo PASS || echo FAIL)" "$label" \
    "${r0#RESULT }" "$e0" "${r1#RESULT }" "$e1"
  if [ $ok = 0 ]; then
    echo "--- host0 log (last 15 lines)"; tail -15 "$work/log0"
    echo "--- host1 log (last 15 lines)"; tail -15 "$work/log1"
  fi
  [ -s "$work/sched" ] && gap_causes "$r0" 0 && gap_causes "$r1" 1
  [ $ok = 1 ]
}

# gap_causes RESULT HOST: the faults (from $work/sched: "unix_ms what") in the window of the host's
# longest gap plus the 2 s before it, when that gap exceeds FAULT_GAP_MS.
gap_causes() {
  local gap end
  gap=$(sed -n 's/.* maxgap_ms=\([0-9]*\).*/\1/p' <<<"$1") end=$(sed -n 's/.* maxgap_end_unix_ms=\([0-9]*\).*/\1/p' <<<"$1")
  [ -n "$gap" ] && [ -n "$end" ] && [ "$gap" -gt "${FAULT_GAP_MS:-2000}" ] || return 0
  echo "    host$2: longest gap $gap ms; faults from 2 s before it to its end:"
  awk -v from=$((end - gap - 2000)) -v to="$end" -v start="$run_start" \
    '$1 >= from && $1 <= to { printf "      +%.1f s  %s\n", ($1 - start) / 1000, substr($0, index($0, " ") + 1) }' "$work/sched"
}

pass=0 total=0
if [ "$mode" = blackhole ]; then
  echo "# fault-runs blackhole: $runs runs, 2 hosts x $nrails rails at $rate, ${seconds}s streams of $msg-byte messages"
  for ((i = 0; i < runs; i++)); do
    host=$((i % 2)) rail=$((i % nrails)) ahead=$((RANDOM % 8 + 1))
    at_ms=$((500 + RANDOM % (seconds * 500)))
    start_peers "FAULT_PEER_RECV_AHEAD=$ahead"
    sleep "$(printf '%d.%03d' $((at_ms / 1000)) $((at_ms % 1000)))"
    $rails blackhole "$host" "$rail" >/dev/null
    total=$((total + 1))
    finish_peers "run $i: blackhole host $host rail $rail at ${at_ms}ms, receivers $ahead ahead" && pass=$((pass + 1))
    $rails heal "$host" "$rail" >/dev/null
    $rails slow "$host" "$rail" "$rate" >/dev/null
  done
else
  echo "# fault-runs random: $seeds seeds from $seed0, 2 hosts x $nrails rails at $rate, ${seconds}s each, a fault every 1-3 s"
  for ((s = seed0; s < seed0 + seeds; s++)); do
    RANDOM=$s
    declare -A state=()
    for ((h = 0; h < 2; h++)); do for ((r = 0; r < nrails; r++)); do state[$h,$r]=ok; done; done
    start_peers "FAULT_PEER_RECV_AHEAD=$((RANDOM % 8 + 1))"
    end=$((SECONDS + seconds)) nfaults=0 minlive=$nrails run_start=$(date +%s%3N)
    : >"$work/sched"
    while [ $((SECONDS + 3)) -lt $end ]; do
      sleep "$((1 + RANDOM % 2)).$((RANDOM % 10))"
      h=$((RANDOM % 2)) r=$((RANDOM % nrails))
      # a rail is usable when neither end has a fault on it
      live=0
      for ((k = 0; k < nrails; k++)); do [ "${state[0,$k]}${state[1,$k]}" = okok ] && live=$((live + 1)); done
      if [ "${state[$h,$r]}" != ok ]; then kind=heal
      else
        kind=$(printf '%s\n' down blackhole slow | sed -n "$((RANDOM % 3 + 1))p")
        [ "$live" -le 1 ] && [ "${state[0,$r]}${state[1,$r]}" = okok ] && kind=heal  # never none
      fi
      case $kind in
        heal) [ "${state[$h,$r]}" = ok ] && continue
              $rails heal "$h" "$r" >/dev/null; $rails slow "$h" "$r" "$rate" >/dev/null; state[$h,$r]=ok ;;
        down) $rails fail "$h" "$r" >/dev/null; state[$h,$r]=down ;;
        blackhole) $rails blackhole "$h" "$r" >/dev/null; state[$h,$r]=blackhole ;;
        slow) $rails slow "$h" "$r" "$(( ${rate%gbit} > 0 ? 100 : 10 ))mbit" >/dev/null; state[$h,$r]=slow ;;
      esac
      nfaults=$((nfaults + 1))
      live=0
      for ((k = 0; k < nrails; k++)); do [ "${state[0,$k]}${state[1,$k]}" = okok ] && live=$((live + 1)); done
      [ "$live" -lt "$minlive" ] && minlive=$live
      echo "$(date +%s%3N) $kind host $h rail $r ($live healthy)" >>"$work/sched"
    done
    for ((h = 0; h < 2; h++)); do for ((r = 0; r < nrails; r++)); do
      [ "${state[$h,$r]}" = ok ] || { $rails heal "$h" "$r" >/dev/null; $rails slow "$h" "$r" "$rate" >/dev/null; }
    done; done
    total=$((total + 1))
    finish_peers "seed $s: $nfaults faults, fewest healthy rails $minlive" && pass=$((pass + 1))
    unset state
  done
fi
echo "# fault-runs $mode: $pass of $total runs passed"
fault_finish
[ "$pass" = "$total" ]
