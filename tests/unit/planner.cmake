# Re-ranking planner (tuner_plugin/planner): exact vs heuristic, invariants, naive-order cases.
rerail_gtest(test_planner SOURCES ${CMAKE_CURRENT_LIST_DIR}/planner_test.cc
             LIBS rerail_planner LABELS unit TIMEOUT 60)
