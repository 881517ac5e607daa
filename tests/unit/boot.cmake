# bootstrap unit tests: host lists, port checks, address plan, ids (no network).
rerail_gtest(test_boot_unit SOURCES ${CMAKE_CURRENT_LIST_DIR}/boot/test_job.cc
             LIBS rerail_bootstrap_static LABELS unit TIMEOUT 30)
rerail_gtest(test_boot_exchange_proto SOURCES ${CMAKE_CURRENT_LIST_DIR}/boot/test_exchange_proto.cc
             LIBS rerail_bootstrap_static LABELS unit TIMEOUT 30)
target_include_directories(test_boot_exchange_proto PRIVATE ${PROJECT_SOURCE_DIR}/bootstrap/src)
