#!/usr/bin/env bash
# scripts/validate-ib.sh without a cluster: (1) --dry-run with made-up node names prints the plan — every
# step's commands on the node they would run on, in order, with the knobs in place — and runs nothing
# (SSH is a stand-in that records any call); (2) bad arguments exit 2 with a message naming the problem.
# What the script does on a real fabric is not checked here (see tests/functional/ib/validate_ib_rxe*.sh
# for a run between two Soft-RoCE guests).
set -euo pipefail
script=$1
fail() { echo "FAIL: $*" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '#!/bin/sh\necho "$@" >>%s/ssh-called\n' "$tmp" >"$tmp/ssh"
chmod +x "$tmp/ssh"
unset "${!RERAIL_@}" STEPS HOSTS A_ADDR B_ADDR BUILD_DIR REMOTE_BUILD_DIR FAULT_CMD_DOWN FAULT_CMD_UP GPUS_PER_NODE || true

# ---- 1. the whole plan, two rails named by RERAIL_IB_HCA ----
out=$(HOSTS="nodea nodeb" SSH="$tmp/ssh" RERAIL_IB_HCA="=mlx5_0:1,mlx5_2:1" RERAIL_TCP_IFNAME=eth9 \
      BUILD_DIR=/opt/ra REMOTE_BUILD_DIR=/opt/rb NCCL_TESTS_DIR=/nt GPUS_PER_NODE=4 \
      bash "$script" --dry-run --out /logs)
echo "$out"
[ ! -e "$tmp/ssh-called" ] || fail "--dry-run called SSH: $(cat "$tmp/ssh-called")"
has() { grep -qF -- "$1" <<<"$out" || fail "dry-run lacks: $1"; }
lineno() { grep -nF -- "$1" <<<"$out" | head -1 | cut -d: -f1; }
before() {
  local a b
  a=$(lineno "$1") b=$(lineno "$2")
  if [ -z "$a" ] || [ -z "$b" ] || [ "$a" -ge "$b" ]; then fail "'$1' not before '$2'"; fi
}
env_rr='RERAIL_IB_HCA==mlx5_0:1\,mlx5_2:1 RERAIL_TCP_IFNAME=eth9'
has "# B's commands run as: $tmp/ssh nodeb \"bash -c '<command>'\""
has "[A nodea] env $env_rr /opt/ra/tools/rerail-info --plugin /opt/ra/net_plugin/libnccl-net-rerail.so; ibv_devinfo -l"
has "[B nodeb] env $env_rr /opt/rb/tools/rerail-info --plugin /opt/rb/net_plugin/libnccl-net-rerail.so; ibv_devinfo -l"
has "# pass criteria:"
has "sendrecv busbw (largest"
for k in 0 1; do
  d=mlx5_$((2 * k))
  srv="[B nodeb] timeout 60 ib_write_bw -d $d -i 1 -x <gid> -s 8388608 -D 5 -F --report_gbits -p $((18515 + k)) &"
  cli="timeout 60 ib_write_bw -d $d -i 1 -x <gid> -s 8388608 -D 5 -F --report_gbits -p $((18515 + k)) nodeb && break; done"
  has "$srv"; has "$cli"; before "$srv" "$cli"
  [ "$(grep -F -- "$cli" <<<"$out" | cut -c1-9)" = "[A nodea]" ] || fail "ib_write_bw client of rail $k not on A"
done
r1="[B nodeb] env PMI_RANK=1 PMI_SIZE=2 RERAIL_TRANSPORT=ib NCCL_DEBUG=INFO $env_rr timeout 660 /opt/rb/tools/rerail-perf/rerail-perf sendrecv,all_reduce -b 8 -e 512M -f 4 -n 20 -w 5 -c 1 -C 4 --plugin /opt/rb/net_plugin/libnccl-net-rerail.so --rendezvous nodea:29517 --no-progress --timeout 600 &"
r0="[A nodea] env PMI_RANK=0 PMI_SIZE=2 RERAIL_TRANSPORT=ib NCCL_DEBUG=INFO $env_rr timeout 660 /opt/ra/tools/rerail-perf/rerail-perf sendrecv,all_reduce -b 8 -e 512M -f 4 -n 20 -w 5 -c 1 -C 4 --plugin /opt/ra/net_plugin/libnccl-net-rerail.so --rendezvous nodea:29517 --no-progress --timeout 600"
has "$r1"; has "$r0"; before "$r1" "$r0"
f1="[B nodeb] env PMI_RANK=1 PMI_SIZE=2 RERAIL_TRANSPORT=ib NCCL_DEBUG=INFO $env_rr timeout 660 /opt/rb/tools/rerail-perf/rerail-perf sendrecv -b 64M -e 64M -w 2 -c 1 --duration 15 -C 4 --plugin /opt/rb/net_plugin/libnccl-net-rerail.so --rendezvous nodea:29518"
f0="[A nodea] env PMI_RANK=0 PMI_SIZE=2 RERAIL_TRANSPORT=ib NCCL_DEBUG=INFO $env_rr timeout 660 /opt/ra/tools/rerail-perf/rerail-perf sendrecv -b 64M -e 64M -w 2 -c 1 --duration 15 -C 4 --plugin /opt/ra/net_plugin/libnccl-net-rerail.so --rendezvous nodea:29518"
down="[B nodeb] sudo -n ip link set dev <netdev-of-mlx5_0> down   # RoCE; on InfiniBand: sudo -n ibportstate -C mlx5_0 -P 1 <lid-of-mlx5_0:1> 1 disable"
up="[B nodeb] sudo -n ip link set dev <netdev-of-mlx5_0> up   # RoCE; on InfiniBand: sudo -n ibportstate -C mlx5_0 -P 1 <lid-of-mlx5_0:1> 1 enable"
has "$f1"; has "$down"; has "$up"; has "$f0"
wait_up="[A nodea] # in the background of the run: wait until both ranks log a link of rail 0 up (connecting -> healthy), then"
before "$f1" "$wait_up"; before "$wait_up" "[A nodea] sleep 5"; before "[A nodea] sleep 5" "$down"
before "$down" "[A nodea] sleep 10"; before "[A nodea] sleep 10" "$up"; before "$up" "$f0"
has "[A nodea] scripts/run-nccl-tests.sh --hosts nodea,nodeb --gpus-per-node 4 --tests all_reduce,sendrecv --nccl-tests /nt --rerail-lib /opt/ra/net_plugin --env RERAIL_TRANSPORT=ib --out /logs/nccl"
for t in all_reduce sendrecv; do
  has "NCCL_NET_PLUGIN=\"rerail\" LD_LIBRARY_PATH=\"/opt/ra/net_plugin\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}\" RERAIL_TRANSPORT=\"ib\" RERAIL_IB_HCA=\"=mlx5_0:1,mlx5_2:1\" RERAIL_TCP_IFNAME=\"eth9\" NCCL_IB_HCA=\"=mlx5_0:1,mlx5_2:1\" mpirun -np 8 -H nodea:4,nodeb:4"
  has "/nt/${t}_perf -b 8 -e 8G -f 2 -g 1 -n 20 -w 5 -c 1 > /logs/nccl/$t.rerail.log 2>&1"
done
has "# dry run: nothing was run"
echo "ok: full plan"

# ---- the knobs: --peer, one step, own fault commands, addresses, fault rail, one rail ----
out=$(SSH="$tmp/ssh" STEPS="failover" FAULT_CMD_DOWN="sudo -n /sbin/pull rail0" FAULT_CMD_UP="sudo -n /sbin/plug rail0" \
      A_ADDR=10.0.0.1 RERAIL_IB_HCA=mlx5_3 FAULT_AT=3 FAULT_FOR=2 PERF_CHANNELS=6 bash "$script" --peer nodeq --dry-run)
echo "$out"
has "[B nodeq] sudo -n /sbin/pull rail0"; has "[B nodeq] sudo -n /sbin/plug rail0"
has "[A $(hostname)] sleep 3"; has "[A $(hostname)] sleep 2"
has "--rendezvous 10.0.0.1:29517"; has " -C 6 "
grep -q '^\[.*\(ib_write_bw\|run-nccl-tests\|sendrecv,all_reduce\)' <<<"$out" && fail "STEPS=failover ran other steps"
out=$(SSH="$tmp/ssh" STEPS="perf nccl" HOSTS="x y" bash "$script" --dry-run)
has "# rails: rerail-info on each node lists them; the plan below shows 1 rail(s): <hca>"
has "--gpus-per-node 8"
grep -q '^\[.*\(ib_write_bw\|sleep\)' <<<"$out" && fail "STEPS='perf nccl' ran preflight or failover"
[ ! -e "$tmp/ssh-called" ] || fail "--dry-run called SSH: $(cat "$tmp/ssh-called")"
echo "ok: knobs"

# ---- 2. bad arguments: exit 2 and a clear message ----
reject() {  # reject "message part" ENV... -- ARGS...
  local want=$1 rc=0 err envs=()
  shift
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  err=$(env SSH="$tmp/ssh" "${envs[@]}" bash "$script" "$@" --dry-run 2>&1 >/dev/null) || rc=$?
  [ "$rc" = 2 ] || fail "'${envs[*]} $*' exit $rc, want 2"
  grep -qF -- "$want" <<<"$err" || fail "'${envs[*]} $*': message '$err' lacks '$want'"
  echo "rejected: ${envs[*]} $* -> $err"
}
reject "unknown step 'bogus' in STEPS (allowed: preflight perf failover nccl)" STEPS="perf bogus" -- --peer b
reject "unknown step 'ncc' in STEPS" -- --peer b --steps preflight,ncc
reject "STEPS is empty" -- --peer b --steps " "
reject "no peer: give --peer B_HOST or HOSTS=\"a b\"" --
reject "HOSTS must name exactly two nodes" HOSTS="a b c" --
reject "HOSTS names the same node twice ('a')" HOSTS="a a" --
reject "--peer 'c' and HOSTS='a b' disagree" HOSTS="a b" -- --peer c
reject "not a host name: 'b;reboot'" -- --peer 'b;reboot'
reject "--peer needs a value" -- --peer
reject "unknown argument '--frob'" -- --peer b --frob
reject "FAULT_AT must be a non-negative integer, got '5s'" FAULT_AT=5s -- --peer b
reject "PERF_CHANNELS must be a positive integer, got '0'" PERF_CHANNELS=0 -- --peer b
reject "MIN_RATIO must be a number, got 'high'" MIN_RATIO=high -- --peer b
[ ! -e "$tmp/ssh-called" ] || fail "a rejected run called SSH: $(cat "$tmp/ssh-called")"
echo "PASS"
