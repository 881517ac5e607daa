# Profiler plugin functional tests: the built libnccl-profiler-rerail.so driven through its ABI by the
# NCCL emulation (rr::prof::NcclEmu), from several threads.
find_package(nlohmann_json REQUIRED)
rerail_gtest(prof_tree_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/prof_tree_test.cc
             LIBS rerail_prof_emu rerail_prof_emit nlohmann_json::nlohmann_json LABELS functional TIMEOUT 60)
add_dependencies(prof_tree_test nccl-profiler-rerail)
target_compile_definitions(prof_tree_test PRIVATE RERAIL_PROFILER_SO="$<TARGET_FILE:nccl-profiler-rerail>")
