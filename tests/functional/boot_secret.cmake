# RERAIL_JOB_SECRET in the rootless exchange (issue 15).
rerail_gtest(test_boot_exchange_secret SOURCES ${CMAKE_CURRENT_LIST_DIR}/boot/test_exchange_secret.cc
             LIBS rerail_bootstrap_static rerail_common LABELS functional TIMEOUT 60)
