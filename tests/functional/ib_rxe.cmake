# The IB transport against the real kernel verbs stack (Soft-RoCE in a QEMU TCG guest, scripts/rxe-guest.sh).
# Label "rxe" only, not unit/functional: a first run downloads Debian's kernel package (~70 MB) and each
# run keeps one core busy ~20-30 s emulating the guest (a --pair run: both cores, 1-3 min for the
# plugin's tests below). Run with `ctest -L rxe`; exit 77 (skip) where qemu-system-x86_64, a static
# busybox or the kernel package are not available.
# What runs over rxe: rerail's loader and IB discovery; its verbs objects (one guest, two rails); a
# verbs-level failover between two guests; and the net plugin itself in IB mode between two guests,
# driven by rerail-perf as two ranks, with and without a pulled rail (ib_rxe_pair_perf*); the whole
# NCCL-proxy conformance suite in one guest (ib_rxe_conformance).
# scripts/rxe-guest.sh boots once more when the emulated machine itself failed (a kernel panic while
# booting, a hung virtio-net queue), so each TIMEOUT leaves room for two guest runs.
add_test(NAME ib_rxe_discovery
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/ib/rxe_discovery.sh ${CMAKE_SOURCE_DIR}/scripts/rxe-guest.sh
                 $<TARGET_FILE:rerail-info> $<TARGET_FILE:nccl-net-rerail> $<TARGET_FILE:nccl-tuner-rerail>
                 $<TARGET_FILE:nccl-profiler-rerail>)
set_tests_properties(ib_rxe_discovery PROPERTIES LABELS rxe TIMEOUT 540 SKIP_RETURN_CODE 77 RUN_SERIAL TRUE)

# rerail's verbs objects (IbDevice/IbCq/IbMr/IbQp) on the guest's rxe0: writes + immediate, inline, read,
# error completions and flush, Reset -> reconnect (failback), retry-exceeded, port down/up events, one
# registration on two rails (MrCache), and a bandwidth figure.
add_executable(test_ib_verbs_rc ${CMAKE_CURRENT_LIST_DIR}/ib/verbs_rc_test.cc)
target_link_libraries(test_ib_verbs_rc PRIVATE rerail_ib GTest::gtest GTest::gtest_main Threads::Threads ${CMAKE_DL_LIBS})
add_dependencies(test_ib_verbs_rc fakeverbs)
add_test(NAME ib_rxe_verbs_rc
         COMMAND bash ${CMAKE_SOURCE_DIR}/scripts/rxe-guest.sh --rails 2 --timeout 240 --with $<TARGET_FILE:test_ib_verbs_rc>
                 -- "$<TARGET_FILE:test_ib_verbs_rc> --gtest_color=no")
set_tests_properties(ib_rxe_verbs_rc PROPERTIES LABELS rxe TIMEOUT 540 SKIP_RETURN_CODE 77 RUN_SERIAL TRUE
                     FAIL_REGULAR_EXPRESSION "\\[  SKIPPED \\]|\\[  FAILED  \\]")

# Two guests, two rails (one virtual wire each): ibv_rc_pingpong between guest a and guest b on rxe0 and
# on rxe1 — the 2-host multi-rail RoCE fabric the data-path tests will run on. Guest b retries its connect
# (up to 15 x 2 s): the guests boot in parallel and a may not listen yet (a CI run lost the race at 2 s).
add_test(NAME ib_rxe_pair_pingpong
         COMMAND bash ${CMAKE_SOURCE_DIR}/scripts/rxe-guest.sh --pair --rails 2 --timeout 240 --
                 "for d in rxe0 rxe1; do if [ $RXE_ROLE = a ]; then timeout 60 ibv_rc_pingpong -d $d -g 1 -n 50; else ok=1; for t in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15; do sleep 2; timeout 60 ibv_rc_pingpong -d $d -g 1 -n 50 $RXE_PEER && ok=0 && break; done; [ $ok = 0 ]; fi || exit 1; echo pingpong-$d-ok; done")
set_tests_properties(ib_rxe_pair_pingpong PROPERTIES LABELS rxe TIMEOUT 540 SKIP_RETURN_CODE 77 RUN_SERIAL TRUE)

# Lossless failover between the two guests with rerail's verbs objects: guest a takes its rail-0 netdev
# down halfway; guest b's rail-0 writes end in RETRY_EXC_ERR, it re-writes every chunk without a
# successful completion on rail 1, and a checks every byte (tests/functional/ib/verbs_pair_failover.cc).
add_executable(rr_ib_pair_failover ${CMAKE_CURRENT_LIST_DIR}/ib/verbs_pair_failover.cc)
target_link_libraries(rr_ib_pair_failover PRIVATE rerail_ib)
add_test(NAME ib_rxe_pair_failover
         COMMAND bash ${CMAKE_SOURCE_DIR}/scripts/rxe-guest.sh --pair --rails 2 --timeout 240
                 --with $<TARGET_FILE:rr_ib_pair_failover> -- "$<TARGET_FILE:rr_ib_pair_failover>")
set_tests_properties(ib_rxe_pair_failover PROPERTIES LABELS rxe TIMEOUT 540 SKIP_RETURN_CODE 77 RUN_SERIAL TRUE)

# rerail's net plugin in IB mode (RERAIL_TRANSPORT=ib) between the two guests, driven by rerail-perf as
# two ranks (guest a = rank 0, b = rank 1; rendezvous and the plugin's TCP bootstrap on rail 1's wire):
# sendrecv and all_reduce 8 B .. 8 MiB with every value verified, both ranks on the IB ports rxe0,rxe1
# (no TCP fallback), links up on both rails; figures printed, never asserted: 8 MiB broadcast on 2
# rails and on 1, ib_write_bw on rxe0 (perftest), their ratios (tests/functional/ib/rxe_pair_perf.sh).
# ~2.5 min of both cores (TCG).
add_test(NAME ib_rxe_pair_perf
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/ib/rxe_pair_perf.sh perf ${CMAKE_SOURCE_DIR}/scripts/rxe-guest.sh
                 $<TARGET_FILE:rerail-perf> $<TARGET_FILE:nccl-net-rerail>)
set_tests_properties(ib_rxe_pair_perf PROPERTIES LABELS rxe TIMEOUT 900 SKIP_RETURN_CODE 77 RUN_SERIAL TRUE)

# The same pair with rail 0 of guest a pulled for 6 s (RXE_CUT) during 1 MiB sendrecv loops: the run
# ends with #wrong 0 and a failover WARN naming rxe0; guest a's port-down -> failover and port-up ->
# failback times are printed.
add_test(NAME ib_rxe_pair_perf_failover
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/ib/rxe_pair_perf.sh failover ${CMAKE_SOURCE_DIR}/scripts/rxe-guest.sh
                 $<TARGET_FILE:rerail-perf> $<TARGET_FILE:nccl-net-rerail>)
set_tests_properties(ib_rxe_pair_perf_failover PROPERTIES LABELS rxe TIMEOUT 540 SKIP_RETURN_CODE 77 RUN_SERIAL TRUE)

# scripts/validate-ib.sh itself, for real, between the two guests: guest a is node A and reaches guest b
# through a busybox-nc stand-in for ssh; preflight (rerail-info + ib_write_bw on rxe0 and rxe1), perf
# (rerail-perf over both rails, #wrong 0, IB only, a link on every rail) and failover (the default fault
# commands take rxe0's netdev on b down for 6 s and up again: failover WARN, failback after up); nccl
# NOT RUN (no GPU). The busbw / ib_write_bw ratio is printed, not judged (TCG). ~3 min of both cores.
add_executable(rr_sigchld_default_exec ${CMAKE_CURRENT_LIST_DIR}/ib/sigchld_default_exec.c)
add_test(NAME ib_rxe_validate_ib
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/ib/validate_ib_rxe.sh ${CMAKE_SOURCE_DIR}/scripts/rxe-guest.sh
                 ${CMAKE_SOURCE_DIR} $<TARGET_FILE:rerail-perf> $<TARGET_FILE:rerail-info> $<TARGET_FILE:nccl-net-rerail>
                 $<TARGET_FILE:rr_sigchld_default_exec>)
set_tests_properties(ib_rxe_validate_ib PROPERTIES LABELS rxe TIMEOUT 1080 SKIP_RETURN_CODE 77 RUN_SERIAL TRUE)

# The NCCL-proxy conformance suite (conformance.cmake), all of it, over the real kernel verbs stack:
# conformance_test and its conformance_peer in ONE guest, RERAIL_TRANSPORT=ib on rxe0,rxe1 (rxe's local
# loopback between the two processes' QPs), every case in its own process and every plugin init on
# exactly rxe0,rxe1 (ib/rxe_conformance.sh -> ib/ib_conformance.sh, shared with ib_fake_conformance);
# rxe's sysfs packet counters must show traffic on both ports. RERAIL_IB_TIMEOUT=18,
# RERAIL_STALL_MS=4000 and the harness's --time-scale 4 for TCG. ~6 min of one core.
if(TARGET nccl-net-rerail)
  add_test(NAME ib_rxe_conformance
           COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/ib/rxe_conformance.sh ${CMAKE_SOURCE_DIR}/scripts/rxe-guest.sh
                   $<TARGET_FILE:conformance_test> $<TARGET_FILE:conformance_peer> $<TARGET_FILE:nccl-net-rerail>)
  set_tests_properties(ib_rxe_conformance PROPERTIES LABELS rxe TIMEOUT 1260 SKIP_RETURN_CODE 77 RUN_SERIAL TRUE)
endif()
