# rerail-netbench: the loopback benchmark driver and the library the conformance suite shares with it
# (out-of-band channel, proxy-like driver, traffic plans, the commandable peer).
add_library(rerail_netbench_lib STATIC
  ${CMAKE_CURRENT_LIST_DIR}/oob.cc
  ${CMAKE_CURRENT_LIST_DIR}/pattern.cc
  ${CMAKE_CURRENT_LIST_DIR}/proxy_driver.cc
  ${CMAKE_CURRENT_LIST_DIR}/plan.cc
  ${CMAKE_CURRENT_LIST_DIR}/peer.cc)
target_include_directories(rerail_netbench_lib PUBLIC ${CMAKE_CURRENT_LIST_DIR})
find_package(nlohmann_json 3 REQUIRED)
find_package(CLI11 CONFIG REQUIRED)
target_link_libraries(rerail_netbench_lib PUBLIC rerail_netdrv rerail_common nlohmann_json::nlohmann_json Threads::Threads)

add_executable(rerail-netbench ${CMAKE_CURRENT_LIST_DIR}/netbench_main.cc)
target_link_libraries(rerail-netbench PRIVATE rerail_netbench_lib CLI11::CLI11)
if(TARGET nccl-net-rerail)
  add_dependencies(rerail-netbench nccl-net-rerail)
  target_compile_definitions(rerail-netbench PRIVATE RERAIL_NET_PLUGIN_PATH="$<TARGET_FILE:nccl-net-rerail>")
else()
  target_compile_definitions(rerail-netbench PRIVATE RERAIL_NET_PLUGIN_PATH="rerail")
endif()
