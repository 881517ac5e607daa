# net: the resilient net plugin under real rail faults (netns fabric from scripts/netns-rails.sh).
add_executable(net_fault_peer ${CMAKE_CURRENT_LIST_DIR}/net/net_fault_peer.cc)
target_link_libraries(net_fault_peer PRIVATE rerail_netdrv rerail_common)
rerail_gtest(test_net_faults
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/net/test_net_faults.cc
  LIBS rerail_netns_fixture LABELS faults TIMEOUT 150)
target_compile_definitions(test_net_faults PRIVATE RERAIL_NET_SO="$<TARGET_FILE:nccl-net-rerail>"
                           RERAIL_FAULT_PEER="$<TARGET_FILE:net_fault_peer>")
add_dependencies(test_net_faults nccl-net-rerail net_fault_peer)
