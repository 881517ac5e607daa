# rerail-info: version, plugins, devices as getProperties reports them, RERAIL_* values (and the former
# rerail-params: --markdown, --check).
find_package(nlohmann_json REQUIRED)
find_package(CLI11 CONFIG REQUIRED)
add_library(rerail_info_core STATIC ${CMAKE_CURRENT_LIST_DIR}/info.cc ${CMAKE_CURRENT_LIST_DIR}/text.cc)
target_include_directories(rerail_info_core PUBLIC ${CMAKE_CURRENT_LIST_DIR})
target_link_libraries(rerail_info_core PUBLIC rerail_netbench_lib rerail_netdrv rerail_common nlohmann_json::nlohmann_json)
if(RERAIL_IB)  # the "IB devices" section runs rerail's own verbs loader and discovery in process
  target_link_libraries(rerail_info_core PUBLIC rerail_ib)
  target_compile_definitions(rerail_info_core PRIVATE RERAIL_WITH_IB=1)
endif()

add_executable(rerail-info ${CMAKE_CURRENT_LIST_DIR}/main.cc)
target_link_libraries(rerail-info PRIVATE rerail_info_core CLI11::CLI11)
foreach(kind net tuner profiler)
  if(TARGET nccl-${kind}-rerail)
    string(TOUPPER ${kind} _k)
    target_compile_definitions(rerail-info PRIVATE RERAIL_INFO_${_k}_SO="$<TARGET_FILE:nccl-${kind}-rerail>")
    add_dependencies(rerail-info nccl-${kind}-rerail)
  endif()
endforeach()
