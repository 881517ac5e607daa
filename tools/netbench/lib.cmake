# The two-process loopback driver: the library the conformance suite shares with `rerail-perf netbench`
# (out-of-band channel, proxy-like driver, traffic plans, the commandable peer, the netbench CLI).
find_package(nlohmann_json 3 REQUIRED)
find_package(CLI11 CONFIG REQUIRED)
add_library(rerail_netbench_lib STATIC
  ${CMAKE_CURRENT_LIST_DIR}/oob.cc
  ${CMAKE_CURRENT_LIST_DIR}/pattern.cc
  ${CMAKE_CURRENT_LIST_DIR}/proxy_driver.cc
  ${CMAKE_CURRENT_LIST_DIR}/plan.cc
  ${CMAKE_CURRENT_LIST_DIR}/raw_pingpong.cc
  ${CMAKE_CURRENT_LIST_DIR}/peer.cc
  ${CMAKE_CURRENT_LIST_DIR}/netbench_cli.cc)
target_include_directories(rerail_netbench_lib PUBLIC ${CMAKE_CURRENT_LIST_DIR})
target_link_libraries(rerail_netbench_lib PUBLIC rerail_netdrv rerail_common nlohmann_json::nlohmann_json
                      Threads::Threads PRIVATE CLI11::CLI11)
