#!/usr/bin/env bash
# RERAIL_POLICY=failover leaves a degraded primary (root only; skips with exit 77 otherwise).
# Makes 2 hosts x 2 rails (prefix rrperfd) at 200mbit with rail 0 of both hosts slowed to 50mbit
# (a port negotiated down) and runs a 2-channel sendrecv: channel 0's primary is the slow rail.
# Asserts: #wrong = 0; the plugin says the primary is degraded and spreads; host 0's fast rail sent
# clearly more than the slow one (kept to its primary, channel 0 would send as much on rail 0 as
# channel 1 on rail 1) while the slow one still carried its share; nothing is left behind.
# Usage: perf_failover_degraded.sh RERAIL_PERF PLUGIN SOURCE_DIR
set -uo pipefail
perf=$1 plugin=$2 src=$3
source "$(dirname "$0")/lib.sh"
fault_fabric rrperfd "$src" 2 2 200mbit
for h in 0 1; do $rails slow $h 0 50mbit >/dev/null || exit 1; done
txb() { ip netns exec "$RERAIL_NETNS_PREFIX-h0" cat "/sys/class/net/rail$1/statistics/tx_bytes"; }
a0=$(txb 0) a1=$(txb 1)
RERAIL_POLICY=failover NCCL_DEBUG=INFO RERAIL_TCP_IFNAME=rail timeout 120 "$perf" sendrecv --plugin "$plugin" -N 2 \
  --hosts 2 -C 2 -b 8M -e 8M -n 8 -w 2 --timeout 100 --no-progress >"$work/out.txt" 2>"$work/err.txt"
rc=$?
b0=$(txb 0) b1=$(txb 1)
cat "$work/out.txt"
# On failure: every WARN of both ranks (the plugin's reason comes before rerail-perf's last lines).
[ $rc -eq 0 ] || { echo "FAIL: rerail-perf exited with $rc"; grep -E "WARN|failed|->" "$work/err.txt" | tail -40; exit 1; }
grep -q "^# Out of bounds values : 0 OK" "$work/out.txt" || { echo "FAIL: wrong values"; exit 1; }
grep -m1 "RERAIL_POLICY=failover spreads over every healthy rail" "$work/err.txt" ||
  { echo "FAIL: no rank found its 50 Mb/s primary degraded"; grep "NET/rerail" "$work/err.txt" | tail -5; exit 1; }
s0=$((b0 - a0)) s1=$((b1 - a1))
echo "host 0 sent $s0 B on the 50 Mb/s rail, $s1 B on the 200 Mb/s rail"
[ "$s1" -gt $((3 * s0 / 2)) ] || { echo "FAIL: the fast rail did not take the degraded primary's traffic"; exit 1; }
# ... and the slow primary keeps its proportional share (about a fifth), not none: its bandwidth
# estimate must not collapse once it carries less.
[ $((10 * s0)) -gt "$s1" ] || { echo "FAIL: the degraded primary was left idle"; exit 1; }
fault_finish
echo "PASS"
exit 0
