# ABI tier: load every built rerail library like NCCL does, check exported names, table/props layout
# and the NCCL_*_PLUGIN name rule. Expected symbols live in tests/abi/expected_symbols.txt.
add_executable(abi_dlopen ${CMAKE_CURRENT_LIST_DIR}/abi_dlopen.c)
target_link_libraries(abi_dlopen PRIVATE ${CMAKE_DL_LIBS})
add_test(NAME abi_exports_and_dlopen
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/check_abi.sh ${CMAKE_BINARY_DIR} $<TARGET_FILE:abi_dlopen>
                 ${CMAKE_CURRENT_LIST_DIR}/expected_symbols.txt)
set_tests_properties(abi_exports_and_dlopen PROPERTIES LABELS abi TIMEOUT 60 SKIP_RETURN_CODE 77
                     ENVIRONMENT "RERAIL_TCP_IFNAME=lo")
