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
