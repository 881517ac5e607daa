# Tuner ABI tier: dlopen libnccl-tuner-rerail.so and drive ncclTunerPlugin_v5/_v6 exactly as NCCL's
# enqueue does, on real rail-health boards of this process (healthy, degraded, removed mid-run).
rerail_gtest(tuner_abi_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/tuner/tuner_abi_test.cc
             LIBS rerail_board ${CMAKE_DL_LIBS} LABELS abi TIMEOUT 60)
target_include_directories(tuner_abi_test PRIVATE ${CMAKE_SOURCE_DIR}/tuner_plugin/abi)
add_dependencies(tuner_abi_test nccl-tuner-rerail)
target_compile_definitions(tuner_abi_test PRIVATE RERAIL_TUNER_SO="$<TARGET_FILE:nccl-tuner-rerail>")

# The tuner inside libnccl-net-rerail.so reads rail health from the net plugin in process.
rerail_gtest(tuner_inproc_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/tuner/tuner_inproc_test.cc
             LIBS ${CMAKE_DL_LIBS} LABELS abi TIMEOUT 60)
target_include_directories(tuner_inproc_test PRIVATE ${CMAKE_SOURCE_DIR}/tuner_plugin/abi ${CMAKE_SOURCE_DIR}/net_plugin/abi)
add_dependencies(tuner_inproc_test nccl-net-rerail)
target_compile_definitions(tuner_inproc_test PRIVATE RERAIL_NET_SO="$<TARGET_FILE:nccl-net-rerail>")
