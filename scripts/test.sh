#!/usr/bin/env bash
# rerail test suite: set up (packages + build) if needed, then run every ctest tier.
# Usage: scripts/test.sh [--sanitize address|thread] [ctest args...]   e.g. scripts/test.sh -L unit
# Tests that need root (network namespaces, iptables, tc) skip with a message when not root.
# With CI=true and no arguments, two more stages follow the suite (RERAIL_CI_EXTRA=0 skips them): the unit
# and functional tiers under ASan+UBSan with leak checks (--sanitize address) and every fuzz target for
# RERAIL_FUZZ_SECONDS (30) on its committed corpus (scripts/fuzz.sh). Every stage runs; any failing stage
# fails the run.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
BUILD_DIR=${BUILD_DIR:-build}
ci_stages=0
[ "${CI:-}" = "true" ] && [ "${RERAIL_CI_EXTRA:-1}" = "1" ] && [ $# -eq 0 ] && ci_stages=1
san=""
# --sanitize address|thread: a separate build (build-asan: ASan+UBSan, build-tsan: TSan) that stops at the
# first report; runs the unit and functional tiers unless ctest args follow.
if [ "${1:-}" = "--sanitize" ]; then
  case "${2:-}" in
    address) san=address,undefined BUILD_DIR=build-asan ;;
    thread) san=thread BUILD_DIR=build-tsan ;;
    *) echo "usage: scripts/test.sh --sanitize address|thread [ctest args...]" >&2; exit 2 ;;
  esac
  shift 2
  # CUDA kernels are not instrumented by the sanitizers; the CPU staging backend is what runs here.
  export BUILD_DIR CMAKE_ARGS="${CMAKE_ARGS:-} -DRERAIL_SANITIZE=$san -DRERAIL_ENABLE_CUDA=OFF"
  # A report stops the process with a failing status (abort), so the test that ran it fails.
  # Leak checks are on: the net plugin frees itself when it is unloaded with no init left open, so test
  # drivers that dlclose it leave nothing behind. No suppression file.
  export ASAN_OPTIONS=${ASAN_OPTIONS:-halt_on_error=1:abort_on_error=1:detect_leaks=1:disable_coredump=1}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:abort_on_error=1:print_stacktrace=1}
  export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:abort_on_error=1:second_deadlock_stack=1${RERAIL_TSAN_SUPP:+:suppressions=$RERAIL_TSAN_SUPP}}
  ulimit -c 0
  [ $# -gt 0 ] || set -- -L "unit|functional"
fi
stage_start=$SECONDS
bash scripts/setup.sh
# Fault tests drive real link faults through the kernel on a 2-core machine; a test that fails is run
# once more (and still fails the suite if it fails again), so one scheduling hiccup does not sink CI.
# Every test that needed that retry is listed at the end (scripts/ctest-retries.sh): flaky, not green.
rc=0
ctest --test-dir "$BUILD_DIR" --output-on-failure --timeout 900 --repeat until-pass:2 "$@" || rc=$?
bash scripts/ctest-retries.sh "$BUILD_DIR"
if [ -n "$san" ]; then
  # A report in any attempt fails the run, also one from a child process whose exit status its test
  # does not check, and one in an attempt that a retry then passed.
  log="$BUILD_DIR/Testing/Temporary/LastTest.log"
  pat='ERROR: (Address|Leak)Sanitizer|LeakSanitizer has encountered a fatal error|runtime error: |WARNING: ThreadSanitizer|ERROR: ThreadSanitizer'
  n=$(grep -cE "$pat" "$log" 2>/dev/null || true)
  if [ "${n:-0}" -gt 0 ]; then
    echo "== sanitizer ($san): $n report(s) in $log =="
    grep -m 20 -nE "$pat" "$log" || true
    rc=1
  else
    echo "== sanitizer ($san): no report =="
  fi
fi
echo "== test.sh ${san:+--sanitize $san }stage: rc $rc in $((SECONDS - stage_start)) s =="
if [ "$ci_stages" = 1 ]; then
  s=$SECONDS
  bash scripts/test.sh --sanitize address || rc=1
  echo "== CI stage ASan+UBSan (unit, functional): $((SECONDS - s)) s =="
  s=$SECONDS
  bash scripts/fuzz.sh --seconds "${RERAIL_FUZZ_SECONDS:-30}" || rc=1
  echo "== CI stage fuzz (${RERAIL_FUZZ_SECONDS:-30} s per target): $((SECONDS - s)) s =="
fi
exit $rc
