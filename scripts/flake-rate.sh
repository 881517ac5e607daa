#!/usr/bin/env bash
# Flake rate per test: runs a ctest selection N times WITHOUT retries and reports, per test, how many runs
# failed (issue 15: "a bench runs the fault tier 20 times and reports the flake rate, target 0").
# Usage: scripts/flake-rate.sh [-n N] [ctest selection args...]     (default: -n 20 -L faults)
#   Env: BUILD_DIR (default build). Needs root for the fault tier (its tests skip otherwise).
# Prints one line per test with failures (and a total); each run's LastTest.log is kept in
# $BUILD_DIR/flake-rate/run-K.log for the failing output. Exit status 0: this is a bench, not a gate.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
BUILD_DIR=${BUILD_DIR:-build}
n=20
if [ "${1:-}" = "-n" ]; then n=$2; shift 2; fi
[ $# -gt 0 ] || set -- -L faults
out="$BUILD_DIR/flake-rate"
rm -rf "$out" && mkdir -p "$out"
for k in $(seq 1 "$n"); do
  ctest --test-dir "$BUILD_DIR" --timeout 900 "$@" > "$out/run-$k.out" 2>&1 || true
  cp "$BUILD_DIR/Testing/Temporary/LastTest.log" "$out/run-$k.log"
  echo "run $k/$n: $(grep -E 'tests passed' "$out/run-$k.out" || echo 'no summary')"
done
awk -v runs="$n" '
  /^[0-9]+\/[0-9]+ Testing: / { sub(/^[0-9]+\/[0-9]+ Testing: /, ""); cur = $0; outp = 1; next }
  /^<end of output>$/ { outp = 0; next }
  !outp && cur != "" && /^Test / && !/^Test time/ {
    if (!(cur in seen)) { seen[cur] = 1; order[++m] = cur }
    total[cur]++; if ($0 !~ /^Test (Pass|Skip)/) fail[cur]++  # "Test Passed.", "Test Pass Reason:"
    cur = ""
  }
  END {
    flaky = 0
    printf "\n== flake rate over %d runs (no retries) ==\n", runs
    for (i = 1; i <= m; ++i) {
      t = order[i]
      if (fail[t] > 0) { flaky++; printf "  %-60s %3d/%d failed (%.1f %%)\n", t, fail[t], total[t], 100 * fail[t] / total[t] }
    }
    printf "%d of %d tests failed at least once\n", flaky, m
  }' "$out"/run-*.log
