#!/usr/bin/env bash
# Bad flags must give a clear message and a non-zero exit, never a crash or a hang.
set -uo pipefail
perf=$1
fail=0
expect() {  # expect "substring" args...
  local want=$1; shift
  local msg rc
  msg=$(timeout 20 "$perf" "$@" 2>&1); rc=$?
  if [ "$rc" -ne 2 ] || ! grep -qi -- "$want" <<<"$msg"; then
    echo "FAIL: '$*' -> rc $rc, output: $msg"; fail=1
  else
    echo "ok: '$*' -> $(head -1 <<<"$msg")"
  fi
}
expect "unknown collective" all_reducee
expect "bad size" -b 12Q
expect "smaller than -b" -b 1M -e 1K
expect "supported types" -d double
expect "supported reduction" -o max
expect "kind must be" --hosts 2 -N 2 --fault at=1s,host=0,rail=0,kind=explode
expect "missing" --hosts 2 -N 2 --fault at=1s,host=0
expect "needs --hosts" --fault at=1s,host=0,rail=0,kind=down
expect "cannot load net plugin" -N 2 --plugin /nonexistent/libnope.so -b 8 -e 8
expect "nranks" -N 0
"$perf" --help | grep -q -- "--timeline" || { echo "FAIL: --help"; fail=1; }
exit $fail
