# NCCL-proxy conformance suite: this process and a conformance_peer process load the net plugin and
# drive it as NCCL's proxy does, over loopback only. One ctest case per gtest case.
if(TARGET nccl-net-rerail)
  set(conf_plugin "$<TARGET_FILE:nccl-net-rerail>")
else()
  set(conf_plugin "rerail")  # resolved like NCCL_NET_PLUGIN=rerail; the cases fail clearly if absent
endif()
add_executable(conformance_peer ${CMAKE_CURRENT_LIST_DIR}/conformance_peer.cc)
target_link_libraries(conformance_peer PRIVATE rerail_netbench_lib)
rerail_gtest(conformance_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/conformance_main.cc ${CMAKE_CURRENT_LIST_DIR}/conformance_util.cc
          ${CMAKE_CURRENT_LIST_DIR}/conformance_test.cc ${CMAKE_CURRENT_LIST_DIR}/conformance_fault_test.cc
          ${CMAKE_CURRENT_LIST_DIR}/conformance_handle_test.cc ${CMAKE_CURRENT_LIST_DIR}/conformance_grouped_test.cc
  LIBS rerail_netbench_lib
  LABELS functional
  TIMEOUT 120)
target_compile_definitions(conformance_test PRIVATE RERAIL_NET_PLUGIN_PATH="${conf_plugin}")
add_dependencies(conformance_test conformance_peer)
if(TARGET nccl-net-rerail)
  add_dependencies(conformance_test nccl-net-rerail)
endif()
