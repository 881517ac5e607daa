#!/usr/bin/env bash
# rerail test suite: set up (packages + build) if needed, then run every ctest tier.
# Usage: scripts/test.sh [--sanitize address|thread] [ctest args...]   e.g. scripts/test.sh -L unit
# Tests that need root (network namespaces, iptables, tc) skip with a message when not root.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
BUILD_DIR=${BUILD_DIR:-build}
# --sanitize address|thread: a separate build (build-asan: ASan+UBSan, build-tsan: TSan) that stops at the
# first report; runs the unit and functional tiers unless ctest args follow.
if [ "${1:-}" = "--sanitize" ]; then
  case "${2:-}" in
    address) san=address,undefined BUILD_DIR=build-asan ;;
    thread) san=thread BUILD_DIR=build-tsan ;;
    *) echo "usage: scripts/test.sh --sanitize address|thread [ctest args...]" >&2; exit 2 ;;
  esac
  shift 2
  export BUILD_DIR CMAKE_ARGS="${CMAKE_ARGS:-} -DRERAIL_SANITIZE=$san"
  export ASAN_OPTIONS=${ASAN_OPTIONS:-halt_on_error=1:abort_on_error=1} UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
  export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1}
  [ $# -gt 0 ] || set -- -L "unit|functional"
fi
bash scripts/setup.sh
# Fault tests drive real link faults through the kernel on a 2-core machine; a test that fails is run
# once more (and still fails the suite if it fails again), so one scheduling hiccup does not sink CI.
# Every test that needed that retry is listed at the end (scripts/ctest-retries.sh): flaky, not green.
rc=0
ctest --test-dir "$BUILD_DIR" --output-on-failure --timeout 900 --repeat until-pass:2 "$@" || rc=$?
bash scripts/ctest-retries.sh "$BUILD_DIR"
exit $rc
