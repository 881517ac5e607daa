#!/usr/bin/env bash
# scripts/ctest-retries.sh on a real ctest run: a test that fails once then passes is listed as needing
# a retry, one that always fails as failing every attempt, a passing one not at all.
set -euo pipefail
script=$1
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
cat > "$d/CMakeLists.txt" <<CM
cmake_minimum_required(VERSION 3.16)
project(t NONE)
enable_testing()
add_test(NAME flaky_once COMMAND bash -c "if [ -f $d/mark ]; then exit 0; else touch $d/mark; exit 1; fi")
add_test(NAME always_good COMMAND true)
add_test(NAME always_bad COMMAND false)
add_test(NAME regex_good COMMAND echo fine)
set_tests_properties(regex_good PROPERTIES PASS_REGULAR_EXPRESSION fine)
CM
cmake -S "$d" -B "$d/b" > /dev/null
ctest --test-dir "$d/b" --repeat until-pass:2 > /dev/null 2>&1 || true
out=$(bash "$script" "$d/b")
echo "$out"
grep -q "1 test(s) passed only after a retry, 1 failed every attempt" <<< "$out"
grep -q "PASSED AFTER RETRY  flaky_once (1 failed attempt(s))" <<< "$out"
grep -q "FAILED EVERY ATTEMPT  always_bad (2 attempt(s))" <<< "$out"
! grep -qE "always_good|regex_good" <<< "$out"
echo PASS
