#!/usr/bin/env bash
# Forced staging vs direct on the same loopback rails (issue 13; not a test): rerail-perf sendrecv of
# SIZE-byte messages between 2 processes, RERAIL_FORCE_STAGING=0 and =1 alternating for ROUNDS rounds;
# prints each busbw, the medians and the ratio staged/direct (target >= 0.9).
# Env: BUILD_DIR (build), SIZE (64M), ITERS (20), ROUNDS (3), RERAIL_TCP_STREAMS as usual.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
perf="$BUILD_DIR/tools/rerail-perf/rerail-perf"
[ -x "$perf" ] || cmake --build "$BUILD_DIR" --target rerail-perf nccl-net-rerail
SIZE=${SIZE:-64M}; ITERS=${ITERS:-20}; ROUNDS=${ROUNDS:-3}
busbw() {  # last column before #wrong of the data row: take the out-of-place busbw (field 8)
  RERAIL_TCP_IFNAME=lo RERAIL_FORCE_STAGING=$1 "$perf" sendrecv --plugin "$PWD/$BUILD_DIR/net_plugin/libnccl-net-rerail.so" -N 2 -b "$SIZE" -e "$SIZE" -n "$ITERS" -w 3 -c 1 \
    | awk '!/^#/ && NF >= 8 {print $8, $9; exit}'
}
d=(); s=()
for r in $(seq "$ROUNDS"); do
  read -r bw wrong < <(busbw 0); echo "direct  round $r: busbw $bw GB/s, #wrong $wrong"; d+=("$bw")
  read -r bw wrong < <(busbw 1); echo "staged  round $r: busbw $bw GB/s, #wrong $wrong"; s+=("$bw")
done
med() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
md=$(med "${d[@]}"); ms=$(med "${s[@]}")
echo "median direct $md GB/s, staged $ms GB/s, ratio $(awk -v a="$ms" -v b="$md" 'BEGIN {printf "%.3f", a / b}') (target >= 0.9)"
