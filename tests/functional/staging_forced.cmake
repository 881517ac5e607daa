# Issue 13: the NCCL-proxy conformance suites (data, faults, handles) with every chunk through the CPU staging backend.
if(TARGET conformance_test)
  add_test(NAME conformance_forced_staging COMMAND conformance_test --gtest_filter=Conformance*)   # incl. the fault and handle suites
  set_tests_properties(conformance_forced_staging PROPERTIES ENVIRONMENT "RERAIL_FORCE_STAGING=1"
                       LABELS functional TIMEOUT 300)
endif()
