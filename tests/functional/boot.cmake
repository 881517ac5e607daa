# bootstrap functional tests: rootless exchange among threads over real loopback sockets.
rerail_gtest(test_boot_exchange SOURCES ${CMAKE_CURRENT_LIST_DIR}/boot/test_exchange.cc
             LIBS rerail_bootstrap_static LABELS functional TIMEOUT 120)

# Ids vs the real ncclGetUniqueId under NCCL_COMM_ID (child process per case; skips without libnccl).
set(_boot_nccl "libnccl.so.2")
if(CUDAToolkit_LIBRARY_DIR AND EXISTS "${CUDAToolkit_LIBRARY_DIR}/libnccl.so.2")
  set(_boot_nccl "${CUDAToolkit_LIBRARY_DIR}/libnccl.so.2")
endif()
rerail_gtest(test_boot_nccl SOURCES ${CMAKE_CURRENT_LIST_DIR}/boot/test_nccl_id.cc
             LIBS rerail_bootstrap_static LABELS functional TIMEOUT 120)
target_compile_definitions(test_boot_nccl PRIVATE RERAIL_TEST_NCCL_LIB="${_boot_nccl}"
  RERAIL_TEST_BOOT_SO="$<TARGET_FILE:rerail_bootstrap>")
add_dependencies(test_boot_nccl rerail_bootstrap)

# The exported C API through dlopen of librerail-bootstrap.so.
rerail_gtest(test_boot_c_api SOURCES ${CMAKE_CURRENT_LIST_DIR}/boot/test_c_api.cc LIBS ${CMAKE_DL_LIBS}
             LABELS functional TIMEOUT 120)
target_include_directories(test_boot_c_api PRIVATE ${CMAKE_SOURCE_DIR}/bootstrap/include)
target_compile_definitions(test_boot_c_api PRIVATE RERAIL_TEST_NCCL_LIB="${_boot_nccl}"
  RERAIL_TEST_BOOT_SO="$<TARGET_FILE:rerail_bootstrap>")
add_dependencies(test_boot_c_api rerail_bootstrap)
add_executable(boot_c_api_child ${CMAKE_CURRENT_LIST_DIR}/boot/c_api_child.c)
target_include_directories(boot_c_api_child PRIVATE ${CMAKE_SOURCE_DIR}/bootstrap/include)
target_link_libraries(boot_c_api_child PRIVATE ${CMAKE_DL_LIBS})
target_compile_definitions(test_boot_c_api PRIVATE RERAIL_TEST_CHILD="$<TARGET_FILE:boot_c_api_child>")
add_dependencies(test_boot_c_api boot_c_api_child)

# librerail-bootstrap.so exports exactly the rerail* C API (no C++ or common/ internals).
add_test(NAME boot_exported_symbols COMMAND bash -c "set -e; so=$<TARGET_FILE:rerail_bootstrap>; \
syms=$(nm -D --defined-only $so | awk '{print $3}' | sort); echo \"$syms\"; \
! echo \"$syms\" | grep -v '^rerail'; \
for f in rerailJobCreate rerailJobFromEnv rerailJobDestroy rerailJobNumRanks rerailRootlessRequested rerailAddress \
rerailCommIdString rerailJobMagic rerailUniqueId rerailUniqueIdEx rerailUniqueIdFromString rerailAllGather rerailCommInitStoreless \
rerailCommRecover rerailCommInitScalable rerailGetLastError; do echo \"$syms\" | grep -qx $f; done")
set_tests_properties(boot_exported_symbols PROPERTIES LABELS functional TIMEOUT 30)
