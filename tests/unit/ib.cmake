# IB verbs transport, stage 1 (issue 12): loader and discovery without RDMA hardware.
add_library(rr_fake_unversioned_verbs SHARED ${CMAKE_CURRENT_LIST_DIR}/ib/fake_unversioned_verbs.c)
set_target_properties(rr_fake_unversioned_verbs PROPERTIES C_VISIBILITY_PRESET default)
add_library(rr_fake_foreign_verbs SHARED ${CMAKE_CURRENT_LIST_DIR}/ib/fake_unversioned_verbs.c)
set_target_properties(rr_fake_foreign_verbs PROPERTIES C_VISIBILITY_PRESET default)
target_link_options(rr_fake_foreign_verbs PRIVATE -Wl,--version-script=${CMAKE_CURRENT_LIST_DIR}/ib/fake_foreign_verbs.map)
rerail_gtest(test_ib_unit
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/ib/test_ib_devices.cc ${CMAKE_CURRENT_LIST_DIR}/ib/test_verbs_loader.cc
          ${CMAKE_CURRENT_LIST_DIR}/ib/test_mr_cache.cc
  LIBS rerail_ib LABELS unit TIMEOUT 30)
target_compile_definitions(test_ib_unit PRIVATE RERAIL_FAKE_UNVERSIONED_VERBS="$<TARGET_FILE:rr_fake_unversioned_verbs>"
                           RERAIL_FAKE_FOREIGN_VERBS="$<TARGET_FILE:rr_fake_foreign_verbs>")
add_dependencies(test_ib_unit rr_fake_unversioned_verbs rr_fake_foreign_verbs)

if(RERAIL_HAVE_VERBS_H)  # rerail's verbs declarations vs rdma-core's header (compile-time checks)
  rerail_gtest(test_verbs_layout SOURCES ${CMAKE_CURRENT_LIST_DIR}/ib/verbs_layout_test.cc
               LIBS rerail_ib LABELS unit TIMEOUT 30)
endif()

# The net plugin never links libibverbs, loads with RTLD_NOW where it is missing, then offers TCP
# devices only and says why in one INFO line; a malformed RERAIL_IB_* value fails init clearly.
add_test(NAME ib_plugin_tcp_only
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/ib/ib_plugin_tcp_only.sh $<TARGET_FILE:nccl-net-rerail> $<TARGET_FILE:rerail-info>
                 $<TARGET_FILE:rr_fake_foreign_verbs>)
set_tests_properties(ib_plugin_tcp_only PROPERTIES LABELS "unit;abi" TIMEOUT 60 ENVIRONMENT "RERAIL_TCP_IFNAME=lo")
