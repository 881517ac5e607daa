#!/usr/bin/env bash
# The NCCL-proxy conformance suite over the real kernel verbs stack: conformance_test and its
# conformance_peer process in ONE QEMU guest (scripts/rxe-guest.sh --rails 2), both with
# RERAIL_TRANSPORT=ib on the guest's Soft-RoCE ports rxe0 and rxe1; their RC QPs meet through rxe's
# local loopback (rxe0 to rxe0, rxe1 to rxe1 of the same guest), the bootstrap streams over the guest's
# lo. Each case in its own process, every plugin init on exactly rxe0,rxe1 (ib/ib_conformance.sh).
# Afterwards rxe's own packet counters (sysfs hw_counters) must show packets sent and received on both
# ports: the bytes went through the kernel's verbs stack.
#
#   rxe_conformance.sh RXE_GUEST_SH CONFORMANCE_TEST CONFORMANCE_PEER NET_SO [GTEST_FILTER]
#                                                              (exit 77: cannot boot a guest here)
# Under TCG (one emulated vCPU for both processes and rxe) the plugin runs with RERAIL_IB_TIMEOUT=18
# (1.07 s per try) and RERAIL_STALL_MS=4000, as the guest pair tests do: rxe's ACKs often take longer
# than the defaults' 67 ms and 1 s. The harness's own bounds (watchdog, plan timeouts) run with
# --time-scale $RXE_CONF_TIME_SCALE (default 4: the largest case took 88 s of its 110 s watchdog).
# RXE_CONF_PLUGIN_ENV replaces those two plugin settings (empty: the plugin's defaults).
# RXE_CONF_GUEST_TIMEOUT bounds the whole guest run (default 1200 s), RXE_CONF_CASE_TIMEOUT one case
# (default 600 s).
set -uo pipefail
guest=$1 bin=$(readlink -f "$2") peer=$(readlink -f "$3") so=$(readlink -f "$4") filter=${5:-*}
here=$(cd "$(dirname "$0")" && pwd)
penv=${RXE_CONF_PLUGIN_ENV-RERAIL_IB_TIMEOUT=18 RERAIL_STALL_MS=4000}
scale=${RXE_CONF_TIME_SCALE:-4} gto=${RXE_CONF_GUEST_TIMEOUT:-1200} cto=${RXE_CONF_CASE_TIMEOUT:-600}
counters='for d in rxe0 rxe1; do echo "rxe counters $d: $(cd /sys/class/infiniband/$d/ports/1/hw_counters &&'
counters+=' for k in *; do printf "%s %s, " $k $(cat $k); done)"; done;'
cmd="mkdir -p /dev/shm && mount -t tmpfs shm /dev/shm;"  # the rail-health board (RERAIL_BOARD_DIR)
cmd+=" env $penv bash $here/ib_conformance.sh --ports rxe0,rxe1"
cmd+=" --case-timeout $cto --filter '$filter' $bin --time-scale $scale; rc=\$?; $counters exit \$rc"
out=$(bash "$guest" --rails 2 --mem 3584 --timeout "$gto" --with "$bin" --with "$peer" --with "$so" \
        --with "$here/ib_conformance.sh" -- "$cmd" 2>&1)
rc=$?
echo "$out"
[ "$rc" = 77 ] && exit 77
[ "$rc" = 0 ] || { echo "FAIL: guest exit $rc"; exit 1; }
for d in rxe0 rxe1; do
  line=$(grep "^rxe counters $d: " <<<"$out")
  grep -q " sent_pkts [1-9]" <<<"$line" && grep -q " rcvd_pkts [1-9]" <<<"$line" ||
    { echo "FAIL: rxe's counters show no packets sent and received on $d"; exit 1; }
done
echo "ib_rxe_conformance ok"
