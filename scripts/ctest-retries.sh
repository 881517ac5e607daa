#!/usr/bin/env bash
# Lists the tests of the last ctest run that needed a retry (`--repeat until-pass:N`): every test whose
# LastTest.log shows a failed attempt before its pass ("PASSED AFTER RETRY"), and those that failed every
# attempt ("FAILED EVERY ATTEMPT"). Flakiness shown, not hidden (issue 15).
# Usage: scripts/ctest-retries.sh [BUILD_DIR or LastTest.log]      exit status: 0 (a report, not a gate)
set -euo pipefail
log=${1:-build}
[ -d "$log" ] && log="$log/Testing/Temporary/LastTest.log"
[ -f "$log" ] || { echo "ctest-retries: no $log"; exit 0; }
awk '
  /^[0-9]+\/[0-9]+ Testing: / { sub(/^[0-9]+\/[0-9]+ Testing: /, ""); cur = $0; out = 1; next }
  /^<end of output>$/ { out = 0; next }
  !out && cur != "" && /^Test / && !/^Test time/ {
    if ($0 ~ /^Test (Pass|Skip)/) pass[cur] = 1; else fails[cur]++  # "Test Passed.", "Test Pass Reason:"
    if (!(cur in seen)) { seen[cur] = 1; order[++n] = cur }
    cur = ""
  }
  END {
    r = 0; f = 0
    for (i = 1; i <= n; ++i) { t = order[i]; if (fails[t] && pass[t]) r++; else if (fails[t]) f++ }
    printf "\n== retries: %d test(s) passed only after a retry, %d failed every attempt ==\n", r, f
    for (i = 1; i <= n; ++i) {
      t = order[i]
      if (fails[t] && pass[t]) printf "  PASSED AFTER RETRY  %s (%d failed attempt(s))\n", t, fails[t]
    }
    for (i = 1; i <= n; ++i) {
      t = order[i]
      if (fails[t] && !pass[t]) printf "  FAILED EVERY ATTEMPT  %s (%d attempt(s))\n", t, fails[t]
    }
  }' "$log"
