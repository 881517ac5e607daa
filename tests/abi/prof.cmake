# libnccl-profiler-rerail.so exports exactly NCCL's two profiler symbols, as data objects, and loads with
# RTLD_NOW|RTLD_LOCAL on this host (the functional tests dlopen it that way through NcclEmu).
add_test(NAME prof_abi_exports
         COMMAND sh -c "nm -D --defined-only '$<TARGET_FILE:nccl-profiler-rerail>' | awk '{print $2\" \"$3}' | sort | tr '\\n' ';'")
set_tests_properties(prof_abi_exports PROPERTIES LABELS abi TIMEOUT 30
                     PASS_REGULAR_EXPRESSION "^D ncclProfiler_v5;D ncclProfiler_v6;$")
add_test(NAME prof_abi_no_undefined_beyond_libc
         COMMAND sh -c "ldd '$<TARGET_FILE:nccl-profiler-rerail>' | awk '{print $1}' | sed 's/[.]so.*//' | sort -u | tr '\\n' ' '")
set_tests_properties(prof_abi_no_undefined_beyond_libc PROPERTIES LABELS abi TIMEOUT 30
                     FAIL_REGULAR_EXPRESSION "not found|libnccl|libcuda|libibverbs")
