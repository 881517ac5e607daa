// The latency reference for `rerail-perf netbench --raw-lat` (issue 11's hot-path figure): an
// `size`-byte ping-pong over one TCP connection on 127.0.0.1 between this process and a forked child,
// TCP_NODELAY, both sockets O_NONBLOCK and both ends spinning on send()/recv() (never poll, never
// yield). That is the fastest a TCP round trip gets on this host, with no plugin, no framing and no
// request bookkeeping; rerail's 8-byte ping-pong is judged against it (target <= 1.2x).
// Blocking: runs to completion or until `timeout_ms`; the child is reaped before it returns.
#pragma once

#include <cstddef>
#include <cstdint>

#include "plan.h"
#include "rerail/status.h"

namespace rr::netbench {

// Round trips timed exactly like PingPong (mean over `iters` after `warmup`, and the median).
Status RawTcpPingPong(size_t size, uint64_t warmup, uint64_t iters, uint64_t timeout_ms, RttStats* rtt);

}  // namespace rr::netbench
