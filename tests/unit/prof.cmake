# Profiler plugin unit tests (no files, no threads beyond the test's own).
find_package(nlohmann_json REQUIRED)
rerail_gtest(prof_unit_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/prof_unit_test.cc
             LIBS rerail_profiler rerail_prof_emit nlohmann_json::nlohmann_json LABELS unit TIMEOUT 30)
