#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz, clang, build-fuzz/) and runs each on a scratch copy of its
# committed corpus, printing execs/s and totals per target.
#   scripts/fuzz.sh [--seconds S | --runs N] [--runs N --seconds S] [target-regex]
#   (default: --seconds 30, all targets; with both, a target stops at whichever comes first)
# One target at a time, niced (the CI machine has 2 shared cores). A crash, leak or timeout fails the run;
# the reproducer is build-fuzz/tests/fuzz/<target>/crash-* (or leak-*, timeout-*).
set -euo pipefail
cd "$(dirname "$0")/.."
runs=""
secs=""
filter="."
while [[ $# -gt 0 ]]; do
  case "$1" in
    --seconds) secs="-max_total_time=$2"; shift 2 ;;
    --runs) runs="-runs=$2"; shift 2 ;;
    -h|--help) sed -n 2,7p "$0"; exit 0 ;;
    *) filter="$1"; shift ;;
  esac
done
export CCACHE_DIR=${CCACHE_DIR:-/work/.ccache}
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
[ -n "$runs$secs" ] || secs="-max_total_time=30"
# rerail's stderr logger prints every WARN a malformed input provokes (two syscalls and a write each):
# quiet, the core targets run 2.2x the executions per second (send_core: 44.9 k vs 20.5 k in 20 s).
# The messages are still formatted, so the format paths stay fuzzed. NCCL_DEBUG=WARN shows them.
export NCCL_DEBUG=${NCCL_DEBUG:-VERSION}
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DRERAIL_FUZZ=ON -DRERAIL_BUILD_TESTS=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRERAIL_ENABLE_CUDA=OFF "${launcher[@]}" >/dev/null
targets=$(cd tests/fuzz && ls fuzz_*.cc | sed 's/\.cc$//' | grep -E "$filter")
nice cmake --build build-fuzz -j2 --target $targets
fail=0
printf '%-12s %12s %9s %8s %6s %6s %6s\n' target execs execs/s seconds cov ft crash
for t in $targets; do
  name=${t#fuzz_}
  work=build-fuzz/tests/fuzz/$name/work
  rm -rf "$work" && mkdir -p "$work" && cp -r "tests/fuzz/corpus/$name/." "$work/"
  log=build-fuzz/tests/fuzz/$name/fuzz.log
  start=$(date +%s.%N)
  rc=0
  (cd "build-fuzz/tests/fuzz/$name" && nice "../$t" $runs $secs -print_final_stats=1 work) >"$log" 2>&1 || rc=$?
  took=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(awk -v n="${execs:-0}" -v s="$took" 'BEGIN{printf "%d", (s > 0 ? n / s : 0)}')
  cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -1 | cut -d' ' -f2)
  ft=$(grep -oE 'ft: [0-9]+' "$log" | tail -1 | cut -d' ' -f2)
  crash=no
  if [[ $rc -ne 0 ]]; then crash=YES; fail=1; fi
  printf '%-12s %12s %9s %8.1f %6s %6s %6s\n' "$name" "${execs:-?}" "${rate:-?}" "$took" "${cov:-?}" "${ft:-?}" "$crash"
  [[ $rc -ne 0 ]] && grep -E "ERROR|SUMMARY|Test unit written" "$log" | head -5
done
exit $fail
