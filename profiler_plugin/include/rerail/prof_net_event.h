// rerail's own net events: the descriptor the rerail net plugin hands to NCCL's profiler callback, and a
// small emitter the net plugin uses to send it (reference §4.2).
//
// Wire contract (what a profiler decodes)
//   * NCCL creates a NetPlugin event (type bit 1<<7) whose netPlugin.id is RR_PROF_NET_PLUGIN_ID and whose
//     netPlugin.data points at an rrProfNetEvent_v1_t. The high 16 bits of the id are the plugin type
//     RR_PROF_NET_TYPE_RERAIL (0x7272, "rr": not NCCL's IB 1 or socket 2, nor the 0x100 its headers and
//     docs suggest, which other plugin authors pick); the low 16 bits are the descriptor version.
//   * A profiler interprets `data` only when the type AND the version match exactly, `data` is non-NULL,
//     `magic` is RR_PROF_NET_MAGIC and `size` is at least sizeof(rrProfNetEvent_v1_t); anything else is
//     another plugin's event (or a corrupt one) and is counted and shown opaque, never read.
//   * New fields are only ever appended; `size` says how many bytes the emitter filled. Version 1 is 88 B.
//   * `data` is valid only until the event stops; a profiler copies what it needs at start and update.
//
// Event kinds
//   IO         span: bytes moved on one rail for one NCCL step (start at isend/irecv, update, stop at test)
//   FAILOVER   instant: a link on `rail` failed; its traffic moved to `toRail`; `stallNs` = time from the
//   last
//              progress to detection; `bytes`/`count` = unacknowledged bytes/chunks re-queued
//   MIGRATION  instant: a connection moved `bytes` of queued chunks from `rail` to `toRail` (rebalance)
//   FAILBACK   instant: `rail` was probed successfully and re-admitted
//   RETRANSMIT instant: `count` chunks / `bytes` re-sent on `toRail` after a loss on `rail`
//   RAIL_STATE instant: `rail` changed from `prevState` to `state` (RR_PROF_RAIL_* values)
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

extern "C" {

#define RR_PROF_NET_TYPE_RERAIL (0x7272u << 16)
#define RR_PROF_NET_MAGIC 0x4e525272u  // "rRRN" little-endian: first 4 bytes of every rerail descriptor
#define RR_PROF_NET_DESCR_VERSION 1u
#define RR_PROF_NET_PLUGIN_ID ((int64_t)(RR_PROF_NET_TYPE_RERAIL | RR_PROF_NET_DESCR_VERSION))

enum {
  RR_PROF_NET_EV_IO = 1,
  RR_PROF_NET_EV_FAILOVER = 2,
  RR_PROF_NET_EV_MIGRATION = 3,
  RR_PROF_NET_EV_FAILBACK = 4,
  RR_PROF_NET_EV_RETRANSMIT = 5,
  RR_PROF_NET_EV_RAIL_STATE = 6,
};

// Rail health states (the net plugin's rail state machine; DESIGN.md).
enum {
  RR_PROF_RAIL_HEALTHY = 0,
  RR_PROF_RAIL_SUSPECT = 1,
  RR_PROF_RAIL_FAILED = 2,
  RR_PROF_RAIL_RECOVERING = 3,
  RR_PROF_RAIL_PERM_FAILED = 4,
};

enum { RR_PROF_NET_FLAG_SEND = 1 };  // IO: set for isend, clear for irecv

typedef struct {
  uint32_t magic;     // RR_PROF_NET_MAGIC
  uint32_t size;      // bytes filled by the emitter (sizeof(rrProfNetEvent_v1_t) for version 1)
  uint64_t tsNs;      // CLOCK_MONOTONIC time the thing happened; 0 = when the profiler sees it
  uint16_t kind;      // RR_PROF_NET_EV_*
  uint16_t flags;     // RR_PROF_NET_FLAG_*
  int32_t rail;       // rail (NCCL device index) concerned; the failed rail for FAILOVER
  int32_t toRail;     // rail the traffic moved to (FAILOVER, MIGRATION, RETRANSMIT); -1 if none
  int32_t peer;       // peer rank if known, else -1
  int32_t state;      // RAIL_STATE: new state
  int32_t prevState;  // RAIL_STATE: previous state
  uint64_t bytes;     // IO: bytes; FAILOVER/MIGRATION/RETRANSMIT: bytes re-queued/moved/re-sent
  uint64_t count;     // chunks concerned
  uint64_t stallNs;   // FAILOVER: last progress → detection
  uint32_t connId;    // net plugin connection id (0 if not connection-specific)
  char reason[20];    // NUL-terminated short cause: "link-down", "rst", "stall", "probe-ok", ...
} rrProfNetEvent_v1_t;

// Same signature as the ncclProfilerCallback_t NCCL hands to net init (v10+):
// type 0 start (pHandle = NCCL's step handle), 1 stop, 2 update (extData), 3 update + stop.
typedef int (*rrProfNetCallback_t)(void** eHandle, int type, void* pHandle, int64_t pluginId, void* extData);

}  // extern "C"

static_assert(sizeof(rrProfNetEvent_v1_t) == 88, "rrProfNetEvent_v1_t is 88 bytes in version 1");
static_assert(offsetof(rrProfNetEvent_v1_t, size) == 4, "size at 4");
static_assert(offsetof(rrProfNetEvent_v1_t, tsNs) == 8, "tsNs at 8");
static_assert(offsetof(rrProfNetEvent_v1_t, kind) == 16, "kind at 16");
static_assert(offsetof(rrProfNetEvent_v1_t, bytes) == 40, "bytes at 40");
static_assert(offsetof(rrProfNetEvent_v1_t, connId) == 64, "connId at 64");
static_assert(offsetof(rrProfNetEvent_v1_t, reason) == 68, "reason at 68");

namespace rr::prof {

// Fills a descriptor with defaults (magic, size, kind, tsNs = now, rails/peer -1) and the reason text (truncated).
rrProfNetEvent_v1_t MakeNetEvent(uint16_t kind, int rail, const char* reason = nullptr);

// The net plugin's side of the profiler callback.
//
// Contract
//   * Construct with the profFn NCCL passed to net init (may be NULL: every call is then a cheap no-op).
//   * Never calls Start with a NULL pHandle (NCCL dereferences it, §4.2 hazard). Point events (failover,
//     migration, failback, retransmit, rail-state) are usually detected outside any NCCL step, so Post()
//     queues them and the next StartIo()/Flush() with a real step handle delivers them as children of that
//     step, each stamped with its own tsNs. The queue holds at most kMaxPending events; beyond that the
//     oldest are dropped and counted (Dropped()).
//   * IO spans: StartIo() returns an opaque handle (NULL when NCCL did not create an event); pass it to
//     UpdateIo()/StopIo() exactly once per StopIo. The descriptor is copied into `io` storage owned by
//     the caller (keep `io` alive until StopIo: NCCL's profiler may read it until stop).
//   * Thread-safe: Post() from any thread (a mutex, not on the data path); StartIo/UpdateIo/StopIo/Flush
//     from the thread that owns the request (NCCL's proxy thread).
class NetEventEmitter {
 public:
  static constexpr size_t kMaxPending = 1024;

  explicit NetEventEmitter(rrProfNetCallback_t fn) : fn_(fn) {}
  bool Active() const { return fn_ != nullptr; }

  // Queue a point event for delivery under the next real step handle.
  void Post(const rrProfNetEvent_v1_t& ev);
  // Deliver queued point events as children of this step (no-op when pHandle or the callback is NULL).
  void Flush(void* pHandle);
  // Start an IO span under NCCL's step handle (flushes pending point events first). `io` must stay
  // valid until StopIo. Returns NULL when nothing was started.
  void* StartIo(void* pHandle, rrProfNetEvent_v1_t* io);
  // Report progress (e.g. bytes so far) of an IO span; `io` is re-read by the profiler.
  void UpdateIo(void* handle, rrProfNetEvent_v1_t* io);
  void StopIo(void* handle);

  uint64_t Delivered() const { return delivered_.load(std::memory_order_relaxed); }
  uint64_t Dropped() const { return dropped_.load(std::memory_order_relaxed); }
  size_t Pending();

 private:
  rrProfNetCallback_t fn_;
  std::mutex mu_;
  std::vector<rrProfNetEvent_v1_t> pending_;
  std::atomic<bool> has_pending_{false};
  std::atomic<uint64_t> delivered_{0};
  std::atomic<uint64_t> dropped_{0};
};

}  // namespace rr::prof
