#!/usr/bin/env bash
# The net plugin without a usable libibverbs (issue 12, stage 1):
#   * libnccl-net-rerail.so has no NEEDED libibverbs and no undefined ibv_* symbol (dlopen only);
#   * RERAIL_IB_LIB pointing nowhere, or at a library under foreign symbol versions: the plugin
#     still loads (RTLD_NOW, as NCCL and rerail-info open it), offers its TCP device and logs one INFO
#     line saying why IB is not used;
#   * malformed RERAIL_IB_* / RERAIL_TRANSPORT values make init fail with ncclInvalidUsage and a WARN
#     naming the variable; so does RERAIL_TRANSPORT=ib where no IB port is usable.
# Usage: ib_plugin_tcp_only.sh PLUGIN_SO RERAIL_INFO FAKE_FOREIGN_VERBS_SO
set -euo pipefail
so=$1 info=$2 fake=$3
fail() { echo "FAIL: $*" >&2; exit 1; }
export RERAIL_TCP_IFNAME=lo

needed=$(readelf -d "$so" | awk '/NEEDED/ {print $NF}')
echo "NEEDED: $(tr '\n' ' ' <<<"$needed")"
grep -qi ibverbs <<<"$needed" && fail "the plugin links libibverbs"
undef=$(nm -D --undefined-only "$so" | grep -c ' ibv_' || true)
[ "$undef" = 0 ] || fail "$undef undefined ibv_* symbols in the plugin"

ib_line() { python3 -c 'import json,sys
d = json.load(sys.stdin)
lines = [l["text"] for l in d["net"].get("log", []) if l["level"] == "INFO" and " IB " in " " + l["text"].split(": ", 1)[-1]]
print(len(d["net"].get("devices", [])), "|", "\n".join(lines))'; }

# 1. library absent
out=$(RERAIL_IB_LIB=/nonexistent/rerail/libibverbs.so.1 "$info" --plugin "$so" --json) || fail "rerail-info failed with RERAIL_IB_LIB bogus"
got=$(ib_line <<<"$out")
echo "absent: $got"
grep -q '^1 |' <<<"$got" || fail "want the TCP device (lo) offered: $got"
grep -q 'IB not used (libibverbs absent: /nonexistent/rerail/libibverbs.so.1: cannot open shared object file' <<<"$got" || fail "INFO line: $got"
[ "$(grep -c 'IB ' <<<"$got")" = 1 ] || fail "want exactly one IB INFO line: $got"
text=$(RERAIL_IB_LIB=/nonexistent/rerail/libibverbs.so.1 "$info" --plugin "$so")
grep -q '^IB devices: none: libibverbs absent: ' <<<"$text" || fail "rerail-info IB section: $text"

# 2. a libibverbs without rdma-core's symbol versions is not used
got=$(RERAIL_IB_LIB=$fake "$info" --plugin "$so" --json | ib_line) || fail "rerail-info failed with the foreign library"
echo "foreign: $got"
grep -q '^1 |' <<<"$got" || fail "TCP device: $got"
grep -q "IB not used (libibverbs broken: $fake has no ibv_get_device_list@IBVERBS_1.1)" <<<"$got" || fail "INFO line: $got"

# 3. this host's own libibverbs (if any): still exactly one IB line and the TCP device
got=$("$info" --plugin "$so" --json | ib_line) || fail "rerail-info failed with the default RERAIL_IB_LIB"
echo "default: $got"
grep -q '^1 |' <<<"$got" || fail "TCP device: $got"
grep -Eq 'IB not used \(|IB ports found \(' <<<"$got" || fail "INFO line: $got"

# 4. bad knob values fail init with a clear message
check_bad() {  # VAR VALUE EXPECTED-TEXT
  local out
  if out=$(env "$1=$2" "$info" --plugin "$so" 2>&1); then fail "init accepted $1='$2'"; fi
  grep -q 'init returned invalidUsage' <<<"$out" || fail "$1='$2': $out"
  grep -qF "$3" <<<"$out" || fail "$1='$2' message: $out"
  echo "bad $1='$2': ok"
}
check_bad RERAIL_IB_HCA 'mlx5_0:x' "RERAIL_IB_HCA='mlx5_0:x': port in 'mlx5_0:x' is not a positive number"
check_bad RERAIL_IB_GID_INDEX 'auto' "RERAIL_IB_GID_INDEX='auto' is not an integer"
check_bad RERAIL_IB_LIB '' "RERAIL_IB_LIB is empty"
check_bad RERAIL_TRANSPORT 'verbs' "RERAIL_TRANSPORT='verbs'"

# 5. RERAIL_TRANSPORT=ib is an explicit opt-in: without a usable IB port init fails, never falls back to TCP
if out=$(RERAIL_TRANSPORT=ib RERAIL_IB_LIB=/nonexistent/rerail/libibverbs.so.1 "$info" --plugin "$so" 2>&1); then
  fail "RERAIL_TRANSPORT=ib without IB was accepted"
fi
grep -q 'init returned invalidUsage' <<<"$out" || fail "RERAIL_TRANSPORT=ib without IB: $out"
grep -qF "RERAIL_TRANSPORT=ib but no IB port is usable: libibverbs absent" <<<"$out" || fail "RERAIL_TRANSPORT=ib message: $out"
echo "RERAIL_TRANSPORT=ib without IB: refused"
echo PASS
