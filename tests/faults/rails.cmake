# rails: fault tests in network namespaces (root; skipped otherwise) and the shared fixture target.
# rerail_netns_fixture: link it to use netns_fixture.h / netns_traffic.h / netns_faults.h.
add_library(rerail_netns_fixture INTERFACE)
target_include_directories(rerail_netns_fixture INTERFACE ${CMAKE_CURRENT_LIST_DIR})
target_link_libraries(rerail_netns_fixture INTERFACE rerail_common)
target_compile_definitions(rerail_netns_fixture INTERFACE
  RERAIL_NETNS_SCRIPT="${PROJECT_SOURCE_DIR}/scripts/netns-rails.sh")

rerail_gtest(test_rails_faults
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/rails/test_netns_rails.cc
          ${CMAKE_CURRENT_LIST_DIR}/rails/test_link_monitor_faults.cc
          ${CMAKE_CURRENT_LIST_DIR}/rails/test_rails_midstream.cc
  LIBS rerail_rails rerail_netns_fixture LABELS faults TIMEOUT 90)
target_compile_definitions(test_rails_faults PRIVATE RERAIL_TOP_BIN="$<TARGET_FILE:rerail-top>")
add_dependencies(test_rails_faults rerail-top)
