# rerail-perf functional tests: real rank processes over real loopback sockets, #wrong asserted = 0.
# perf-refnet is a minimal TCP plugin (tests only) so the emulator is tested independently of
# rerail's own plugin; when nccl-net-rerail is built, the same checks run against it too.
add_library(perf-refnet MODULE ${CMAKE_CURRENT_LIST_DIR}/perf_refnet.cc)
set_target_properties(perf-refnet PROPERTIES PREFIX "lib" OUTPUT_NAME "nccl-net-perfref")

set(_perf_script ${CMAKE_CURRENT_LIST_DIR}/perf_check.sh)
foreach(n 2 4)
  add_test(NAME perf_refnet_allreduce_alltoall_${n}
           COMMAND bash ${_perf_script} $<TARGET_FILE:rerail-perf> $<TARGET_FILE:perf-refnet> ${n}
                   all_reduce,alltoall)
  set_tests_properties(perf_refnet_allreduce_alltoall_${n} PROPERTIES TIMEOUT 120 LABELS functional)
  add_test(NAME perf_refnet_every_collective_${n}
           COMMAND bash ${_perf_script} $<TARGET_FILE:rerail-perf> $<TARGET_FILE:perf-refnet> ${n} all)
  set_tests_properties(perf_refnet_every_collective_${n} PROPERTIES TIMEOUT 180 LABELS functional)
  if(TARGET nccl-net-rerail)
    add_test(NAME perf_rerail_allreduce_alltoall_${n}
             COMMAND bash ${_perf_script} $<TARGET_FILE:rerail-perf> $<TARGET_FILE:nccl-net-rerail> ${n}
                     all_reduce,alltoall)
    set_tests_properties(perf_rerail_allreduce_alltoall_${n} PROPERTIES TIMEOUT 180 LABELS functional
                         ENVIRONMENT "RERAIL_TCP_IFNAME=lo")
    add_test(NAME perf_rerail_every_collective_${n}
             COMMAND bash ${_perf_script} $<TARGET_FILE:rerail-perf> $<TARGET_FILE:nccl-net-rerail> ${n} all)
    set_tests_properties(perf_rerail_every_collective_${n} PROPERTIES TIMEOUT 180 LABELS functional
                         ENVIRONMENT "RERAIL_TCP_IFNAME=lo")
  endif()
endforeach()
add_test(NAME perf_bad_flags COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/perf_bad_flags.sh $<TARGET_FILE:rerail-perf>)
set_tests_properties(perf_bad_flags PROPERTIES TIMEOUT 60 LABELS functional)
