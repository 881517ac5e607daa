#!/usr/bin/env bash
# scripts/validate-ib.sh's verdicts without a cluster, with stand-ins: SSH runs B's commands here, and a
# made-up BUILD_DIR holds a rerail-info that lists two RoCE ports and a rerail-perf that prints the plugin
# log lines and nccl-tests-style tables the real ones print (their formats as seen between the two rxe
# guests, tests/functional/ib/validate_ib_rxe.sh); ib_write_bw and nvidia-smi stand-ins are on PATH. The
# stand-in ranks wait for the fault commands (FAULT_CMD_DOWN / _UP touch files) before they print a
# failover WARN and a failback, so the script's timeline checks run on a real order of events.
# Checks: all pass -> exit 0 with the expected PASS / NOT RUN lines; a wrong value, a missing failback, a
# TCP fallback, a low busbw ratio, a failing fault command -> exit 1 with a FAIL line naming it;
# no ib_write_bw -> preflight NOT RUN and the ratio NOT RUN; B unreachable or without the build -> FAIL, exit 1.
set -euo pipefail
script=$1
fail() { echo "FAIL: $*" >&2; exit 1; }
tmp=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT
unset "${!RERAIL_@}" STEPS HOSTS A_ADDR B_ADDR BUILD_DIR REMOTE_BUILD_DIR FAULT_CMD_DOWN FAULT_CMD_UP GPUS_PER_NODE \
      PERF_CHANNELS || true
mkdir -p "$tmp/build/tools/rerail-perf" "$tmp/build/net_plugin" "$tmp/bin"
: >"$tmp/build/net_plugin/libnccl-net-rerail.so"

# ssh HOST CMD: run CMD here
printf '#!/bin/sh\nshift\nexec bash -c "$*"\n' >"$tmp/bin/ssh"
printf '#!/bin/sh\necho "NVIDIA-SMI has failed (stand-in)"; exit 9\n' >"$tmp/bin/nvidia-smi"
cat >"$tmp/bin/ib_write_bw" <<'EOF'
#!/bin/bash
# perftest's client prints the result row; the server (no host argument) prints it too.
echo "                    RDMA_Write BW Test"
echo " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]"
echo " 8388608    5000             0.00               ${FAKE_WBW_GBITS:-80.00}              0.001192"
EOF
cat >"$tmp/build/tools/rerail-info" <<'EOF'
#!/bin/bash
echo "rerail 0.0.0-standin"
echo "IB devices: 2 (libibverbs loaded: stand-in)"
for k in 0 1; do
  echo "  mlx5_$k port 1:"
  echo "    link layer:          Ethernet (RoCE v2)"
  echo "    guid:                0x000000000000000$k"
  echo "    gid:                 index 3 (auto) ::ffff:10.0.$k.1 on ens${k}f0"
  echo "    speed:               100000 Mbps (4x EDR 25000 Mbps)"
  echo "    mtu:                 4096"
  echo "    lid:                 0"
  echo "    pciPath:             (none)"
done
echo "  skipped: mlx5_9: port DOWN"
echo "params: (stand-in)"
EOF
cat >"$tmp/build/tools/rerail-perf/rerail-perf" <<'EOF'
#!/bin/bash
r=$PMI_RANK
say() { echo "vm:1:1 [rerail] $1 NET/rerail : $2" >&2; }
say INFO "RERAIL_TRANSPORT=ib: offering IB ports mlx5_0,mlx5_1; handshakes over TCP (eth0)"
if [ -n "${FAKE_TCP:-}" ]; then say INFO "rerail 0.0 ABI v12, transports: tcp(eth0), policy auto"
else say INFO "rerail 0.0 ABI v12, transports: ib(mlx5_0,mlx5_1), policy auto"; fi
for k in 0 1; do
  say INFO "conn 00000000000000ab link $k (ib mlx5_$k to peer rail $k): connecting -> healthy (hello answered)"
  say INFO "conn 00000000000000cd: link $k up (ib mlx5_$k link $k, epoch 1)"
done
if [[ " $* " == *" --duration "* ]]; then
  for _ in $(seq 40); do [ -e "$FAKE_DIR/down" ] && break; sleep 0.1; done
  [ "$r" = 1 ] && say INFO "IB rail mlx5_0 down (port error)"
  [ "$r" = 1 ] && say WARN "ib mlx5_0 to peer rail 0 failed (port down): re-sending 1048576 bytes (1 chunks) on 1 surviving link(s)"
  for _ in $(seq 100); do [ -e "$FAKE_DIR/up" ] && break; sleep 0.1; done
  sleep 0.2
  [ -z "${FAKE_NOFAILBACK:-}" ] && say INFO "conn 00000000000000ab link 0 (ib mlx5_0 to peer rail 0): probing -> healthy (probe answered)"
fi
[ "$r" = 0 ] || exit 0
IFS=, read -r -a colls <<<"$1"
for c in "${colls[@]}"; do
  echo "# rerail-perf $c: nranks 2 channels 4 minBytes 8 maxBytes 8388608 step: 4(factor) warmup iters: 1 iters: 2 validation: 1"
  echo "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong"
  echo "           8             2     float     sum      -1    20.10    0.00    0.00      0    19.80    0.00    0.00      0"
  echo "     8388608       2097152     float     sum      -1   ${FAKE_US:-493.00}   17.02   17.02      0   ${FAKE_US:-495.00}   16.95   16.95      ${FAKE_WRONG:-0}"
  if [ -n "${FAKE_WRONG:-}" ]; then echo "# Out of bounds values : 1 FAILED"; else echo "# Out of bounds values : 0 OK"; fi
  echo "# Avg bus bandwidth    : 8.5"
done
[ -z "${FAKE_WRONG:-}" ]
EOF
chmod +x "$tmp"/bin/* "$tmp/build/tools/rerail-info" "$tmp/build/tools/rerail-perf/rerail-perf"

# run NAME WANT_RC [VAR=VALUE...]: validate-ib.sh with the stand-ins; output in $tmp/NAME.out
run() {
  local name=$1 want=$2 rc=0
  shift 2
  rm -f "$tmp/down" "$tmp/up"
  env PATH="$tmp/bin:$PATH" SSH="$tmp/bin/ssh" HOSTS="127.0.0.1 nodeb" BUILD_DIR="$tmp/build" FAKE_DIR="$tmp" \
      FAULT_CMD_DOWN="touch $tmp/down" FAULT_CMD_UP="touch $tmp/up" FAULT_AT=1 FAULT_FOR=1 OUT_DIR="$tmp/out-$name" \
      NCCL_TESTS_DIR="$tmp/nt" "$@" bash "$script" >"$tmp/$name.out" 2>&1 || rc=$?
  echo "---- $name (exit $rc)"; grep -E '^(PASS|FAIL|NOT RUN|FIGURE)' "$tmp/$name.out" || true
  [ "$rc" = "$want" ] || { cat "$tmp/$name.out"; fail "$name: exit $rc, want $want"; }
}
has() { grep -qF -- "$2" "$tmp/$1.out" || fail "$1: no line with: $2"; }

run good 0
for want in "PASS: preflight rail 0 (mlx5_0 -> nodeb:mlx5_0): ib_write_bw 10.000 GB/s (80.00 Gb/s)" \
            "PASS: preflight rail 1 (mlx5_1 -> nodeb:mlx5_1): ib_write_bw 10.000 GB/s" \
            "FIGURE ib_write_bw sum over 2 rail(s): 20.000 GB/s" \
            "PASS: perf: both ranks exit 0, 4 rows verified, #wrong 0, 2 x 'Out of bounds values : 0 OK'" \
            "PASS: perf: both nodes on IB only, a link up on each of the 2 rail(s) of each node" \
            "PASS: perf: sendrecv busbw 17.015 GB/s / ib_write_bw sum 20.000 GB/s = 0.851 >= 0.8" \
            "PASS: failover: both ranks exit 0" "PASS: failover: fault commands ran on B" \
            "PASS: failover: WARN naming rail 0 seen (1 line(s)" "PASS: failover: rail 0 failed back (probing -> healthy)" \
            "NOT RUN: nccl: nccl-tests with NCCL_NET_PLUGIN=rerail (no GPU on A (nvidia-smi))" \
            "validate-ib: 10 passed, 0 failed, 1 not run"; do
  has good "$want"
done
grep -q '^# failover: rail 0 of B (mlx5_0): down .touch ' "$tmp/good.out" || fail "good: the fault plan line"
# The default fault commands follow B's link layer and netdev (RoCE: ip link on ens0f0, rerail-info's).
run roce 1 STEPS=failover FAULT_CMD_DOWN= FAULT_CMD_UP=
has roce "# failover: rail 0 of B (mlx5_0): down 'sudo -n ip link set dev ens0f0 down', up 'sudo -n ip link set dev ens0f0 up'"
has roce "FAIL: failover: fault command exit codes down '"  # no ens0f0 here (or no sudo)
run wrong 1 STEPS=perf FAKE_WRONG=1
has wrong "FAIL: perf: rank 0 exit 1, rank 1 exit 0, 4 rows, 'Out of bounds : 0 OK' 0 of 2, wrong rows: "
has wrong "NOT RUN: perf busbw / ib_write_bw ratio (no ib_write_bw figures"
run slow 1 STEPS="preflight perf" FAKE_US=699.05
has slow "FAIL: perf: sendrecv busbw 12.000 GB/s / ib_write_bw sum 20.000 GB/s = 0.600 < 0.8"
run tcp 1 STEPS=perf FAKE_TCP=1
has tcp "FAIL: perf: node A not on the IB transport only (transports: tcp(eth0))"
grep -q "PASS: perf: both nodes on IB only" "$tmp/tcp.out" && fail "tcp: an IB-only PASS next to the TCP fallback"
run nofailback 1 STEPS=failover FAKE_NOFAILBACK=1
has nofailback "FAIL: failover: rail 0 did not fail back after the up command"
has nofailback "PASS: failover: WARN naming rail 0"
run nowbw 0 STEPS="preflight perf" IB_WRITE_BW=/nonexistent/ib_write_bw
has nowbw "NOT RUN: preflight ib_write_bw (perftest not installed on A"
has nowbw "NOT RUN: perf busbw / ib_write_bw ratio"
run noreach 1 SSH=false
has noreach "FAIL: cannot run commands on B (false nodeb)"
run nobuild 1 REMOTE_BUILD_DIR=/nonexistent/build
has nobuild "FAIL: node B: /nonexistent/build/tools/rerail-perf/rerail-perf, tools/rerail-info or net_plugin/libnccl-net-rerail.so missing"
echo PASS
