#!/usr/bin/env bash
# rerail ABI check: for every library in expected_symbols.txt that is built under BUILD_DIR,
#   1. `nm -D --defined-only` exports EXACTLY the listed names (version-node entries, type A, ignored),
#      and each is a data object (NCCL looks the plugin structs up as data with dlsym);
#   2. abi_dlopen (a C program) loads it with RTLD_NOW|RTLD_LOCAL, finds every symbol and checks the
#      net tables/properties layout at run time;
#   3. for libnccl-<kind>-<name>.so, NCCL's name rule for NCCL_<KIND>_PLUGIN=<name> resolves to it.
# Usage: check_abi.sh BUILD_DIR ABI_DLOPEN EXPECTED_FILE       Exit 77 (skip) when nothing is built.
set -uo pipefail
build=$1 prog=$2 expected=$3
fails=0 checked=0

while read -r line; do
  case "$line" in ''|'#'*) continue ;; esac
  lib=${line%%:*}
  read -r -a want <<<"${line#*:}"
  path=$(find "$build" -name "$lib" \( -type f -o -type l \) -not -path '*/CMakeFiles/*' | head -n 1)
  if [ -z "$path" ]; then
    echo "skip: $lib is not built in $build"
    continue
  fi
  checked=$((checked + 1))
  echo "== $lib ($path)"
  # "0000000000004020 D ncclNetPlugin_v11@@RERAIL_1" -> "D ncclNetPlugin_v11"
  exports=$(nm -D --defined-only "$path" | awk '$2 != "A" { sub(/@.*/, "", $3); print $2, $3 }' | sort -k2)
  got=$(awk '{print $2}' <<<"$exports" | sort -u)
  exp=$(printf '%s\n' "${want[@]}" | sort -u)
  if [ "$got" != "$exp" ]; then
    echo "FAIL: $lib exports differ from $expected"
    diff <(echo "$exp") <(echo "$got") | sed -n 's/^< /  missing: /p; s/^> /  unexpected: /p'
    fails=$((fails + 1))
  else
    echo "ok: exports exactly: $(tr '\n' ' ' <<<"$got")"
  fi
  bad_type=$(awk '$1 !~ /^[DdBbRrVvGgS]$/ {print $2 " (" $1 ")"}' <<<"$exports")
  if [ -n "$bad_type" ]; then
    echo "FAIL: not data objects: $bad_type"
    fails=$((fails + 1))
  fi
  "$prog" load "$path" "${want[@]}" || fails=$((fails + 1))
  if [[ "$lib" =~ ^libnccl-(net|tuner|profiler)-(.+)\.so$ ]]; then
    LD_LIBRARY_PATH="$(dirname "$path")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
      "$prog" name-rule "${BASH_REMATCH[1]}" "${BASH_REMATCH[2]}" "$path" || fails=$((fails + 1))
  fi
done <"$expected"

if [ "$checked" -eq 0 ]; then
  echo "skip: none of the libraries in $expected is built"
  exit 77
fi
[ "$fails" -eq 0 ] && echo "PASS: $checked libraries" || echo "FAILED: $fails checks"
[ "$fails" -eq 0 ]
