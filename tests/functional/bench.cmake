# rerail-perf's benchmark outputs (--duration, --timeline-bin-ms, CPU per GB, phases) and
# scripts/rails-report.py, on loopback with the test plugin perf-refnet (tests/functional/perf.cmake).
add_test(NAME bench_perf_outputs
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/bench_perf_check.sh $<TARGET_FILE:rerail-perf>
                 $<TARGET_FILE:perf-refnet> ${CMAKE_SOURCE_DIR})
set_tests_properties(bench_perf_outputs PROPERTIES TIMEOUT 120 LABELS functional)
