# rerail-info (tools/rerail-info): its document against the plugin's own getProperties, and the CLI.
rerail_gtest(test_info SOURCES ${CMAKE_CURRENT_LIST_DIR}/info/test_info.cc
             LIBS rerail_info_core LABELS unit TIMEOUT 60)
target_compile_definitions(test_info PRIVATE RERAIL_NET_SO="$<TARGET_FILE:nccl-net-rerail>"
  RERAIL_TUNER_SO="$<TARGET_FILE:nccl-tuner-rerail>" RERAIL_PROFILER_SO="$<TARGET_FILE:nccl-profiler-rerail>")
add_dependencies(test_info nccl-net-rerail nccl-tuner-rerail nccl-profiler-rerail)

add_test(NAME info_cli COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/info/info_cli.sh $<TARGET_FILE:rerail-info>)
set_tests_properties(info_cli PROPERTIES LABELS unit TIMEOUT 60)
