#!/usr/bin/env bash
# rerail-info over the fake libibverbs: both fake devices discovered (RoCE, GID 0, 4x HDR), and with
# fake1's port down and an InfiniBand fabric only fake0 is kept. Usage: fake_discovery.sh rerail-info libfakeverbs.so
set -u
info=$1 lib=$2
fail() { echo "FAIL: $*"; echo "$out"; exit 1; }
out=$(RERAIL_IB_LIB=$lib RERAIL_TCP_IFNAME=lo timeout 20 "$info" 2>&1) || fail "rerail-info exited $?"
ib=$(sed -n '/^IB devices/,/^tuner plugin/p' <<<"$out")
grep -q "^IB devices: 2 (libibverbs loaded: .*libfakeverbs.so)" <<<"$ib" || fail "two fake devices, loaded by RERAIL_IB_LIB"
for d in 0 1; do
  blk=$(sed -n "/^  fake$d port 1:/,/pciPath/p" <<<"$ib")
  grep -q "link layer: *Ethernet" <<<"$blk" || fail "fake$d: Ethernet"
  grep -q "gid: *index 0 (auto) fe80::2:c903:fa:$d" <<<"$blk" || fail "fake$d: GID"
  grep -q "speed: *200000 Mbps (4x HDR" <<<"$blk" || fail "fake$d: speed"
  grep -q "mtu: *4096" <<<"$blk" || fail "fake$d: mtu"
done
out=$(RERAIL_IB_LIB=$lib RERAIL_TCP_IFNAME=lo FAKEVERBS_PORT_DOWN=fake1:1 FAKEVERBS_LINK_LAYER=ib timeout 20 "$info" 2>&1) ||
  fail "rerail-info exited $?"
ib=$(sed -n '/^IB devices/,/^tuner plugin/p' <<<"$out")
grep -q "^IB devices: 1 " <<<"$ib" || fail "one device with fake1 down"
grep -A1 "^  fake0 port 1:" <<<"$ib" | grep -q "link layer: *InfiniBand" || fail "fake0 InfiniBand"
grep -A7 "^  fake0 port 1:" <<<"$ib" | grep -q "lid: *1$" || fail "fake0 LID 1"
grep -q "skipped: fake1: port PORT_DOWN" <<<"$ib" || fail "fake1 skipped as down"
grep -q "^  fake1 port" <<<"$ib" && fail "fake1 (port down) listed"
echo "fake discovery ok"
