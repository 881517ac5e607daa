# Unit tests of the net plugin core (no network) and an in-process loopback smoke test of the .so.
rerail_gtest(test_net_unit
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/net/test_handle.cc ${CMAKE_CURRENT_LIST_DIR}/net/test_rx_tracker.cc
          ${CMAKE_CURRENT_LIST_DIR}/net/test_ifname.cc ${CMAKE_CURRENT_LIST_DIR}/net/test_sched_fsm.cc
          ${CMAKE_CURRENT_LIST_DIR}/net/test_tcp_listener.cc ${CMAKE_CURRENT_LIST_DIR}/net/test_recv_comm.cc
  LIBS rerail_net_core LABELS unit TIMEOUT 30)
rerail_gtest(test_net_loopback
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/net/test_net_loopback.cc
  LIBS rerail_netdrv rerail_common LABELS unit TIMEOUT 120)
target_compile_definitions(test_net_loopback PRIVATE RERAIL_NET_SO="$<TARGET_FILE:nccl-net-rerail>")
add_dependencies(test_net_loopback nccl-net-rerail)
rerail_gtest(test_net_duplex
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/net/test_net_duplex.cc
  LIBS rerail_netbench_lib LABELS unit TIMEOUT 120)
target_compile_definitions(test_net_duplex PRIVATE RERAIL_NET_SO="$<TARGET_FILE:nccl-net-rerail>")
add_dependencies(test_net_duplex nccl-net-rerail)
