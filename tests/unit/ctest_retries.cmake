# scripts/ctest-retries.sh (the retry list scripts/test.sh prints, issue 15) on a real ctest run.
add_test(NAME ctest_retries_list COMMAND ${CMAKE_CURRENT_LIST_DIR}/ctest_retries_test.sh ${CMAKE_SOURCE_DIR}/scripts/ctest-retries.sh)
set_tests_properties(ctest_retries_list PROPERTIES LABELS unit TIMEOUT 60 PASS_REGULAR_EXPRESSION "PASS")
