# Tuner, fault tier: a real link failure in a network namespace reaches both tuners — the one inside
# libnccl-net-rerail.so (in process) and libnccl-tuner-rerail.so (through the board). Root; skipped
# otherwise. Needs rails.cmake's rerail_netns_fixture (fragments are included in sorted order).
rerail_gtest(test_tuner_faults SOURCES ${CMAKE_CURRENT_LIST_DIR}/tuner/test_tuner_faults.cc
             LIBS rerail_netns_fixture ${CMAKE_DL_LIBS} LABELS faults TIMEOUT 90)
target_include_directories(test_tuner_faults PRIVATE ${CMAKE_SOURCE_DIR}/tuner_plugin/abi ${CMAKE_SOURCE_DIR}/net_plugin/abi)
add_dependencies(test_tuner_faults nccl-net-rerail nccl-tuner-rerail)
target_compile_definitions(test_tuner_faults PRIVATE RERAIL_NET_SO="$<TARGET_FILE:nccl-net-rerail>"
                           RERAIL_TUNER_SO="$<TARGET_FILE:nccl-tuner-rerail>")
