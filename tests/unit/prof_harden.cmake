# Profiler hardening (issue 15): every rejected net descriptor case, text sanitising, exception guards.
find_package(nlohmann_json REQUIRED)
rerail_gtest(prof_harden_unit_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/prof_harden_unit_test.cc
             LIBS rerail_profiler rerail_prof_emit nlohmann_json::nlohmann_json LABELS unit TIMEOUT 30)
