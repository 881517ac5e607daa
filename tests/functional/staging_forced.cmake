# Issue 13: the NCCL-proxy conformance suite with every chunk through the CPU staging backend.
if(TARGET conformance_test)
  add_test(NAME conformance_forced_staging COMMAND conformance_test --gtest_filter=Conformance.*)
  set_tests_properties(conformance_forced_staging PROPERTIES ENVIRONMENT "RERAIL_FORCE_STAGING=1"
                       LABELS functional TIMEOUT 300)
endif()
