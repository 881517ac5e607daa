# rerail-perf with real faults in simulated hosts (root; skipped otherwise).
if(TARGET nccl-net-rerail)
  add_test(NAME perf_faults_hosts_slow_heal
           COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/perf_fault_run.sh $<TARGET_FILE:rerail-perf>
                   $<TARGET_FILE:nccl-net-rerail> ${CMAKE_SOURCE_DIR})
  set_tests_properties(perf_faults_hosts_slow_heal PROPERTIES TIMEOUT 180 LABELS faults SKIP_RETURN_CODE 77
                       RUN_SERIAL TRUE)
endif()
if(TARGET nccl-net-rerail)
  add_test(NAME perf_faults_failover_degraded_primary
           COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/perf_failover_degraded.sh $<TARGET_FILE:rerail-perf>
                   $<TARGET_FILE:nccl-net-rerail> ${CMAKE_SOURCE_DIR})
  set_tests_properties(perf_faults_failover_degraded_primary PROPERTIES TIMEOUT 180 LABELS faults
                       SKIP_RETURN_CODE 77 RUN_SERIAL TRUE)
endif()
if(TARGET nccl-net-rerail)
  add_test(NAME perf_faults_blackhole_idle_sends
           COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/perf_blackhole_idle.sh $<TARGET_FILE:rerail-perf>
                   $<TARGET_FILE:nccl-net-rerail> ${CMAKE_SOURCE_DIR})
  set_tests_properties(perf_faults_blackhole_idle_sends PROPERTIES TIMEOUT 200 LABELS faults
                       SKIP_RETURN_CODE 77 RUN_SERIAL TRUE)
endif()
