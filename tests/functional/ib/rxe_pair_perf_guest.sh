#!/usr/bin/env bash
# Runs inside BOTH guests of `scripts/rxe-guest.sh --pair --rails 2` (guest a = rank 0, guest b = rank
# 1; PMI_RANK / PMI_SIZE as a launcher would set them): rerail-perf over rerail's net plugin with
# RERAIL_TRANSPORT=ib on the guests' Soft-RoCE ports rxe0 / rxe1. Driven by rxe_pair_perf.sh (host side),
# which checks the output; this script only runs and labels.
#
#   rxe_pair_perf_guest.sh perf|failover RERAIL_PERF NET_SO
#
# The out-of-band rendezvous and the plugin's TCP bootstrap streams use rail 1's wire (10.20.1.x, eth1):
# the guests have no separate management network, and the failover mode cuts rail 0.
#   perf:     "## run ib2": sendrecv + all_reduce 8 B .. 8 MiB, every value verified, both rails;
#             "## run bc2": 8 MiB broadcast (one direction, rank 0 -> 1) on both rails; "## run bc1rN" /
#             "wbwrN", N = 1..3 alternating: the same on rxe0 only, and ib_write_bw on rxe0, a -> b (the
#             reference figure).
#   failover: "## run cut": 1 MiB sendrecv loops of --duration 10 s while the host pulls rail 0 of
#             guest a (RXE_CUT); every output line of guest a is stamped "[EPOCHREALTIME]".
#             Two QPs per link here (RERAIL_IB_QPS_PER_LINK=2; the default is 1), so a multi-QP link fails
#             over on a real verbs stack too.
set -u
mode=$1 perf=$2 so=$3
rank=0 peer_rdv=10.20.1.1
[ "$RXE_ROLE" = b ] && rank=1
mkdir -p /dev/shm && mount -t tmpfs shm /dev/shm 2>/dev/null  # the rail-health board (RERAIL_BOARD_DIR)
# RERAIL_IB_TIMEOUT=18 (1.07 s per try, ~4.3 s to RETRY_EXC_ERR) and RERAIL_STALL_MS=4000: under TCG
# emulation rxe's ACKs often take longer than the defaults' 67 ms and 1 s, and each such delay would
# be a failover.
export PMI_RANK=$rank PMI_SIZE=2 RERAIL_TRANSPORT=ib NCCL_DEBUG=INFO RERAIL_TCP_IFNAME==eth1 RERAIL_IB_TIMEOUT=18 \
       RERAIL_STALL_MS=4000
port=29500

# run LABEL [VAR=VALUE...] -- RERAIL-PERF ARGS: one rerail-perf job, both ranks, a fresh rendezvous port.
run() {
  local label=$1 envs=()
  shift
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  port=$((port + 1))
  echo "## run $label (rank $rank)"
  env ${envs[@]+"${envs[@]}"} timeout 200 "$perf" "$@" --plugin "$so" --rendezvous "$peer_rdv:$port" --no-progress 2>&1
  echo "## rc $label $?"
}

# The IPv4-mapped RoCE v2 GID index of rxe0 (what the plugin picks), for ib_write_bw.
gid_index() {
  local p=/sys/class/infiniband/$1/ports/1 i
  for i in 0 1 2 3 4 5 6 7; do
    case "$(cat $p/gids/$i 2>/dev/null)|$(cat $p/gid_attrs/types/$i 2>/dev/null)" in
      0000:0000:0000:0000:0000:ffff:*"|RoCE v2") echo "$i"; return ;;
    esac
  done
  echo 1
}

# wbw LABEL: ib_write_bw on rxe0, b the server, a the client (a writes to b), 20 x 8 MiB.
wbw() {
  local label=$1 x
  x=$(gid_index rxe0)
  echo "## run $label (rank $rank, gid index $x)"
  if [ "$RXE_ROLE" = b ]; then
    timeout 60 ib_write_bw -d rxe0 -x "$x" -s 8388608 -n 20 -F 2>&1
  else
    for _ in 1 2 3 4 5 6 7 8 9 10; do  # the server may not listen yet
      sleep 1
      timeout 60 ib_write_bw -d rxe0 -x "$x" -s 8388608 -n 20 -F 10.20.0.2 2>&1 && break
    done
  fi
  echo "## rc $label $?"
}

case "$mode" in
  perf)
    run ib2 -- sendrecv,all_reduce -b 8 -e 8M -f 4 -n 2 -w 1 -c 1 --timeout 200
    run bc2 -- broadcast -b 8M -e 8M -n 2 -w 1 -c 1 --timeout 100
    # One rail and ib_write_bw alternate for 3 rounds (the host takes the medians): under TCG one
    # figure swings by a third from run to run.
    for round in 1 2 3; do
      run "bc1r$round" RERAIL_IB_HCA==rxe0 -- broadcast -b 8M -e 8M -n 3 -w 1 -c 1 --timeout 100
      if command -v ib_write_bw >/dev/null; then wbw "wbwr$round"; else echo "## no ib_write_bw in the guest"; fi
    done
    ;;
  failover)
    if [ "$RXE_ROLE" = a ]; then
      run cut RERAIL_IB_QPS_PER_LINK=2 -- sendrecv -b 1M -e 1M -w 2 -c 1 --duration 10 --timeout 150 |
        while IFS= read -r l; do echo "[$EPOCHREALTIME] $l"; done
    else
      run cut RERAIL_IB_QPS_PER_LINK=2 -- sendrecv -b 1M -e 1M -w 2 -c 1 --duration 10 --timeout 150
    fi
    ;;
  *) echo "rxe_pair_perf_guest: unknown mode $mode"; exit 2 ;;
esac
exit 0
