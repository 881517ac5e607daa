# Re-ranking planner (tuner_plugin/planner): exact vs heuristic, invariants, naive-order cases.
rerail_gtest(test_planner SOURCES ${CMAKE_CURRENT_LIST_DIR}/planner_test.cc
             LIBS rerail_planner LABELS unit TIMEOUT 60)
# rerail-plan: graph XML schema check and the CLI on a fabric file.
rerail_gtest(test_plan_graph_xml SOURCES ${CMAKE_CURRENT_LIST_DIR}/plan_graph_xml_test.cc
             LIBS rerail_plan_lib GTest::gtest LABELS unit TIMEOUT 60)
add_test(NAME plan_cli_file COMMAND ${CMAKE_CURRENT_LIST_DIR}/plan/cli_test.sh $<TARGET_FILE:rerail-plan>)
set_tests_properties(plan_cli_file PROPERTIES TIMEOUT 60 LABELS unit)
add_test(NAME plan_sim_smoke COMMAND ${CMAKE_CURRENT_LIST_DIR}/plan/sim_test.sh $<TARGET_FILE:rerail-sim>)
set_tests_properties(plan_sim_smoke PROPERTIES TIMEOUT 120 LABELS unit)
