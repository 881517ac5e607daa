# `rerail-perf netbench` (the former rerail-netbench): a short two-process loopback run must print its
# figures and a RESULT line with a positive throughput and latency.
add_test(NAME perf_netbench_loopback
         COMMAND bash -c "set -euo pipefail; out=$(RERAIL_TCP_IFNAME=lo $<TARGET_FILE:rerail-perf> netbench --size 1048576 --iters 8 --lat-iters 500); echo \"$out\"; grep -Eq '^RESULT bw_GBps=[0-9.]*[1-9][0-9.]* lat_us=[0-9.]*[1-9].* raw_lat_us=[0-9.]*[1-9]' <<<\"$out\"; grep -q '^# plugin .*libnccl-net-rerail.so (ABI v12), device 0 = lo' <<<\"$out\"")
set_tests_properties(perf_netbench_loopback PROPERTIES LABELS functional TIMEOUT 120)

# RERAIL_TCP_DUPLEX set differently in the two processes (documented as a mistake, but it must cost
# nothing): a ping-pong with the knob on at either end only still completes. The end with the knob on
# adopts its send comm's socket, and its receive comm must not put its acks on that socket while the
# peer (which ignores the kShare) would read them as frames of the wrong connection (it failed the
# connection with remoteError before the acks waited for the peer's own frames on the socket).
add_test(NAME perf_netbench_duplex_mixed
         COMMAND bash -c "set -euo pipefail; for m in '1 0' '0 1' '1 1'; do set -- $m; out=$(RERAIL_TCP_DUPLEX=$1 RERAIL_TCP_IFNAME=lo $<TARGET_FILE:rerail-perf> netbench --only lat --lat-iters 3000 --peer-env RERAIL_TCP_DUPLEX=$2); echo \"duplex $1/$2: $out\"; grep -Eq '^RESULT .*lat_us=[0-9.]*[1-9]' <<<\"$out\"; done")
set_tests_properties(perf_netbench_duplex_mixed PROPERTIES LABELS functional TIMEOUT 180)
