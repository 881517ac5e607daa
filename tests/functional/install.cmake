# `cmake --install` into a scratch prefix; the installed tools run with the build tree hidden (issue 16).
add_test(NAME install_scratch_prefix
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/install/install_check.sh ${CMAKE_BINARY_DIR} ${CMAKE_SOURCE_DIR}
                 ${RERAIL_INSTALL_NCCL_NET_SYMLINK})
# A sanitizer build installs instrumented libraries: the test program linked against them needs the runtime.
set_tests_properties(install_scratch_prefix PROPERTIES LABELS functional TIMEOUT 240
                     ENVIRONMENT "RERAIL_SANITIZE=${RERAIL_SANITIZE}")
