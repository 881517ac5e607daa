# scripts/run-nccl-tests.sh: --dry-run output, argument checks, verdict logic (no cluster here).
add_test(NAME run_nccl_tests_dry_run
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/runner/run_nccl_tests_check.sh ${CMAKE_SOURCE_DIR}/scripts/run-nccl-tests.sh)
set_tests_properties(run_nccl_tests_dry_run PROPERTIES LABELS unit TIMEOUT 60)
