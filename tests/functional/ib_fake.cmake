# The IB transport over the fake libibverbs (tests/fakeverbs): no RDMA, no QEMU, seconds. The same
# rerail code that runs over rxe in the guest (ib_rxe.cmake) loads libfakeverbs.so by RERAIL_IB_LIB.

# Discovery: rerail-info lists both fake devices with their link layer, GID and 4x HDR speed; with
# fake1's port down (FAKEVERBS_PORT_DOWN) only fake0 is kept.
add_test(NAME ib_fake_discovery
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/ib/fake_discovery.sh $<TARGET_FILE:rerail-info> $<TARGET_FILE:fakeverbs>)
set_tests_properties(ib_fake_discovery PROPERTIES LABELS functional TIMEOUT 60)

# rerail's verbs objects (IbDevice/IbCq/IbMr/IbQp/MrCache/IbEventMonitor) over the fake: the very tests
# the rxe guest runs (tests/functional/ib/verbs_rc_test.cc), none skipped.
add_test(NAME ib_fake_verbs_rc COMMAND $<TARGET_FILE:test_ib_verbs_rc> --gtest_color=no)
set_tests_properties(ib_fake_verbs_rc PROPERTIES LABELS functional TIMEOUT 60
  ENVIRONMENT "RERAIL_IB_LIB=$<TARGET_FILE:fakeverbs>"
  FAIL_REGULAR_EXPRESSION "\\[  SKIPPED \\]|\\[  FAILED  \\]")

# What the fake enforces, rule by rule, each with a passing control case (verbs_fake_test.cc): QP masks,
# post before RTS, send-queue occupancy, CQ overrun, wire-time order, RNR, keys/bounds/access, PSNs,
# black hole, ack-only loss, device fatal (on fake2, hence three devices).
add_executable(test_ib_verbs_fake ${CMAKE_CURRENT_LIST_DIR}/ib/verbs_fake_test.cc)
target_link_libraries(test_ib_verbs_fake PRIVATE rerail_ib GTest::gtest GTest::gtest_main Threads::Threads ${CMAKE_DL_LIBS})
add_dependencies(test_ib_verbs_fake fakeverbs)
add_test(NAME ib_fake_verbs_semantics COMMAND $<TARGET_FILE:test_ib_verbs_fake> --gtest_color=no)
set_tests_properties(ib_fake_verbs_semantics PROPERTIES LABELS functional TIMEOUT 60
  ENVIRONMENT "RERAIL_IB_LIB=$<TARGET_FILE:fakeverbs>;FAKEVERBS_DEVICES=3"
  FAIL_REGULAR_EXPRESSION "\\[  SKIPPED \\]|\\[  FAILED  \\]")
# The same over an InfiniBand fabric (IbQp::Connect addresses the peer by LID instead of a GRH).
add_test(NAME ib_fake_verbs_rc_infiniband COMMAND $<TARGET_FILE:test_ib_verbs_rc> --gtest_color=no)
set_tests_properties(ib_fake_verbs_rc_infiniband PROPERTIES LABELS functional TIMEOUT 60
  ENVIRONMENT "RERAIL_IB_LIB=$<TARGET_FILE:fakeverbs>;FAKEVERBS_LINK_LAYER=ib"
  FAIL_REGULAR_EXPRESSION "\\[  SKIPPED \\]|\\[  FAILED  \\]")

# The IB data path on the sans-I/O core (issue 12 stage 2): a SendCore and a RecvCore driven by the IB
# drivers over 2 rails x 2 RC QPs of the fake, every size byte-checked, one failover per failure class
# (WC error, port event, black hole, ack-only loss) and a re-send after completion (ib_driver_test.cc).
add_executable(test_ib_driver ${CMAKE_CURRENT_LIST_DIR}/ib/ib_driver_test.cc)
target_link_libraries(test_ib_driver PRIVATE rerail_ib_driver GTest::gtest GTest::gtest_main Threads::Threads ${CMAKE_DL_LIBS})
add_dependencies(test_ib_driver fakeverbs)
add_test(NAME ib_fake_driver COMMAND $<TARGET_FILE:test_ib_driver> --gtest_color=no)
set_tests_properties(ib_fake_driver PROPERTIES LABELS functional TIMEOUT 120
  ENVIRONMENT "RERAIL_IB_LIB=$<TARGET_FILE:fakeverbs>;FAKEVERBS_DEVICES=4"
  FAIL_REGULAR_EXPRESSION "\\[  SKIPPED \\]|\\[  FAILED  \\]")
# The same over InfiniBand addressing (LIDs instead of RoCE GRHs).
add_test(NAME ib_fake_driver_infiniband COMMAND $<TARGET_FILE:test_ib_driver> --gtest_color=no)
set_tests_properties(ib_fake_driver_infiniband PROPERTIES LABELS functional TIMEOUT 120
  ENVIRONMENT "RERAIL_IB_LIB=$<TARGET_FILE:fakeverbs>;FAKEVERBS_DEVICES=4;FAKEVERBS_LINK_LAYER=ib"
  FAIL_REGULAR_EXPRESSION "\\[  SKIPPED \\]|\\[  FAILED  \\]")

# RERAIL_TRANSPORT=ib through the plugin's ABI (issue 12 stage 3, ib_plugin_test.cc): the dlopened
# libnccl-net-rerail.so offers the 4 fake ports, listen/connect/accept in one process with the link
# handshakes over the TCP bootstrap stream (loopback), every size byte-checked, one failover.
if(TARGET nccl-net-rerail)
  add_executable(test_ib_plugin ${CMAKE_CURRENT_LIST_DIR}/ib/ib_plugin_test.cc)
  target_link_libraries(test_ib_plugin PRIVATE rerail_netdrv rerail_board rerail_prof_emit rerail_net_core GTest::gtest GTest::gtest_main Threads::Threads ${CMAKE_DL_LIBS})
  target_compile_definitions(test_ib_plugin PRIVATE RERAIL_NET_PLUGIN_PATH="$<TARGET_FILE:nccl-net-rerail>")
  add_dependencies(test_ib_plugin fakeverbs nccl-net-rerail)
  add_test(NAME ib_fake_plugin COMMAND $<TARGET_FILE:test_ib_plugin> --gtest_color=no --gtest_filter=-*PortEvent*:*TcpFallback*)
  set_tests_properties(ib_fake_plugin PROPERTIES LABELS functional TIMEOUT 120
    ENVIRONMENT "RERAIL_TRANSPORT=ib;RERAIL_IB_LIB=$<TARGET_FILE:fakeverbs>;FAKEVERBS_DEVICES=4;RERAIL_TCP_IFNAME=lo;RERAIL_MAX_RECVS=8"
    FAIL_REGULAR_EXPRESSION "\\[  SKIPPED \\]|\\[  FAILED  \\]")
  # RERAIL_IB_QPS_PER_LINK: 2 and 4 QPs per link (the default is 1) (the sender's choice, followed by the receiver).
  foreach(qps 2 4)
    add_test(NAME ib_fake_plugin_qps${qps} COMMAND $<TARGET_FILE:test_ib_plugin> --gtest_color=no
             --gtest_filter=*EverySize*:*FailoverThroughTheAbi*)
    set_tests_properties(ib_fake_plugin_qps${qps} PROPERTIES LABELS functional TIMEOUT 120
      ENVIRONMENT "RERAIL_TRANSPORT=ib;RERAIL_IB_LIB=$<TARGET_FILE:fakeverbs>;FAKEVERBS_DEVICES=4;RERAIL_TCP_IFNAME=lo;RERAIL_IB_QPS_PER_LINK=${qps};RERAIL_MAX_RECVS=8"
      FAIL_REGULAR_EXPRESSION "\\[  SKIPPED \\]|\\[  FAILED  \\]|\\[==========\\] 0 tests")
  endforeach()
  # RERAIL_IB_TCP_FALLBACK=1 (issue 12 scope 5): every IB port down mid-stream, the comm goes on over its
  # TCP link and back to IB after the ports return (TcpFallback*), and the rest of the suite with the TCP
  # link present but idle.
  add_test(NAME ib_fake_plugin_tcp_fallback COMMAND $<TARGET_FILE:test_ib_plugin> --gtest_color=no --gtest_filter=-*PortEvent*)
  set_tests_properties(ib_fake_plugin_tcp_fallback PROPERTIES LABELS functional TIMEOUT 180
    ENVIRONMENT "RERAIL_TRANSPORT=ib;RERAIL_IB_LIB=$<TARGET_FILE:fakeverbs>;FAKEVERBS_DEVICES=4;RERAIL_TCP_IFNAME=lo;RERAIL_MAX_RECVS=8;RERAIL_IB_TCP_FALLBACK=1"
    FAIL_REGULAR_EXPRESSION "\\[  SKIPPED \\]|\\[  FAILED  \\]|\\[==========\\] 0 tests")
  # Port events through the plugin: QP timeout ~17 s, so only the IbEventMonitor can fail the link.
  add_test(NAME ib_fake_plugin_port_event COMMAND $<TARGET_FILE:test_ib_plugin> --gtest_color=no --gtest_filter=*PortEvent*)
  set_tests_properties(ib_fake_plugin_port_event PROPERTIES LABELS functional TIMEOUT 120
    ENVIRONMENT "RERAIL_TRANSPORT=ib;RERAIL_IB_LIB=$<TARGET_FILE:fakeverbs>;FAKEVERBS_DEVICES=4;RERAIL_TCP_IFNAME=lo;RERAIL_IB_TIMEOUT=20"
    FAIL_REGULAR_EXPRESSION "\\[  SKIPPED \\]|\\[  FAILED  \\]|\\[==========\\] 0 tests")
endif()

# The fake across processes (FAKEVERBS_WIRE, fake_host.cc), rule by rule with control cases
# (verbs_wire_test.cc): this process the requester, a child process the responder on another host of
# the fabric: data lands while the responder does not poll, RNR, REM_ACCESS, PSN, black hole, ack loss,
# dead responder.
add_executable(test_ib_verbs_wire ${CMAKE_CURRENT_LIST_DIR}/ib/verbs_wire_test.cc)
target_link_libraries(test_ib_verbs_wire PRIVATE rerail_ib GTest::gtest Threads::Threads ${CMAKE_DL_LIBS})
add_dependencies(test_ib_verbs_wire fakeverbs)
add_test(NAME ib_fake_verbs_wire COMMAND $<TARGET_FILE:test_ib_verbs_wire> --gtest_color=no)
set_tests_properties(ib_fake_verbs_wire PROPERTIES LABELS functional TIMEOUT 60
  ENVIRONMENT "RERAIL_IB_LIB=$<TARGET_FILE:fakeverbs>"
  FAIL_REGULAR_EXPRESSION "\\[  SKIPPED \\]|\\[  FAILED  \\]")
# The same over InfiniBand addressing (the responder host found by LID instead of GID).
add_test(NAME ib_fake_verbs_wire_infiniband COMMAND $<TARGET_FILE:test_ib_verbs_wire> --gtest_color=no)
set_tests_properties(ib_fake_verbs_wire_infiniband PROPERTIES LABELS functional TIMEOUT 60
  ENVIRONMENT "RERAIL_IB_LIB=$<TARGET_FILE:fakeverbs>;FAKEVERBS_LINK_LAYER=ib"
  FAIL_REGULAR_EXPRESSION "\\[  SKIPPED \\]|\\[  FAILED  \\]")

# The NCCL-proxy conformance suite (conformance.cmake) with RERAIL_TRANSPORT=ib over the fake: the test
# process and its conformance_peer are two hosts of one fake fabric (FAKEVERBS_WIRE, a directory the
# script makes per case), so every byte crosses between the processes' fake HCAs (fake_host.cc). Each
# case runs in its own process (ib/ib_conformance.sh, shared with ib_rxe_conformance); the script fails a
# case that did not run on the fake IB ports, and the test if no process executed RDMA for another.
if(TARGET nccl-net-rerail)
  add_test(NAME ib_fake_conformance
           COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/ib/ib_conformance.sh --ports fake0,fake1,fake2,fake3
                   --fake $<TARGET_FILE:fakeverbs> $<TARGET_FILE:conformance_test>)
  set_tests_properties(ib_fake_conformance PROPERTIES LABELS functional TIMEOUT 1200)
  # The same processes with one of them losing its primary rail mid-stream (FAKEVERBS_FAULT_AT): port
  # down, black hole, ack-only loss; every byte still checked (ib/fake_conformance_faults.sh).
  add_test(NAME ib_fake_conformance_faults
           COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/ib/fake_conformance_faults.sh $<TARGET_FILE:conformance_test> $<TARGET_FILE:fakeverbs>)
  set_tests_properties(ib_fake_conformance_faults PROPERTIES LABELS functional TIMEOUT 600)
endif()
