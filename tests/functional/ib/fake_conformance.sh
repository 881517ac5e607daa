#!/usr/bin/env bash
# The NCCL-proxy conformance suite over the fake libibverbs with RERAIL_TRANSPORT=ib: this process and
# the conformance_peer process are two hosts of one fake fabric (FAKEVERBS_WIRE, a directory made here
# per case), so every byte crosses from one process's fake HCA to the other's as RDMA would.
# Each gtest case runs in its own process, as under gtest_discover_tests.
# Usage: fake_conformance.sh conformance_test libfakeverbs.so
set -u
bin=$1 lib=$2
top=$(mktemp -d /tmp/rrfv.XXXXXX)
trap 'rm -rf "$top"' EXIT
export RERAIL_TRANSPORT=ib RERAIL_IB_LIB=$lib FAKEVERBS_DEVICES=4 RERAIL_TCP_IFNAME=lo

# Cases that cannot pass over IB, each with its reason (none are filtered silently).
declare -A skip=()

cases=$("$bin" --gtest_list_tests | awk '/^[^ ]/ {suite=$1} /^  [^ ]/ {print suite $1}')
[ -n "$cases" ] || { echo "FAIL: no cases listed by $bin"; exit 1; }
pass=0 fail=0 hosts_moving=0 n=0
for c in $cases; do
  if [ -n "${skip[$c]:-}" ]; then
    echo "NOT RUN over IB: $c (${skip[$c]})"
    continue
  fi
  n=$((n + 1))
  wire="$top/$n"
  mkdir "$wire"
  start=$(date +%s%N)
  out=$(FAKEVERBS_WIRE=$wire timeout 300 "$bin" --gtest_color=no --echo-plugin-log --gtest_filter="$c" 2>&1)
  rc=$?
  ms=$((($(date +%s%N) - start) / 1000000))
  why=""
  [ $rc -eq 0 ] || why="exit $rc"
  grep -q "^\[  PASSED  \] 1 test" <<<"$out" || why="${why:+$why, }not passed"
  grep -q "SKIPPED" <<<"$out" && why="${why:+$why, }skipped"
  # Every plugin init of either process (one INFO line each) must have offered the four fake IB ports,
  # never TCP devices.
  inits=$(grep -c "NET/rerail : rerail .* transports: " <<<"$out")
  ib_inits=$(grep -c "NET/rerail : rerail .* transports: ib(fake0,fake1,fake2,fake3)" <<<"$out")
  [ "$inits" -eq "$ib_inits" ] || why="${why:+$why, }$((inits - ib_inits)) of $inits plugin inits not on the fake IB ports"
  # Hosts that executed verbs requests for another process in this case (fake_host.cc's exit line).
  moved=$(grep -c "requests sent to other hosts, [1-9][0-9]* executed for them" <<<"$out")
  hosts_moving=$((hosts_moving + moved))
  if [ -z "$why" ]; then
    pass=$((pass + 1))
    printf 'ok   %-70s %6d ms  IB inits: %s, hosts that served RDMA: %s\n' "$c" "$ms" "$inits" "$moved"
  else
    fail=$((fail + 1))
    printf 'FAIL %-70s %6d ms  (%s)\n' "$c" "$ms" "$why"
    echo "$out" | tail -60
  fi
done
echo "ib_fake_conformance: $pass passed, $fail failed, ${#skip[@]} not run over IB, $hosts_moving host-cases served RDMA"
[ $fail -eq 0 ] || exit 1
[ $hosts_moving -gt 0 ] || { echo "FAIL: no process executed a request of another: the data did not cross the fake fabric"; exit 1; }
echo "ib_fake_conformance ok"
