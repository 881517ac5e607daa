# Staging kernels (issue 13): host emulation of the grid (always), device-code architectures (CUDA).
pkg_check_modules(XXHASH REQUIRED IMPORTED_TARGET libxxhash)
rerail_gtest(kernels_emu_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/kernels/kernels_emu_test.cc
             LIBS rerail_kernel_math PkgConfig::XXHASH LABELS unit TIMEOUT 60)
if(RERAIL_CUDA)
  add_test(NAME kernels_archs COMMAND python3 ${CMAKE_SOURCE_DIR}/kernels/fatbin_archs.py
           $<TARGET_FILE:rerail_kernels> ${RERAIL_KERNEL_ARCHS_LIST})
  set_tests_properties(kernels_archs PROPERTIES LABELS unit TIMEOUT 30)
endif()
