rerail_gtest(test_common SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_params.cc ${CMAKE_CURRENT_LIST_DIR}/test_status_log.cc
             LIBS rerail_common LABELS unit)
