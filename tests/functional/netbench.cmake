# `rerail-perf netbench` (the former rerail-netbench): a short two-process loopback run must print its
# figures and a RESULT line with a positive throughput and latency.
add_test(NAME perf_netbench_loopback
         COMMAND bash -c "set -euo pipefail; out=$(RERAIL_TCP_IFNAME=lo $<TARGET_FILE:rerail-perf> netbench --size 1048576 --iters 8 --lat-iters 500); echo \"$out\"; grep -Eq '^RESULT bw_GBps=[0-9.]*[1-9][0-9.]* lat_us=[0-9.]*[1-9].* raw_lat_us=[0-9.]*[1-9]' <<<\"$out\"; grep -q '^# plugin .*libnccl-net-rerail.so (ABI v12), device 0 = lo' <<<\"$out\"")
set_tests_properties(perf_netbench_loopback PROPERTIES LABELS functional TIMEOUT 120)
