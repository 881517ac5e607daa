// rerail-simnet — a deterministic network simulator that drives the REAL sans-I/O core
// (net_plugin/core/core.h: SendCore / RecvCore) over simulated rails, with faults, NCCL-like drivers
// and oracles. Issue #11, scope item 3; design notes: shared/reference/simulation.md.
//
// What is simulated
//   * Two hosts, A and B, joined by N rails. A rail is two wires (A->B, B->A), each with a bandwidth
//     (exact integer serialization, remainder carried) and a one-way propagation delay. Every comm of
//     the host pair has one link per rail, each link S TCP-like streams; all of them share the wires.
//   * A stream is one direction of one socket: the writer's kernel queue (the stream "can take a
//     frame" while written - acknowledged < sndbuf), the wire (round robin between streams in
//     segments of `quantum` bytes, gated by the receiver's window rcvbuf), in-order arrival, and a
//     transport acknowledgement one propagation delay after arrival. Samples for OnSamples come from
//     these counters, as TCP_INFO does (acked bytes, bytes in flight, not sent, outq, min RTT).
//   * Faults: black holes (one or both directions: bytes stay in flight, nothing arrives or is
//     acknowledged; on heal the held segments arrive in order), link down with or without a rail
//     event on either host, transport resets, rate changes, flaps, rail events without a fault,
//     endpoints NCCL does not poll for seconds, peer death, and (some seeds) every rail dying for good.
//   * Connects (kConnect) complete after a round trip when the path works, fail at once on a host
//     whose rail is down (or with RST from a dead peer), and retry their SYN with back-off otherwise.
//   * Drivers mirror SendComm::Progress / RecvComm::Progress: rail events, writes, control reads,
//     connector polls, samples, Poll, commands, completions, then sleep until Deadline() or the next
//     input. NCCL-like: at most `window` (<= 8) requests per comm outstanding, only the oldest one
//     tested, a refused post retried later.
//   * Single thread, a virtual clock in ns, an event queue ordered by (time, insertion number), one
//     seeded PRNG (xoshiro256**, integer API) with separate streams for scenario and perturbation.
//
// Oracles (checked as events happen; the first violation stops the run with the seed and a repro line)
//   * Every chunk a receive gets is placed at buf + offset of ITS message, aligned to the chunk grid,
//     never into a buffer NCCL already got back, each (dst, len) checked as an interval, counted per
//     chunk (never more often than the sender handed it out); a receive completes with the sent size,
//     every chunk placed, the right content and no byte beyond the message touched. The payload is a
//     function of (message, offset) (world.h: Pattern), so no buffer is filled or carried: every byte
//     the core copies is real and checked (its eager copy at isend, frame by frame as it is written;
//     stashed chunks as it copies them into the posted buffer), a placement from the wire writes the
//     chunk's boundaries and sampled words, checked at completion with the guard bytes beyond it.
//   * A (non-eager) send completes only after all its chunks were placed at the receiver; eager sends
//     only after every byte entered the kernel. No data frame points into a send buffer after its
//     send completed. Completions are FIFO per comm and side.
//   * Liveness: while the safe rail stays usable, every message completes within a bound computed
//     from the bytes ahead of it, the safe rail's bandwidth, the detection timers (stall, heartbeat)
//     times the faults during its life, its endpoints' pauses and the queues stranded on slowed rails.
//     After the chaos phase every request completes within a bound. No request errors in such seeds.
//   * All rails dead for good: every pending request errors, not before RERAIL_GIVEUP_MS and within
//     give-up + detection. Peer death: the survivor's pending requests error within the same bound.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/core.h"

namespace rr::sim {

constexpr uint64_t kUs = 1000;
constexpr uint64_t kMs = 1000 * kUs;
constexpr uint64_t kSec = 1000 * kMs;
constexpr uint64_t kForever = UINT64_MAX / 4;

enum class FaultKind : uint8_t {
  kHole,       // black hole on `dirs` (bit 0: A->B, bit 1: B->A); no event
  kDown,       // both directions dead; rail event(s) on `hosts` (bit 0: A, bit 1: B; 0: none) after event_delay
  kReset,      // every established link on the rail gets a transport error on both sides (instant)
  kRate,       // both directions at rate * num / den for dur
  kFlap,       // down/up every `period` for dur, rail events on `hosts`
  kPause,      // the endpoint (comm, side: 0 sender, 1 receiver) is not polled for dur
  kRailEvent,  // a down event on `hosts` without any fault, then up after dur
  kDeath,      // host `host` dies for good: its links reset, it never polls again
  kAllDown,    // every rail dead for good, events on `hosts`
};
const char* FaultName(FaultKind k);

struct Fault {
  FaultKind kind = FaultKind::kHole;
  uint64_t at = 0;
  uint64_t dur = 0;
  int rail = 0;
  int dirs = 3;
  int hosts = 0;
  uint64_t event_delay = 0;
  int comm = 0, side = 0, host = 0;
  uint32_t num = 1, den = 1;
  uint64_t period = 0;
};

struct RailSpec {
  uint64_t bps = 1'000'000'000;  // bits per second, each direction
  uint64_t delay_ns = 50 * kUs;  // one way
};

struct CommSpec {
  int from = 0;        // host that sends (0: A, 1: B)
  int window = 8;      // NCCL-like requests outstanding per side, 1..8
  int primary = 0;     // rail of link 0 (NCCL's device for this comm)
  std::vector<uint64_t> sizes;
  uint64_t slack = 0;  // receive buffers are this much larger than the message
};

// rerail-perf's Engine (tools/rerail-perf/engine.h, conn.h) on one host: one stream of slice-sized
// primitives that run in order, each taking the next received slice of `recv_comm` (GPU consumed it)
// and / or filling the next send slot of `send_comm`. A primitive runs when its received slice has
// arrived (NCCL tested the receive done) and a send slot is free (fewer than `window` of send_comm's
// filled slices not yet tested done); the proxy then posts isend for every filled slice and irecv
// while fewer than `window` of recv_comm's posted slices are not yet consumed. Every `per_iter`
// primitives end an iteration (rerail-perf's Run): the next one starts once every engine of the host
// reached that point and all their sends completed. A comm driven by an engine posts only what its
// engine allows (its CommSpec::window is the slot count).
struct EngineSpec {
  int host = 0;
  int send_comm = -1, recv_comm = -1;  // -1: the stream only receives / only sends
  std::vector<uint8_t> prims;          // per primitive: bit 0 receives a slice, bit 1 sends one
  size_t per_iter = 0;                 // primitives per iteration (0: one iteration)
};
constexpr uint8_t kPrimRecv = 1, kPrimSend = 2;

enum class Mode : uint8_t {
  kSurvive,    // a safe rail is never faulted: no error, every message within its bound
  kTransient,  // every rail may fault, but never for long (< give-up / 2 in total): no error, finishes
  kAllDead,    // every rail dies for good at dead_at: pending requests error within give-up + detection
  kDeath,      // host B or A dies at dead_at: the survivor's pending requests error
};
const char* ModeName(Mode m);

struct Scenario {
  uint64_t seed = 0;
  Mode mode = Mode::kSurvive;
  std::vector<RailSpec> rails;
  int streams = 1;
  net::CoreConfig core;          // `loads` is set by the simulator (one table per host)
  uint64_t sndbuf = 4 << 20;     // per stream, bytes
  uint64_t rcvbuf = 6 << 20;     // per stream, bytes
  uint64_t quantum = 64 << 10;   // wire round-robin segment
  std::vector<CommSpec> comms;
  std::vector<EngineSpec> engines;  // empty: every comm posts as far as its window lets it
  std::vector<Fault> faults;
  uint64_t start_at = 0;         // the chaos phase: [start_at, heal_at)
  uint64_t heal_at = kForever;
  uint64_t dead_at = kForever;   // kAllDead / kDeath
  int safe_rail = -1;            // kSurvive: never faulted
  bool copy_bytes = true;        // real payload bytes (false: addresses only, for benchmarks)
  // Grouped receives (core.h): 0 = off; n = core.grouped, the receivers post up to n messages per
  // IrecvGroup (tags: message index % 8), the senders pass the same tag. Drawn for a third of the seeds
  // from a generator of its own, so every other draw of a seed is unchanged.
  int group = 0;
  // NCCL's polling (3/4 of the seeds, from a generator of its own): a comm is driven only while NCCL
  // has a request on it or one to post; a send comm NCCL left with unacknowledged sends is driven by
  // the plugin's IdleSends thread every IdleSends::kPeriodNs, a receive comm by nothing. Off: every
  // comm is driven at its core's deadline (a driver that polls everything, as rerail-perf's engine).
  bool nccl_polling = false;
  bool perturb = false;          // same-time events in a seeded order instead of insertion order
  uint64_t bench_skip = 0;       // benchmarks: receives completed before the measurement starts
  std::string Describe() const;
};

struct Options {
  uint64_t max_size = 512 << 10; // largest message the swarm draws (up to 1 GiB; small keeps seeds fast)
  bool verbose = false;
};

// The scenario of a seed: rails, rates, RTTs, streams, chunk, policy, timers, comms, workload, faults.
Scenario Draw(uint64_t seed, const Options& opt);
// The command line that reruns one seed with the same options.
std::string ReproLine(uint64_t seed, const Options& opt);

struct Result {
  bool ok = true;
  std::string violation;    // first violated oracle (empty when ok)
  uint64_t events = 0;
  uint64_t end_ns = 0;      // virtual time at the end
  uint64_t bytes = 0;       // payload bytes of completed receives
  uint64_t messages = 0;
  uint64_t failovers = 0;   // sender-side link failures with chunks re-queued
  uint64_t resent_bytes = 0;
  uint64_t dup_bytes = 0;   // payload placed more than once (a re-sent chunk raced its first copy)
  uint64_t errors = 0;      // requests that ended in an error (expected in kAllDead / kDeath)
  uint64_t trace_hash = 0;  // hash of every event: equal across reruns of one seed (determinism)
  uint64_t worst_latency_ns = 0;  // slowest message, post to both completions
  // Benchmarks: bytes (40-byte frame headers included) that reached the receivers after the warm-up,
  // and the span they took.
  uint64_t bench_bytes = 0, bench_ns = 0;
  // Engines: per host, when each iteration ended (every engine of the host past it, sends completed).
  std::vector<uint64_t> iter_end_ns[2];
};

Result Run(const Scenario& sc, bool verbose);

// Throughput figure: `comms` connections (window 8 each, `size` messages, primaries on successive
// rails, no faults) over `rails` rails at `bps` with one-way delay `delay_ns`, for about `span_ns` of
// virtual time; the last rail runs at bps / last_div. Goodput: bytes that reached the receivers
// after the first 16 messages' worth completed, until a comm is done (headers: 0.03 % of it).
struct BenchPoint {
  double link_sum_bps = 0;
  double goodput_bps = 0;
  Result res;
};
BenchPoint Bench(int rails, uint64_t bps, uint64_t delay_ns, uint64_t size, uint64_t span_ns, net::Policy policy,
                 int streams, uint32_t chunk, uint64_t sndbuf, int comms = 1, uint32_t last_div = 1);

// rerail-perf -N 2 -C `channels` (both ranks on their own host; channel c's connections use device
// c mod rails; -C 1: one connection per peer and direction, on primary rail 0): sendrecv (p2p: 128 KiB slices, 8 slots, each rank sends to and receives from the
// other) or all_reduce (ring of 2: 1 MiB slices of 2 x 512 KiB steps, 4 slots, per 4 MiB loop each
// rank sends 2 slices, receives-reduces-sends 2, receives 2). `size` bytes per collective, `warmup`
// untimed then `iters` timed iterations (`size` / channels per channel: a multiple of 4 MiB for
// all_reduce). Production defaults: stripe, 128 KiB chunks, 2 streams.
// busbw (n = 2: = algbw = size / iteration time) over the link sum of one direction. `quantum`: the
// wires' round-robin segment (Scenario::quantum); larger ones hold a control frame (ack, credit)
// longer behind the other direction's data, as a FIFO qdisc (tc tbf) does on the real fabric.
struct PerfPoint {
  double link_sum_bps = 0;
  double busbw_bps = 0;
  Result res;
};
enum class PerfColl : uint8_t { kSendRecv, kAllReduce };
PerfPoint PerfBench(PerfColl coll, int rails, uint64_t bps, uint64_t delay_ns, uint32_t last_div, uint64_t size,
                    int warmup, int iters, const net::CoreConfig& core, int streams, int channels = 1,
                    uint64_t quantum = 64 << 10);

}  // namespace rr::sim
