# Eager small sends of the net plugin (RERAIL_EAGER_MAX / RERAIL_EAGER_POOL), in process over loopback.
rerail_gtest(test_net_eager
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/lat/test_net_eager.cc
  LIBS rerail_netdrv rerail_common LABELS unit TIMEOUT 60)
target_compile_definitions(test_net_eager PRIVATE RERAIL_NET_SO="$<TARGET_FILE:nccl-net-rerail>")
add_dependencies(test_net_eager nccl-net-rerail)
set_target_properties(test_net_eager PROPERTIES ENABLE_EXPORTS ON)  # its recv/recvmsg count the plugin's reads
