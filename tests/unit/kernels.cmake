# Staging kernels (issue 13): host emulation of the grid (always), device-code architectures (CUDA).
pkg_check_modules(XXHASH REQUIRED IMPORTED_TARGET libxxhash)
rerail_gtest(kernels_emu_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/kernels/kernels_emu_test.cc
             LIBS rerail_kernel_math PkgConfig::XXHASH LABELS unit TIMEOUT 60)
if(RERAIL_CUDA)
  add_test(NAME kernels_archs COMMAND python3 ${CMAKE_SOURCE_DIR}/kernels/fatbin_archs.py
           $<TARGET_FILE:rerail_kernels> ${RERAIL_KERNEL_ARCHS_LIST})
  set_tests_properties(kernels_archs PROPERTIES LABELS unit TIMEOUT 30)
endif()
if(RERAIL_CUDA)
  # Runs the kernels on a GPU; skipped (exit 77) on machines without one, such as CI.
  add_test(NAME kernels_gpu COMMAND rerail-kernels-gpu-test)
  set_tests_properties(kernels_gpu PROPERTIES LABELS unit TIMEOUT 120 SKIP_RETURN_CODE 77)
endif()
if(RERAIL_CUDA)
  # GPU buffers through the net plugin's ABI table (RERAIL_GPU_BUFFERS=1); skipped without a GPU.
  add_executable(rerail-plugin-gpu-test ${CMAKE_SOURCE_DIR}/tests/gpu/plugin_gpu_test.cc)
  target_include_directories(rerail-plugin-gpu-test PRIVATE ${CMAKE_SOURCE_DIR}/net_plugin/abi)
  target_link_libraries(rerail-plugin-gpu-test PRIVATE CUDA::cudart_static ${CMAKE_DL_LIBS})
  add_test(NAME plugin_gpu COMMAND rerail-plugin-gpu-test $<TARGET_FILE:nccl-net-rerail>)
  set_tests_properties(plugin_gpu PROPERTIES LABELS unit TIMEOUT 300 SKIP_RETURN_CODE 77
                       ENVIRONMENT "RERAIL_TCP_IFNAME=lo")
endif()
if(RERAIL_CUDA)
  # The stager with cudaMalloc'd buffers (pinned slots, byte-exact, the caller's context kept); skips without a GPU.
  rerail_gtest(stager_gpu_test SOURCES ${CMAKE_SOURCE_DIR}/tests/gpu/stager_gpu_test.cc
               LIBS rerail_staging CUDA::cudart_static ${CMAKE_DL_LIBS} LABELS unit TIMEOUT 120)
endif()
