# Tuner unit tests: rule-file parser, rail-state summary, the in-process health registry driving
# CommTuner (the net plugin's side of the mixed library is tested in tests/abi/tuner.cmake).
rerail_gtest(test_tuner_unit SOURCES ${CMAKE_CURRENT_LIST_DIR}/tuner/test_tuner_unit.cc
             LIBS rerail_tuner LABELS unit TIMEOUT 30)
