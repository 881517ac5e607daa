#!/usr/bin/env bash
# rerail-info's command line: text and --json agree, --check rejects malformed and unknown RERAIL_*
# variables with a clear message, bad flags exit 2.
set -euo pipefail
info=$1
fail() { echo "FAIL: $*" >&2; exit 1; }
export RERAIL_TCP_IFNAME=lo

out=$("$info") || fail "rerail-info exited $?"
grep -q '^rerail ' <<<"$out" || fail "no version line: $out"
grep -q '^devices: 1$' <<<"$out" || fail "want one device (lo): $out"
grep -q '^    name: *lo$' <<<"$out" || fail "device name: $out"
grep -q 'transports: *tcp' <<<"$out" || fail "transports: $out"
grep -q 'RERAIL_TCP_IFNAME *= lo  \[env\]' <<<"$out" || fail "knob source: $out"

json=$("$info" --json)
python3 - "$json" <<'PY' || fail "json"
import json, sys
d = json.loads(sys.argv[1])
assert d["net"]["devices"][0]["name"] == "lo", d["net"]
assert d["net"]["transports"] == ["tcp"], d["net"]
p = {x["name"]: x for x in d["params"]}
assert p["RERAIL_TCP_IFNAME"]["source"] == "env" and p["RERAIL_TCP_IFNAME"]["value"] == "lo"
assert p["RERAIL_CHUNK_SIZE"]["source"] == "default"
PY

"$info" --check || fail "--check on a clean environment"
if err=$(RERAIL_TCP_STREAMS=99 "$info" --check 2>&1); then fail "--check accepted RERAIL_TCP_STREAMS=99"; fi
grep -q "RERAIL_TCP_STREAMS='99' is out of range" <<<"$err" || fail "message: $err"
if err=$(RERAIL_TCP_STREMS=2 "$info" --check 2>&1); then fail "--check accepted a typo"; fi
grep -q "RERAIL_TCP_STREMS is not a rerail parameter" <<<"$err" || fail "message: $err"
rc=0; "$info" --no-such-flag >/dev/null 2>&1 || rc=$?
[ "$rc" = 2 ] || fail "bad flag exit $rc, want 2"
rc=0; "$info" --plugin /nonexistent/libx.so >/dev/null 2>&1 || rc=$?
[ "$rc" = 1 ] || fail "missing plugin exit $rc, want 1"
# Not "| grep -q": grep exits at the first match and the tool's second stdio write gets SIGPIPE (pipefail).
md=$("$info" --markdown) || fail "--markdown exited $?"
grep -q '^| `RERAIL_TCP_STREAMS`' <<<"$md" || fail "--markdown"
echo "info_cli: ok"
