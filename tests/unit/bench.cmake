# rerail-perf additions for scripts/bench-rails.sh (no network): timeline bins, completed series, flags.
find_package(nlohmann_json REQUIRED)
rerail_gtest(test_bench_perf SOURCES ${CMAKE_CURRENT_LIST_DIR}/bench_perf_test.cc
             LIBS rerail_perf_core nlohmann_json::nlohmann_json LABELS unit TIMEOUT 60)
