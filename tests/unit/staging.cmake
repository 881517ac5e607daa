# Staging ring and CPU copy engine (issue 13).
rerail_gtest(staging_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/staging/staging_test.cc
             LIBS rerail_staging LABELS unit TIMEOUT 60)
rerail_gtest(stager_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/staging/stager_test.cc
             LIBS rerail_staging LABELS unit TIMEOUT 60)
