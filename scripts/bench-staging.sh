#!/usr/bin/env bash
# Forced staging vs direct on the same rails (issue 13; a benchmark, not a test): rerail-perf sendrecv
# of SIZE-byte messages between 2 processes, RERAIL_FORCE_STAGING=0 and =1 alternating for ROUNDS
# rounds, at each operating point of POINTS:
#   lo          loopback (one rail, memory-bound: staging adds two memcpys per byte to the kernel's two)
#   RATE        2 simulated hosts (network namespaces, root only) joined by RAILS rails, each limited to
#               RATE both ways by tc tbf (e.g. 1gbit): the wire is the bottleneck, as with a real NIC
# prints each busbw, the medians and the ratio staged/direct per point (target >= 0.9).
# Env: BUILD_DIR (build), SIZE (64M), ITERS (20), ROUNDS (3), POINTS ("lo 1gbit 200mbit"), RAILS (2),
#      RERAIL_TCP_STREAMS as usual.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
perf="$BUILD_DIR/tools/rerail-perf/rerail-perf"
plugin="$PWD/$BUILD_DIR/net_plugin/libnccl-net-rerail.so"
[ -x "$perf" ] || cmake --build "$BUILD_DIR" --target rerail-perf nccl-net-rerail
SIZE=${SIZE:-64M}; ITERS=${ITERS:-20}; ROUNDS=${ROUNDS:-3}; POINTS=${POINTS:-lo 1gbit 200mbit}; RAILS=${RAILS:-2}
NS=rrstg
cleanup() { RERAIL_NETNS_PREFIX=$NS scripts/netns-rails.sh down >/dev/null 2>&1 || true; }
trap cleanup EXIT

busbw() {  # force(0|1) point: the out-of-place busbw and #wrong of the data row
  local ifn=lo
  local -a hosts=()
  if [[ "$2" != lo ]]; then ifn=rail; hosts=(--hosts 2 --netns-prefix "$NS"); fi
  RERAIL_TCP_IFNAME=$ifn RERAIL_FORCE_STAGING="$1" "$perf" sendrecv --plugin "$plugin" -N 2 "${hosts[@]}" \
      -b "$SIZE" -e "$SIZE" -n "$ITERS" -w 3 -c 1 | awk '!/^#/ && NF >= 8 {print $8, $9; exit}'
}
med() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

summary=()
for point in $POINTS; do
  if [[ "$point" != lo ]]; then
    if [[ $(id -u) -ne 0 ]]; then echo "point $point: skipped (network namespaces need root)"; continue; fi
    RERAIL_NETNS_PREFIX=$NS scripts/netns-rails.sh up 2 "$RAILS" >/dev/null
    for h in 0 1; do
      for ((r = 0; r < RAILS; r++)); do RERAIL_NETNS_PREFIX=$NS scripts/netns-rails.sh slow $h $r "$point" >/dev/null; done
    done
  fi
  d=(); s=()
  for r in $(seq "$ROUNDS"); do
    read -r bw wrong < <(busbw 0 "$point"); echo "$point direct  round $r: busbw $bw GB/s, #wrong $wrong"; d+=("$bw")
    read -r bw wrong < <(busbw 1 "$point"); echo "$point staged  round $r: busbw $bw GB/s, #wrong $wrong"; s+=("$bw")
  done
  md=$(med "${d[@]}"); ms=$(med "${s[@]}")
  line="$point$([[ $point != lo ]] && echo " x $RAILS rails"): median direct $md GB/s, staged $ms GB/s, ratio $(awk -v a="$ms" -v b="$md" 'BEGIN {printf "%.3f", a / b}')"
  echo "$line"; summary+=("$line")
  [[ "$point" != lo ]] && cleanup
done
echo "---- forced staging vs direct, $SIZE messages, $ROUNDS rounds (target >= 0.9)"
printf '%s\n' "${summary[@]}"
