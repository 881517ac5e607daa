# The sans-I/O protocol core (net_plugin/core/): purity check and unit tests of the core alone.
add_test(NAME CoreIsSansIo
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/core/check_purity.sh ${CMAKE_SOURCE_DIR} $<TARGET_FILE:rr_core>)
set_tests_properties(CoreIsSansIo PROPERTIES LABELS unit TIMEOUT 30)
rerail_gtest(test_core SOURCES ${CMAKE_CURRENT_LIST_DIR}/core/test_core.cc LIBS rr_core LABELS unit TIMEOUT 30)
