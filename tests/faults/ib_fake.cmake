# The net plugin fault suite over IB: down, black hole, flap, all rails down and heal with
# RERAIL_TRANSPORT=ib between two net_fault_peer processes of one fake verbs fabric (FAKEVERBS_WIRE),
# the faults commanded into their fake HCAs while they stream (FAKEVERBS_CONTROL; ib_fake_faults.sh).
# No root, no netns: labelled functional too, so the default test run has it (~120 s, 25 scenarios, 3 of
# them with RERAIL_IB_TCP_FALLBACK=1: tcpfallback, tcpidle, tcpearly).
# ib_fake_faults_soak: 20 s of random faults (down, black hole, ack loss, heal), label faults only.
if(TARGET nccl-net-rerail AND TARGET fakeverbs)
  add_test(NAME ib_fake_faults
           COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/ib_fake_faults.sh $<TARGET_FILE:net_fault_peer>
                   $<TARGET_FILE:nccl-net-rerail> $<TARGET_FILE:fakeverbs>)
  set_tests_properties(ib_fake_faults PROPERTIES LABELS "faults;functional" TIMEOUT 400)
  add_test(NAME ib_fake_faults_soak
           COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/ib_fake_faults.sh $<TARGET_FILE:net_fault_peer>
                   $<TARGET_FILE:nccl-net-rerail> $<TARGET_FILE:fakeverbs> soak)
  set_tests_properties(ib_fake_faults_soak PROPERTIES LABELS faults TIMEOUT 200)
endif()
