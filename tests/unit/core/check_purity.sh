#!/usr/bin/env bash
# The sans-I/O core (rr_core, net_plugin/core/core.h) performs no I/O and reads no clock: its sources
# include no socket, poll, thread-sleep or clock header and call no clock, socket or randomness
# function, and the built library references no such symbol. Usage: check_purity.sh SRC_DIR LIB.a
set -u
src="$1"
lib="$2"
files=$(ls "$src"/net_plugin/core/*.{h,cc} "$src"/net_plugin/{rx_tracker,scheduler,link_state}.{h,cc} "$src"/net_plugin/wire.h)
fail=0
bad_inc='#include *<(sys/socket\.h|sys/epoll\.h|sys/poll\.h|poll\.h|sys/select\.h|netinet/[a-z_]*\.h|arpa/inet\.h|linux/[a-z_]*\.h|unistd\.h|time\.h|ctime|sys/time\.h|chrono|thread|random|infiniband/[a-z_]*\.h|fcntl\.h)>|#include *"rerail/(clock|sock|sysfs|params)\.h"'
if grep -nE "$bad_inc" $files; then echo "FAIL: forbidden include in the core (above)"; fail=1; fi
bad_call='\b(NowNs|clock_gettime|gettimeofday|getenv|rand|random|srand|socket|sendmsg|recvmsg|recv|send|poll|epoll_wait|ibv_[a-z_]+)\('
if grep -nE "$bad_call" $files | grep -vE '^\S+:[0-9]+:\s*//'; then echo "FAIL: forbidden call in the core (above)"; fail=1; fi
syms=$(nm -u "$lib" 2>/dev/null | awk '{print $2}' | grep -E '^(clock_gettime|gettimeofday|time|getenv|rand|random|socket|connect|accept|sendmsg|recvmsg|recv|send|read|write|poll|epoll_[a-z]+|select|ibv_[a-z_]+|nanosleep|usleep)$' | sort -u)
if [ -n "$syms" ]; then echo "FAIL: rr_core references $syms"; fail=1; fi
[ "$fail" = 0 ] && echo "rr_core is sans-I/O: $(echo $files | wc -w) files checked"
exit $fail
