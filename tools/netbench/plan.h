// rerail-netbench — a traffic plan both ends of a set of connections execute in lock-step.
//
// A Plan names, for one side, which comms carry traffic, in which direction, how many messages, their
// sizes (an explicit list cycled, or seeded random sizes) and how the receives are posted. The peer gets
// the mirrored plan (Mirror()) over the out-of-band channel as JSON; both sides derive every message's
// size and content from (seed, comm, message index, direction), so nothing but the plan is exchanged.
//
// RunPlan drives all listed comms from ONE thread, round-robin, like NCCL's progress thread serving
// many connections: per comm ≤ window outstanding requests, NULL request = retry, oldest-first test.
// On every receive it checks: completion in posting order, test() reported the sent size (unless
// sizes is NULL), the bytes are byte-exact, and the slot bytes past the message (when the capacity is
// larger) were not written. Content is prepared, and checked, outside the progress loop when no slot
// is reused, so the loop never pauses longer than NCCL's proxy would.
//
// Contract: returns the first error — the plugin's code for a failed plugin call; kInternalError for a
// timeout, a wrong size, out-of-order completion or wrong bytes (naming comm, message and offset).
// Registers (regMr) and deregisters its own buffers per comm; after an error, buffers that may still
// be the target of outstanding requests are deliberately leaked. Blocking: up to plan.timeout_ms.
// Thread-safety: none of its own; callers may run several RunPlan on disjoint comms in parallel.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "proxy_driver.h"

namespace rr::netbench {

struct Plan {
  std::string dir = "send";     // this side: "send", "recv" or "both"
  std::vector<int> comms{0};    // indices into the send/recv comm lists
  uint64_t nmsgs = 1;           // messages per comm per direction
  std::vector<uint64_t> sizes;  // cycled; empty: random in [0, rand_max]
  uint64_t rand_max = 0;
  uint64_t seed = 1;
  int window = 8;           // outstanding requests per comm (NCCL_STEPS)
  uint64_t cap_extra = 0;   // receive capacity = size + cap_extra
  uint64_t offset = 0;      // buffer misalignment inside the registered region
  bool null_sizes = false;  // test() on receives with sizes == NULL
  int preset = 0;           // *request before irecv: 0 NULL, 1 the 0x1 hint, 2 a stale pointer
  bool verify = true;       // false: benchmark mode (no fill/check per message)
  bool initiator = true;    // which side this is; decides the content seed per direction
  uint64_t timeout_ms = 60000;
  uint64_t delay_ms = 0;  // idle (no plugin call) this long after registering, before posting

  Plan Mirror() const;  // the peer's plan: send<->recv, initiator flipped, no delay
  nlohmann::json ToJson() const;
  static Plan FromJson(const nlohmann::json& j);
};

// Size of message m on comm c (both sides compute the same).
uint64_t PlanSize(const Plan& p, int comm, uint64_t m);
uint64_t PlanMaxSize(const Plan& p);
// Content seed of what `from_initiator`'s side sends on comm c.
uint64_t ContentSeed(const Plan& p, int comm, bool from_initiator);

struct PlanResult {
  uint64_t bytes_sent = 0;
  uint64_t bytes_received = 0;
  uint64_t messages = 0;
  double seconds = 0;  // first post to last completion
};

Status RunPlan(netdrv::NetPlugin& net, const Plan& plan, const std::vector<void*>& send_comms,
               const std::vector<void*>& recv_comms, PlanResult* result);

}  // namespace rr::netbench

namespace rr::netbench {

// Ping-pong of `size`-byte messages over one send and one recv comm to the same peer, `iters` round
// trips after `warmup` untimed ones. The initiator sends first; the other side echoes. Receives are
// posted before the matching send, like NCCL's credit scheme. Round-trip times in microseconds.
struct RttStats {
  double mean_us = 0;
  double p50_us = 0;
  double p90_us = 0;
  double p99_us = 0;
  double max_us = 0;
  std::vector<uint64_t> in_order;  // each round trip, ns, in the order they ran
};
Status PingPong(netdrv::NetPlugin& net, void* send_comm, void* recv_comm, size_t size, uint64_t warmup,
                uint64_t iters, bool initiator, uint64_t timeout_ms, RttStats* rtt);
// The figures of a timed ping-pong: `iters` round trips from t0 to end (ns), `rtts` the measured ones
// (sorted here) — mean over the span, median, 90th and 99th percentiles and maximum of the samples.
RttStats SummariseRtts(uint64_t t0, uint64_t end, uint64_t iters, std::vector<uint64_t>* rtts);

}  // namespace rr::netbench
