# Peer compatibility (issue 15): a second accept on a listen comm, isend/irecv posted after the peer
# closed - as NCCL's socket transport behaves. libnccl-net-rerail.so via rr::netdrv, loopback, one process.
rerail_gtest(net_peer_compat_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/net/net_peer_compat_test.cc
             LIBS rerail_netdrv rerail_common LABELS functional TIMEOUT 120)
target_compile_definitions(net_peer_compat_test PRIVATE RERAIL_NET_SO="$<TARGET_FILE:nccl-net-rerail>")
add_dependencies(net_peer_compat_test nccl-net-rerail)

# RERAIL_JOB_SECRET on net links (issue 15): strangers with a handle but not the secret are rejected.
rerail_gtest(net_auth_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/net/net_auth_test.cc
             LIBS rerail_netdrv rerail_net_core rerail_common LABELS functional TIMEOUT 120)
target_compile_definitions(net_auth_test PRIVATE RERAIL_NET_SO="$<TARGET_FILE:nccl-net-rerail>")
add_dependencies(net_auth_test nccl-net-rerail)

# Resource bounds (issue 15): 1000 comms x 4 rails open at once and closed, nothing left (root: netns).
add_executable(net_many_comms_test ${CMAKE_CURRENT_LIST_DIR}/net/net_many_comms_test.cc)
target_link_libraries(net_many_comms_test PRIVATE rerail_netdrv rerail_common GTest::gtest GTest::gtest_main Threads::Threads)
target_compile_definitions(net_many_comms_test PRIVATE RERAIL_NET_SO="$<TARGET_FILE:nccl-net-rerail>")
add_dependencies(net_many_comms_test nccl-net-rerail)
add_test(NAME net_many_comms COMMAND ${CMAKE_CURRENT_LIST_DIR}/net/net_many_comms.sh $<TARGET_FILE:net_many_comms_test>)
set_tests_properties(net_many_comms PROPERTIES LABELS functional TIMEOUT 600 SKIP_REGULAR_EXPRESSION "SKIP:")

# ABI boundary audit (issue 15): NULL and foreign pointers at every net entry point are clean errors.
rerail_gtest(net_misuse_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/net/net_misuse_test.cc
             LIBS rerail_netdrv rerail_common LABELS functional TIMEOUT 60)
target_compile_definitions(net_misuse_test PRIVATE RERAIL_NET_SO="$<TARGET_FILE:nccl-net-rerail>")
add_dependencies(net_misuse_test nccl-net-rerail)
