#!/usr/bin/env bash
# Runs net_many_comms_test in a private network namespace with 4 veth "rails" (rr0..rr3, 10.77.R.1/24;
# traffic between local addresses stays inside the namespace). Needs root (unshare -n); skips otherwise.
set -euo pipefail
test_bin=$1
if [ "$(id -u)" -ne 0 ] || ! command -v unshare > /dev/null || ! command -v ip > /dev/null; then
  echo "SKIP: needs root, unshare and ip"
  exit 0
fi
exec unshare -n bash -c '
  set -e
  ip link set lo up
  for i in 0 1 2 3; do
    ip link add rr$i type veth peer name rq$i
    ip addr add 10.77.$i.1/24 dev rr$i
    ip link set rr$i up
    ip link set rq$i up
  done
  ulimit -n 20000 2>/dev/null || true
  board=$(mktemp -d)
  trap "rm -rf $board" EXIT
  export RERAIL_TCP_IFNAME=rr RERAIL_TCP_STREAMS=1 RERAIL_BOARD_DIR=$board
  "$0"' "$test_bin"
