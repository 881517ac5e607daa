# rerail-perf unit tests (no network): schedules, verifier, option parsing, timeline.
rerail_gtest(test_perf_unit SOURCES ${CMAKE_CURRENT_LIST_DIR}/perf_test_plan.cc LIBS rerail_perf_core LABELS unit TIMEOUT 120)
