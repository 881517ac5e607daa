# Profiler hardening (issue 15): 1 M random and foreign NetPlugin descriptors per ABI version (v5, v6)
# through the built libnccl-profiler-rerail.so (dlopen, NcclEmu), then the outputs parsed as JSON.
find_package(nlohmann_json REQUIRED)
rerail_gtest(prof_harden_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/prof_harden_test.cc
             LIBS rerail_prof_emu rerail_prof_emit nlohmann_json::nlohmann_json LABELS functional TIMEOUT 300)
add_dependencies(prof_harden_test nccl-profiler-rerail)
target_compile_definitions(prof_harden_test PRIVATE RERAIL_PROFILER_SO="$<TARGET_FILE:nccl-profiler-rerail>")
