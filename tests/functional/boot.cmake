# bootstrap functional tests: rootless exchange among threads over real loopback sockets.
rerail_gtest(test_boot_exchange SOURCES ${CMAKE_CURRENT_LIST_DIR}/boot/test_exchange.cc
             LIBS rerail_bootstrap_static LABELS functional TIMEOUT 120)
