# The real net plugin's rerail net events reach the profiler's trace (issue 6 item 3): both plugins from
# libnccl-net-rerail.so, driven over loopback through rr::netdrv and rr::prof::NcclEmu.
find_package(nlohmann_json REQUIRED)
rerail_gtest(prof2_net_events_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/prof2_net_events_test.cc
             LIBS rerail_prof_emu rerail_netdrv nlohmann_json::nlohmann_json LABELS functional TIMEOUT 60)
add_dependencies(prof2_net_events_test nccl-net-rerail)
target_compile_definitions(prof2_net_events_test PRIVATE RERAIL_NET_SO="$<TARGET_FILE:nccl-net-rerail>")
