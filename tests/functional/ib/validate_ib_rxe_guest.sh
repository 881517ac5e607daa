#!/usr/bin/env bash
# Runs inside BOTH guests of `scripts/rxe-guest.sh --pair --rails 2` (validate_ib_rxe.sh boots them):
# guest a is node A and runs scripts/validate-ib.sh for real against guest b (node B), reached through
# validate_ib_rsh.sh (busybox nc; the guests have no ssh). `sudo` is a pass-through here (the guests run
# as root), so the failover step's default fault commands (`sudo -n ip link set dev eth0 down|up` on B,
# from rerail-info's netdev of rxe0) run unchanged.
#   validate_ib_rxe_guest.sh REPO_ROOT BUILD_DIR SIGCHLD_DEFAULT_EXEC
# Knobs for TCG (one emulated vCPU per guest): small sizes, 2 channels, RERAIL_IB_TIMEOUT=18 and
# RERAIL_STALL_MS=4000 as in rxe_pair_perf_guest.sh (rxe's ACKs come late under emulation), MIN_RATIO=0
# (the ratio to ib_write_bw is printed, not judged: the emulated CPU is the limit, not the wire). The
# rendezvous and the plugin's TCP handshake streams use rail 1's wire (10.20.1.x, eth1); rail 0 is pulled.
set -u
root=$1 build=$2 sigdfl=$3   # sigdfl: sigchld_default_exec.c (busybox nc -e ignores SIGCHLD; sshd does not)
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p /dev/shm && mount -t tmpfs shm /dev/shm 2>/dev/null   # the rail-health board
[ -e /dev/fd ] || ln -s /proc/self/fd /dev/fd                    # bash's <(...), as on a distribution
mkdir -p /tmp/bin
# shellcheck disable=SC2016  # the shim's own $1 / $@
printf '#!/bin/sh\n[ "$1" = -n ] && shift\nexec "$@"\n' >/tmp/bin/sudo
chmod +x /tmp/bin/sudo
export PATH=/tmp/bin:$PATH
if [ "$RXE_ROLE" = b ]; then
  busybox nc -ll -p 2222 -e "$sigdfl" &   # runs bash per connection
  for _ in $(seq 1 600); do [ -e /tmp/validate-done ] && exit 0; sleep 1; done
  echo "guest b: no end signal from guest a in 600 s"; exit 1
fi
for _ in $(seq 60); do bash "$here/validate_ib_rsh.sh" 10.20.1.2 true 2>/dev/null && break; sleep 1; done  # b's listener
export SSH="bash $here/validate_ib_rsh.sh" HOSTS="10.20.1.1 10.20.1.2" RERAIL_TCP_IFNAME="=eth1" \
       RERAIL_IB_TIMEOUT=18 RERAIL_STALL_MS=4000 WBW_ARGS="-s 1048576 -n 20" \
       PERF_ARGS="-b 16 -e 1M -f 256 -n 2 -w 1 -c 1" PERF_CHANNELS=2 PERF_TIMEOUT=200 MIN_RATIO=0 \
       FAILOVER_ARGS="-b 1M -e 1M -w 2 -c 1 --duration 15" FAULT_AT=3 FAULT_FOR=6 OUT_DIR=/tmp/vib BUILD_DIR=$build
bash "$root/scripts/validate-ib.sh"
rc=$?
for f in /tmp/vib/*.log; do echo "---- $f (WARN, port and failback lines)"; grep -E 'WARN|probing|IB rail|## exit' "$f" | head -20; done
if [ "$rc" != 0 ]; then for f in /tmp/vib/*.txt /tmp/vib/*.log; do echo "---- $f"; tail -n 15 "$f"; done; fi
$SSH 10.20.1.2 "touch /tmp/validate-done"
exit $rc
