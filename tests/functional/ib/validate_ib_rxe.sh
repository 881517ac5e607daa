#!/usr/bin/env bash
# scripts/validate-ib.sh run for real between two QEMU guests over Soft-RoCE (scripts/rxe-guest.sh --pair
# --rails 2; guest a = node A, guest b = node B; validate_ib_rxe_guest.sh): preflight (rerail-info on
# both, ib_write_bw per rail), perf (rerail-perf ranks 0/1 with RERAIL_TRANSPORT=ib on rxe0+rxe1) and
# failover (rxe0's netdev on B taken down and up by the default fault commands); nccl is NOT RUN (no GPU).
# Passes when validate-ib.sh exits 0 and its own verdict lines include every preflight/perf/failover PASS.
#   validate_ib_rxe.sh RXE_GUEST_SH REPO_ROOT RERAIL_PERF RERAIL_INFO NET_SO SIGCHLD_DEFAULT_EXEC   (77: cannot boot guests)
set -uo pipefail
guest=$1 root=$2 perf=$3 info=$4 so=$5 sigdfl=$6
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "$(dirname "$perf")/../.." && pwd)   # <build>/tools/rerail-perf/rerail-perf
if [ ! -x "$build/tools/rerail-info" ] || [ ! -f "$build/net_plugin/libnccl-net-rerail.so" ]; then
  echo "FAIL: $build is not the build tree of $perf" >&2; exit 1
fi
out=$(bash "$guest" --pair --rails 2 --timeout 500 --with "$perf" --with "$info" --with "$so" --with "$sigdfl" \
        --with "$root/scripts/validate-ib.sh" --with "$root/scripts/run-nccl-tests.sh" \
        --with "$here/validate_ib_rxe_guest.sh" --with "$here/validate_ib_rsh.sh" \
        -- "bash $here/validate_ib_rxe_guest.sh $root $build $sigdfl" 2>&1)
rc=$?
echo "$out"
[ "$rc" = 77 ] && exit 77
fail() { echo "FAIL: $*" >&2; exit 1; }
[ "$rc" = 0 ] || fail "guest exit $rc (validate-ib.sh's verdict above)"
for want in "PASS: preflight rail 0" "PASS: preflight rail 1" "PASS: perf: both ranks exit 0" \
            "PASS: perf: both nodes on IB only" "PASS: failover: both ranks exit 0" \
            "PASS: failover: fault commands ran on B" "PASS: failover: WARN naming rail 0" \
            "PASS: failover: rail 0 failed back" "NOT RUN: nccl"; do
  grep -qF "$want" <<<"$out" || fail "no '$want' line"
done
echo PASS
