// The profiler's model of one communicator (Context) and of one matched event (EventRec).
//
// Contract
//   * A Context is created by init() and lives until the collector thread is stopped (last finalize),
//     even after its own finalize: records still in flight may point at it. Fields above the `collector`
//     line are immutable after init and may be read from any thread; the rest belongs to the collector.
//   * EventRec is built by the collector from begin/state/end records and handed to the outputs when the
//     event is complete. Only the collector thread touches EventRecs.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "event_ring.h"

namespace rr::prof {

class CommOutput;

// Index of an RR_PROF_* type bit (0..14), or -1 for anything that is not exactly one known bit.
inline int TypeIndex(uint64_t type) {
  if (type == 0 || (type & (type - 1)) != 0 || type > (1u << 14)) return -1;
  return __builtin_ctzll(type);
}
// Short lower-case name of a type bit ("coll", "proxyop", ...), also the trace category.
const char* TypeName(uint32_t type);
// Name of an NCCL event state value ("SendWait", ...); "state<N>" for unknown values.
std::string StateName(int state);

class Context {
 public:
  uint64_t comm_id = 0;
  std::string comm_name;
  int rank = 0;
  int n_ranks = 0;
  int n_nodes = 0;
  int visible_mask = 0;  // event types written to the trace (RERAIL_PROFILE_MASK)
  int abi_version = 5;

  // ---- collector side ---------------------------------------------------------------------------
  std::unique_ptr<CommOutput> out;
  uint64_t next_seq = 0;             // trace ids of this comm's events (1, 2, ...)
  uint64_t next_flush_ns = 0;        // next periodic snapshot (0 = only at finalize)
  std::atomic<bool> closing{false};  // finalize() asked the collector to close this comm
  std::atomic<bool> closed{false};   // the collector wrote the final outputs
  int close_passes = 0;              // drain passes done since closing (two settle deferred records)
};

struct StateMark {
  uint16_t state;
  uint64_t ts;
  uint64_t arg;  // proxyStep.transSize, proxyCtrl.appendedProxyOps, kernelCh.pTimer
};

struct EventRec {
  Context* ctx = nullptr;
  uint64_t id = 0;           // NCCL-facing handle
  uint64_t parent_id = 0;    // handle of the structural parent (0 = root)
  uint32_t type = 0;         // RR_PROF_* bit
  uint64_t seq = 0;          // trace id within the comm
  uint64_t vis_parent = 0;   // trace id of the nearest visible ancestor (0 = none)
  bool parent_lost = false;  // a parent handle was given but never seen (dropped or already closed)
  bool visible = false;
  bool rerail_net = false;  // payload holds an rrProfNetEvent_v1_t
  bool unfinished = false;  // never stopped before its comm was finalized
  int track = 0;            // base track (track::*); the trace tid is track::Tid(track, lane)
  int lane = -1;            // sub-track (lanes.h); -1 = not placed (not written, or an instant)
  int depth = 0;            // nesting depth on its lane
  uint64_t begin_ns = 0;
  uint64_t stop_ns = 0;  // 0 while running
  uint64_t last_ns = 0;  // max(stop, children's ends): the event's extent in the trace
  uint32_t pending_children = 0;
  std::vector<StateMark> states;  // capped at kMaxStates
  alignas(8) unsigned char payload[kPayloadBytes] = {};

  static constexpr size_t kMaxStates = 32;
};

// Trace track ids (tid) and their names.
namespace track {
constexpr int kCollectives = 1;
constexpr int kApi = 2;
constexpr int kProxyCtrl = 3;
constexpr int kNetOther = 4;
constexpr int kProxyBase = 100;     // + channel * 2 + isSend
constexpr int kKernelBase = 700;    // + channel
constexpr int kRailBase = 1000;     // + rail
constexpr int kLaneStride = 10000;  // tid = base + lane * kLaneStride
inline int Tid(int base, int lane) {
  return base + (lane > 0 ? lane * kLaneStride : 0);
}
std::string Name(int tid);  // "rail 1", "rail 1 #2" for its second lane, ...
}  // namespace track

}  // namespace rr::prof
