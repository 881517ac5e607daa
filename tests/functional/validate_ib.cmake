# scripts/validate-ib.sh (issue 12: rerail's IB transport on a real two-node RDMA cluster) without a
# cluster: the --dry-run plan (every step's commands on the node they would run on, in order, the knobs in
# place, nothing run) and the argument checks (exit 2 with a message naming the problem).
add_test(NAME validate_ib_dry_run
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/validate_ib_check.sh ${CMAKE_SOURCE_DIR}/scripts/validate-ib.sh)
set_tests_properties(validate_ib_dry_run PROPERTIES LABELS functional TIMEOUT 60)
# shellcheck of the script and its checks (skipped where shellcheck is not installed).
add_test(NAME validate_ib_shellcheck
         COMMAND sh -c "command -v shellcheck >/dev/null || exit 77; shellcheck \"$0\" \"$1\" \"$2\""
                 ${CMAKE_SOURCE_DIR}/scripts/validate-ib.sh ${CMAKE_CURRENT_LIST_DIR}/validate_ib_check.sh
                 ${CMAKE_CURRENT_LIST_DIR}/validate_ib_verdicts.sh)
set_tests_properties(validate_ib_shellcheck PROPERTIES LABELS functional TIMEOUT 60 SKIP_RETURN_CODE 77)
# Its verdicts on stand-ins (ssh running here, a rerail-info listing two RoCE ports, rerail-perf printing
# the plugin's lines and tables, ib_write_bw, nvidia-smi): all pass -> exit 0; a wrong value, a low busbw
# ratio, a TCP fallback, no failback, a failing fault command -> exit 1 naming it; no perftest -> NOT RUN.
add_test(NAME validate_ib_verdicts
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/validate_ib_verdicts.sh ${CMAKE_SOURCE_DIR}/scripts/validate-ib.sh)
set_tests_properties(validate_ib_verdicts PROPERTIES LABELS functional TIMEOUT 120)
