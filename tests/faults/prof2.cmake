# rerail-perf --profiler with a rail taken down on simulated hosts: the failover instant is on the right
# rail's track, inside the right collective (issue 6 acceptance). Root only; skipped otherwise.
if(TARGET nccl-net-rerail AND TARGET rerail-perf)
  add_test(NAME prof2_perf_failover_trace
           COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/prof2_perf_failover.sh $<TARGET_FILE:rerail-perf>
                   $<TARGET_FILE:nccl-net-rerail> $<TARGET_FILE:nccl-profiler-rerail> ${CMAKE_SOURCE_DIR})
  set_tests_properties(prof2_perf_failover_trace PROPERTIES TIMEOUT 60 LABELS faults SKIP_RETURN_CODE 77
                       RUN_SERIAL TRUE)
endif()
