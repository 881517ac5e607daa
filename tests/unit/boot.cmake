# bootstrap unit tests: host lists, port checks, address plan, ids (no network).
rerail_gtest(test_boot_unit SOURCES ${CMAKE_CURRENT_LIST_DIR}/boot/test_job.cc
             LIBS rerail_bootstrap_static LABELS unit TIMEOUT 30)
