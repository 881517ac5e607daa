#!/usr/bin/env bash
# Rootless exchange across 4 simulated hosts (network namespaces on one bridge) x 16 ranks, one
# process per rank, no process playing root; one rank crashes mid-exchange and a new
# process re-joins the same group. Runs both algorithms, then `rerail-bootstrap check` from a host.
# Usage: netns_exchange.sh <rerail-bootstrap binary>.  Exit 77 (skip) when not root / no netns.
set -uo pipefail
BIN=${1:?usage: $0 <rerail-bootstrap>}
if [ "$(id -u)" -ne 0 ]; then echo "SKIP: needs root to create network namespaces"; exit 77; fi
if ! ip netns add rrboot-probe-$$ 2>/dev/null; then echo "SKIP: cannot create network namespaces"; exit 77; fi
ip netns del rrboot-probe-$$

P=rrboot$$               # namespace prefix (brief: rrboot)
SW=$P-sw
HOSTS=4 RPH=16 NRANKS=64
SUBNET=10.231.$(( $$ % 200 ))       # private test subnet, only inside our namespaces
BASE=24000
OUT=$(mktemp -d /tmp/rrboot-netns.XXXXXX)
PIDS=()

cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  for h in $(seq 0 $((HOSTS - 1))); do ip netns del "$P-h$h" 2>/dev/null; done
  ip netns del "$SW" 2>/dev/null
  rm -rf "$OUT"
}
trap cleanup EXIT INT TERM

ip netns add "$SW"
ip -n "$SW" link add br0 type bridge
ip -n "$SW" link set br0 up
for h in $(seq 0 $((HOSTS - 1))); do
  ns=$P-h$h
  ip netns add "$ns"
  ip link add "rb$$h$h" netns "$ns" type veth peer name "p$h" netns "$SW"
  ip -n "$ns" link set "rb$$h$h" name eth0
  ip -n "$ns" addr add "$SUBNET.$((h + 1))/24" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$ns" link set lo up
  ip -n "$SW" link set "p$h" master br0
  ip -n "$SW" link set "p$h" up
done
HOSTLIST="$SUBNET.[1-$HOSTS]"
JOB=(--hosts "$HOSTLIST" --ranks-per-host $RPH --port-base $BASE --job-id netns-test)

run_exchange() {  # <algorithm> <group> <victim rank> <die after pull>
  local algo=$1 group=$2 victim=$3 die=$4
  PIDS=()
  for r in $(seq 0 $((NRANKS - 1))); do
    local ns=$P-h$((r / RPH))
    local cmd=(ip netns exec "$ns" "$BIN" exchange "${JOB[@]}" --group "$group" --rank "$r" --verify
               --timeout-ms 60000 --algorithm "$algo")
    if [ "$r" -eq "$victim" ]; then
      ( "${cmd[@]}" --die-after-step "$die" > "$OUT/$algo.$r.dead" 2>&1; rc=$?
        echo "rank $r first incarnation exited with $rc" >> "$OUT/restarts"
        sleep 0.3
        "${cmd[@]}" ) > "$OUT/$algo.$r" 2>&1 &
    else
      "${cmd[@]}" > "$OUT/$algo.$r" 2>&1 &
    fi
    PIDS+=($!)
  done
  local fail=0
  for p in "${PIDS[@]}"; do wait "$p" || fail=1; done
  PIDS=()
  local ok digests
  ok=$(cat "$OUT/$algo".[0-9]* | grep -c ": ok $NRANKS blobs")
  digests=$(cat "$OUT/$algo".[0-9]* | grep -o 'digest [0-9a-f]*' | sort -u | wc -l)
  echo "$algo: $ok/$NRANKS ranks ok, $digests distinct digest(s), $(grep -c "rank $victim first incarnation exited with 3" "$OUT/restarts") restart(s) of rank $victim"
  echo "  restarted rank: $(grep ': ok' "$OUT/$algo.$victim")"
  echo "  rank 0:         $(grep ': ok' "$OUT/$algo.0")"
  if [ $fail -ne 0 ] || [ "$ok" -ne $NRANKS ] || [ "$digests" -ne 1 ]; then
    echo "FAIL: $algo exchange"; cat "$OUT/$algo".[0-9]* | grep -v ': ok ' | head -20; return 1
  fi
  grep -q "rank $victim first incarnation exited with 3" "$OUT/restarts" || { echo "FAIL: victim did not crash"; return 1; }
  : > "$OUT/restarts"
}

rc=0
# Bruck always takes log2(N) pulls; a ring pull may bring all the successor has, so die after the first.
run_exchange bruck 0 21 1 || rc=1
run_exchange ring 1 37 0 || rc=1

# check from host 1: every host reachable, ports free, subnet rule holds.
if ! ip netns exec "$P-h1" "$BIN" check "${JOB[@]}" --group 2 --connect-timeout-ms 500 > "$OUT/check" 2>&1; then
  echo "FAIL: check on a healthy job"; cat "$OUT/check"; rc=1
fi
# A fifth host nobody answers for (inside the private subnet) must fail the reachability check.
if ip netns exec "$P-h1" "$BIN" check --hosts "$SUBNET.[1-4],$SUBNET.99" --ranks-per-host $RPH --port-base $BASE \
     --group 2 --connect-timeout-ms 500 > "$OUT/check2" 2>&1; then
  echo "FAIL: check passed with an unreachable host"; cat "$OUT/check2"; rc=1
else
  grep -q "host 4 '$SUBNET.99'.*unreachable" "$OUT/check2" || { echo "FAIL: no unreachable line"; cat "$OUT/check2"; rc=1; }
fi
# Rank 0 outside host 0's subnet: NCCL's NCCL_COMM_ID rule is reported.
if ip netns exec "$P-h1" "$BIN" check --hosts "10.232.0.1" --port-base $BASE --connect-timeout-ms 200 > "$OUT/check3" 2>&1; then
  echo "FAIL: check passed without an interface on rank 0's subnet"; rc=1
else
  grep -q "no local interface is on the subnet" "$OUT/check3" || { echo "FAIL: no subnet line"; cat "$OUT/check3"; rc=1; }
fi
[ $rc -eq 0 ] && echo "PASS: 4 hosts x 16 ranks, no root, restart survived (bruck and ring); check reports ok/unreachable/subnet"
exit $rc
