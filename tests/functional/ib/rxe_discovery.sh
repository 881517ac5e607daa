#!/usr/bin/env bash
# rerail's verbs loader and IB discovery against the real kernel verbs stack: Soft-RoCE (rdma_rxe) on
# two veth rails in a QEMU guest (scripts/rxe-guest.sh). Checks, from one guest boot:
#   * rerail-info lists rxe0 and rxe1 through the plugin's own loader (dlopen + dlvsym) and discovery:
#     link layer Ethernet, RoCE v2, the GID index NCCL's rule picks (the IPv4-mapped RoCE v2 entry, found
#     independently from sysfs here), the netdev, speed = the port's sysfs "rate";
#   * the plugin's one INFO line names both ports (it offers TCP until the verbs data path exists);
#   * RERAIL_IB_HCA='^rxe0' keeps rxe1 only; RERAIL_IB_GID_INDEX=0 is obeyed; 'rxe0:x' fails init.
# Usage: rxe_discovery.sh RXE_GUEST_SH RERAIL_INFO NET_SO TUNER_SO PROFILER_SO     (exit 77: cannot boot a guest here)
set -uo pipefail
guest=$1 info=$2 so=$3 tuner=$4 prof=$5
fail() { echo "FAIL: $*" >&2; exit 1; }

cmd=$(cat <<EOS
echo '## devinfo'; ibv_devinfo -l
echo '## sysfs'
for d in rxe0 rxe1; do p=/sys/class/infiniband/\$d/ports/1
  echo "\$d rate \$(cat \$p/rate)"
  for i in 0 1 2 3; do echo "\$d gid \$i \$(cat \$p/gids/\$i) \$(cat \$p/gid_attrs/types/\$i 2>/dev/null | tr ' ' _)"; done
done
echo '## info'; $info --plugin $so
echo '## initline'; $info --plugin $so --json | grep -o '"NET/rerail : IB [^"]*"'
echo '## hca'; RERAIL_IB_HCA='^rxe0' $info --plugin $so | sed -n '/^IB devices/,/^tuner/p'
echo '## gid'; RERAIL_IB_GID_INDEX=0 RERAIL_IB_HCA='=rxe1:1' $info --plugin $so | sed -n '/^IB devices/,/^tuner/p'
echo '## badhca'; RERAIL_IB_HCA='rxe0:x' $info --plugin $so | grep -E 'error|warning'; echo "rc=\${PIPESTATUS[0]}"
echo '## end'
EOS
)
out=$(bash "$guest" --rails 2 --timeout 240 --with "$info" --with "$so" --with "$tuner" --with "$prof" -- "$cmd" 2>&1)
rc=$?
echo "$out"
[ "$rc" = 77 ] && exit 77
[ "$rc" = 0 ] || fail "guest exit $rc"

python3 - "$out" <<'PY' || exit 1
import re, sys
out = sys.argv[1]
sec = {m.group(1): m.group(2) for m in re.finditer(r"^## (\w+)\n(.*?)(?=^## )", out, re.S | re.M)}
def need(cond, what):
    if not cond:
        print("FAIL:", what); sys.exit(1)
need(set(sec.get("devinfo", "").split()) >= {"rxe0", "rxe1"}, "ibv_devinfo -l lists rxe0 and rxe1")
info = sec["info"]
need("IB devices: 2 (libibverbs loaded: " in info, "two IB ports via the loader")
for k, d in enumerate(["rxe0", "rxe1"]):
    # NCCL's rule, evaluated independently from sysfs: the IPv4-mapped GID with type RoCE v2.
    want = [int(i) for dev, i, gid, typ in re.findall(r"^(\w+) gid (\d+) (\S+) (\S*)$", sec["sysfs"], re.M)
            if dev == d and gid.startswith("0000:0000:0000:0000:0000:ffff:") and typ == "RoCE_v2"]
    need(want, f"{d}: sysfs shows an IPv4-mapped RoCE v2 GID")
    rate = re.search(rf"^{d} rate (\d+) Gb/sec", sec["sysfs"], re.M)
    block = re.search(rf"^  {d} port 1:\n((?:    .*\n)+)", info, re.M)
    need(block, f"{d} listed"); b = block.group(1)
    print(f"{d}: {' | '.join(l.strip() for l in b.splitlines())}")
    need(re.search(r"link layer: +Ethernet \(RoCE v2\)", b), f"{d} link layer")
    need(re.search(rf"gid: +index {want[0]} \(auto\) ::ffff:10\.10\.{k}\.1 on veth{k}\n", b), f"{d} gid index {want[0]}")
    need(re.search(rf"speed: +{int(rate.group(1)) * 1000} Mbps", b), f"{d} speed = sysfs rate {rate.group(1)} Gb/s")
need("IB ports found (rxe0,rxe1)" in sec["initline"], "plugin INFO line: " + sec["initline"])
need("IB devices: 1 " in sec["hca"] and "rxe1 port 1:" in sec["hca"] and "skipped: rxe0: not selected by RERAIL_IB_HCA" in sec["hca"],
     "RERAIL_IB_HCA=^rxe0: " + sec["hca"])
need(re.search(r"gid: +index 0 \(RERAIL_IB_GID_INDEX\) fe80::", sec["gid"]), "RERAIL_IB_GID_INDEX=0: " + sec["gid"])
need("RERAIL_IB_HCA='rxe0:x'" in sec["badhca"] and "rc=1" in sec["badhca"], "bad RERAIL_IB_HCA: " + sec["badhca"])
print("PASS")
PY
