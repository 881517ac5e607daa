# Profiler plugin functional tests: the built libnccl-profiler-rerail.so driven through its ABI by the
# NCCL emulation (rr::prof::NcclEmu), from several threads.
find_package(nlohmann_json REQUIRED)
rerail_gtest(prof_tree_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/prof_tree_test.cc
             LIBS rerail_prof_emu rerail_prof_emit nlohmann_json::nlohmann_json LABELS functional TIMEOUT 60)
add_dependencies(prof_tree_test nccl-profiler-rerail)
target_compile_definitions(prof_tree_test PRIVATE RERAIL_PROFILER_SO="$<TARGET_FILE:nccl-profiler-rerail>")

# Settings are read once per process: one process per configuration, each with its own output directory.
add_executable(prof_config_test ${CMAKE_CURRENT_LIST_DIR}/prof_config_test.cc)
target_link_libraries(prof_config_test PRIVATE rerail_prof_emu rerail_prof_emit nlohmann_json::nlohmann_json
                      GTest::gtest GTest::gtest_main Threads::Threads)
add_dependencies(prof_config_test nccl-profiler-rerail)
target_compile_definitions(prof_config_test PRIVATE RERAIL_PROFILER_SO="$<TARGET_FILE:nccl-profiler-rerail>")
function(prof_config_case name filter)
  set(dir ${CMAKE_CURRENT_BINARY_DIR}/prof-out/${name})
  add_test(NAME ${name} COMMAND prof_config_test --gtest_filter=${filter})
  set_tests_properties(${name} PROPERTIES LABELS functional TIMEOUT 30 SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]"
                       ENVIRONMENT "RERAIL_PROFILE_DIR=${dir};${ARGN}")
endfunction()
prof_config_case(prof_config_bad ProfConfig.BadMaskWordIsWarnedAndUnwritableDirFailsInit
                 "RERAIL_PROFILE_MASK=coll,bogus")
# The unwritable directory of that case overrides the default one (later ENVIRONMENT entries win).
set_property(TEST prof_config_bad APPEND PROPERTY ENVIRONMENT "RERAIL_PROFILE_DIR=/proc/rerail-no-such-dir")
prof_config_case(prof_config_mask ProfConfig.HiddenTypesAreSkippedAndChildrenReparented "RERAIL_PROFILE_MASK=coll,net")
prof_config_case(prof_config_flush ProfConfig.PeriodicFlushWritesValidOutputsBeforeFinalize
                 "RERAIL_PROFILE_FLUSH_S=1")

# Two ranks in two processes, merged by scripts/trace-summary.py.
add_executable(prof_rank_driver ${CMAKE_CURRENT_LIST_DIR}/prof_rank_driver.cc)
target_link_libraries(prof_rank_driver PRIVATE rerail_prof_emu rerail_prof_emit)
add_dependencies(prof_rank_driver nccl-profiler-rerail)
find_package(Python3 COMPONENTS Interpreter)
if(Python3_Interpreter_FOUND)
  add_test(NAME prof_multirank_merge
           COMMAND ${CMAKE_CURRENT_LIST_DIR}/prof_multirank.sh $<TARGET_FILE:prof_rank_driver>
                   $<TARGET_FILE:nccl-profiler-rerail> ${CMAKE_SOURCE_DIR}/scripts/trace-summary.py)
  set_tests_properties(prof_multirank_merge PROPERTIES LABELS functional TIMEOUT 60 PASS_REGULAR_EXPRESSION "PASS")
endif()
