# bootstrap fault tests: 4 network-namespace hosts x 16 rank processes, a rank crash and re-join.
add_test(NAME boot_netns_exchange
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/boot/netns_exchange.sh $<TARGET_FILE:rerail-bootstrap-cli>)
set_tests_properties(boot_netns_exchange PROPERTIES LABELS faults TIMEOUT 240 SKIP_RETURN_CODE 77)
