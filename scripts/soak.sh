#!/usr/bin/env bash
# rerail soak bench (issue 15): verified traffic both ways between two processes on a simulated 2-host
# multi-rail fabric for a given duration, with a random rail fault every few seconds (down, black hole,
# heal; never every rail at once), sampling each process's open descriptors (/proc/PID/fd) and resident
# memory (VmRSS) every INTERVAL seconds. Prints the samples, then per process and figure the mean of the
# first and the last quarter of the samples after warm-up, the maximum, and the growth % (target < 5 %).
#
#   scripts/soak.sh [--seconds S (3600)] [--interval I (10)] [--warmup W (60)] [--rails K (4)]
#                   [--rate RATE (1gbit)] [--msg BYTES (4 MiB)] [--seed N (1)]
# Root only (network namespaces, tc; exit 77 otherwise). Env: BUILD_DIR (build), RERAIL_NETNS_PREFIX
# (rrsk). Samples go to $BUILD_DIR/soak/samples.csv. Exit 0 when both peers ended cleanly (no error, no
# bad message) - the growth figures are reported, not judged.
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-build}
[ -d "$BUILD_DIR" ] || BUILD_DIR="$here/$BUILD_DIR"
PEER="$BUILD_DIR/tests/net_fault_peer"
SO="$BUILD_DIR/net_plugin/libnccl-net-rerail.so"
seconds=3600 interval=10 warmup=60 nrails=4 rate=1gbit msg=$((4 << 20)) seed=1
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds=$2; shift 2 ;;
    --interval) interval=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --rails) nrails=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --msg) msg=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    *) sed -n '2,13p' "$0"; exit 2 ;;
  esac
done
[ -x "$PEER" ] && [ -f "$SO" ] || { echo "soak: build first ($PEER, $SO)" >&2; exit 2; }
[ "$warmup" -lt "$seconds" ] || warmup=$((seconds / 4))
# shellcheck source=../tests/faults/lib.sh
source "$here/tests/faults/lib.sh"
fault_fabric "${RERAIL_NETNS_PREFIX:-rrsk}" "$here" 2 "$nrails" "$rate"
out="$BUILD_DIR/soak"
mkdir -p "$out"
csv="$out/samples.csv"

for h in 0 1; do
  mkfifo "$work/in$h"
  # ip netns exec and env exec the peer: $! is the peer's own pid.
  ip netns exec "$RERAIL_NETNS_PREFIX-h$h" env NCCL_DEBUG=WARN RERAIL_TCP_IFNAME=rail FAULT_PEER_HANG_MS=20000 \
    "$PEER" "$SO" "$((seconds * 1000))" "$msg" <"$work/in$h" >"$work/out$h" 2>"$work/log$h" &
  eval "pid$h=$!"
done
exec 5>"$work/in0" 6>"$work/in1"
for _ in $(seq 100); do
  grep -q HANDLE "$work/out0" 2>/dev/null && grep -q HANDLE "$work/out1" 2>/dev/null && break
  sleep 0.1
done
grep HANDLE "$work/out1" >&5
grep HANDLE "$work/out0" >&6

sample() {  # t fd0 rss0_kb fd1 rss1_kb
  local t=$1 line="$1" p
  for p in "$pid0" "$pid1"; do
    line="$line,$(ls "/proc/$p/fd" 2>/dev/null | wc -l),$(awk '/^VmRSS/ {print $2}' "/proc/$p/status" 2>/dev/null)"
  done
  echo "$line" >>"$csv"
}
echo "t_s,fd0,rss0_kb,fd1,rss1_kb" >"$csv"
echo "# soak: ${seconds}s, 2 hosts x $nrails rails at $rate, $msg-byte messages, a fault every 2-6 s (seed $seed), sample every ${interval}s"
RANDOM=$seed
declare -A bad=()
start=$SECONDS next_sample=0 next_fault=$((2 + RANDOM % 5))
while [ $((SECONDS - start)) -lt $((seconds - 3)) ] && kill -0 "$pid0" 2>/dev/null; do
  t=$((SECONDS - start))
  if [ "$t" -ge "$next_sample" ]; then sample "$t"; next_sample=$((next_sample + interval)); fi
  if [ "$t" -ge "$next_fault" ]; then
    h=$((RANDOM % 2)) r=$((RANDOM % nrails))
    if [ -n "${bad[$r]:-}" ]; then
      $rails heal "${bad[$r]}" "$r" >/dev/null; $rails slow "${bad[$r]}" "$r" "$rate" >/dev/null; unset "bad[$r]"
    elif [ "${#bad[@]}" -lt $((nrails - 1)) ]; then
      if [ $((RANDOM % 2)) = 0 ]; then $rails fail "$h" "$r" >/dev/null; else $rails blackhole "$h" "$r" >/dev/null; fi
      bad[$r]=$h
    fi
    next_fault=$((t + 2 + RANDOM % 5))
  fi
  sleep 1
done
for r in "${!bad[@]}"; do $rails heal "${bad[$r]}" "$r" >/dev/null; $rails slow "${bad[$r]}" "$r" "$rate" >/dev/null; done
sample "$((SECONDS - start))"
wait "$pid0"; e0=$?
wait "$pid1"; e1=$?
exec 5>&- 6>&-
cat "$csv"
echo "RESULT host0: $(grep RESULT "$work/out0" | sed 's/^RESULT //') (exit $e0)"
echo "RESULT host1: $(grep RESULT "$work/out1" | sed 's/^RESULT //') (exit $e1)"
# Growth: mean of the last quarter of the post-warm-up samples vs mean of its first quarter (descriptor
# counts move by a few while rails are down and re-connect; a leak shows as a trend, not a single sample).
awk -F, -v w="$warmup" '
  NR == 1 || $1 < w { next }
  { ++n; for (c = 2; c <= 5; ++c) { v[n, c] = $c; if ($c > max[c]) max[c] = $c } }
  END {
    split("fd0 rss0_kb fd1 rss1_kb", name, " ")
    if (n < 4) { printf "not enough samples after the %ds warm-up (%d)\n", w, n; exit }
    q = int(n / 4)
    for (c = 2; c <= 5; ++c) {
      a = 0; b = 0
      for (i = 1; i <= q; ++i) { a += v[i, c]; b += v[n - q + i, c] }
      a /= q; b /= q
      printf "%-8s first quarter %10.1f  last quarter %10.1f  max %8d  growth %+.1f %%\n", name[c-1], a, b, max[c],
             (a > 0 ? 100 * (b - a) / a : 0)
    }
  }' "$csv"
fault_finish
[ "$e0" = 0 ] && [ "$e1" = 0 ]
