#!/usr/bin/env bash
# Faults across processes over the fake verbs (FAKEVERBS_WIRE + FAKEVERBS_FAULT_AT, fake_host.cc): the
# conformance case that moves the most data (Conformance.SizesAreByteExactBothWays: every size up to
# 256 MiB, both directions, every byte checked) runs while one process's fake0 (the primary rail)
# fails mid-stream, once per failure class: port down on the peer (port event), black hole on this
# process (no event: RETRY_EXC_ERR), ack-only loss on the peer (the data landed, the sender re-sends
# it). Each run must pass with the fault fired and rerail's failover WARN naming fake0.
# Usage: fake_conformance_faults.sh conformance_test libfakeverbs.so
set -u
bin=$1 lib=$2
top=$(mktemp -d /tmp/rrfvf.XXXXXX)
trap 'rm -rf "$top"' EXIT
export RERAIL_TRANSPORT=ib RERAIL_IB_LIB=$lib FAKEVERBS_DEVICES=4 RERAIL_TCP_IFNAME=lo
case_name=Conformance.SizesAreByteExactBothWays
# host 0 = the peer (it opens the plugin first), host 1 = this test process.
fail=0 n=0
for spec in 0:fake0:down:3000 1:fake0:blackhole:3000 0:fake0:ackloss:3000; do
  n=$((n + 1))
  mkdir "$top/$n"
  start=$(date +%s%N)
  out=$(FAKEVERBS_WIRE=$top/$n FAKEVERBS_FAULT_AT=$spec timeout 300 "$bin" --gtest_color=no --echo-plugin-log \
        --gtest_filter=$case_name 2>&1)
  rc=$?
  ms=$((($(date +%s%N) - start) / 1000000))
  why=""
  [ $rc -eq 0 ] || why="exit $rc"
  grep -q "^\[  PASSED  \] 1 test" <<<"$out" || why="${why:+$why, }not passed"
  grep -q "FAKEVERBS_FAULT_AT fired" <<<"$out" || why="${why:+$why, }the fault did not fire"
  grep -q "L2 NET/rerail : ib fake0 to peer rail 0 failed (.*): re-sending" <<<"$out" ||
    why="${why:+$why, }no failover of fake0 was logged"
  if [ -z "$why" ]; then
    printf 'ok   %-24s %6d ms  %s\n' "$spec" "$ms" "$(grep -o 'FAKEVERBS_FAULT_AT fired: .*' <<<"$out")"
  else
    fail=$((fail + 1))
    printf 'FAIL %-24s %6d ms  (%s)\n' "$spec" "$ms" "$why"
    echo "$out" | tail -60
  fi
done
[ $fail -eq 0 ] || exit 1
echo "ib_fake_conformance_faults ok"
