# rerail-perf: NCCL-proxy emulator with nccl-tests output (issue 3).
# rerail_perf_core holds everything but main() so the unit tests can link the schedule, verifier,
# options and timeline code directly.
find_package(nlohmann_json REQUIRED)
add_library(rerail_perf_core STATIC
  ${CMAKE_CURRENT_LIST_DIR}/options.cc
  ${CMAKE_CURRENT_LIST_DIR}/oob.cc
  ${CMAKE_CURRENT_LIST_DIR}/boot_oob.cc
  ${CMAKE_CURRENT_LIST_DIR}/conn.cc
  ${CMAKE_CURRENT_LIST_DIR}/comm.cc
  ${CMAKE_CURRENT_LIST_DIR}/plan.cc
  ${CMAKE_CURRENT_LIST_DIR}/engine.cc
  ${CMAKE_CURRENT_LIST_DIR}/verify.cc
  ${CMAKE_CURRENT_LIST_DIR}/timeline.cc
  ${CMAKE_CURRENT_LIST_DIR}/board_source.cc
  ${CMAKE_CURRENT_LIST_DIR}/report.cc
  ${CMAKE_CURRENT_LIST_DIR}/rank.cc
  ${CMAKE_CURRENT_LIST_DIR}/launcher.cc)
target_include_directories(rerail_perf_core PUBLIC ${CMAKE_CURRENT_LIST_DIR})
target_link_libraries(rerail_perf_core PUBLIC rerail_prof_emu rerail_netdrv rerail_rails rerail_bootstrap_static rerail_common nlohmann_json::nlohmann_json
                      Threads::Threads)

add_executable(rerail-perf ${CMAKE_CURRENT_LIST_DIR}/main.cc)
set_target_properties(rerail-perf PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tools/rerail-perf)
target_link_libraries(rerail-perf PRIVATE rerail_perf_core rerail_netbench_lib)
target_compile_definitions(rerail-perf PRIVATE RERAIL_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
# Default plugin: the rerail net plugin built in this tree, when its target exists.
if(TARGET nccl-net-rerail)
  target_compile_definitions(rerail-perf PRIVATE RERAIL_PERF_DEFAULT_PLUGIN="$<TARGET_FILE:nccl-net-rerail>")
  add_dependencies(rerail-perf nccl-net-rerail)
endif()
