// rerail's profiler: one implementation behind the ncclProfiler_v5 and ncclProfiler_v6 shims.
//
// Contract
//   * Init() is called by NCCL once per communicator (any thread). It reads RERAIL_PROFILE_MASK /
//     RERAIL_PROFILE_DIR / RERAIL_PROFILE_FLUSH_S / RERAIL_PROFILE_RING, opens the comm's trace file, sets
//     *eActivationMask and returns a context. Bad configuration (unknown mask word, unwritable directory) is
//     a WARN naming the value and what is accepted; an unwritable directory fails init with kInvalidUsage
//     (NCCL then runs that comm without the profiler), unknown mask words are skipped.
//   * Start()/Stop()/State() are NCCL's hot path, called from any thread concurrently: they never lock,
//     allocate (after a thread's first call), block or do I/O. They write one 128-B record into the calling
//     thread's ring (drop-and-count when full). Handles are ids (event_ring.h), never dereferenced, so a
//     stale or foreign handle cannot crash the profiler; a NULL handle is ignored.
//   * Every event type NCCL starts is recorded (NCCL starts ancestors it needs, e.g. ProxyStep events as
//     parents of NetPlugin events, even when only `net` is asked for); only the types in the mask are
//     written to the trace, children of unrecorded types hang off their nearest written ancestor.
//   * Finalize() blocks until the collector wrote the comm's final trace, summary and textfile (bounded by
//     kFinalizeTimeoutMs). The collector thread starts with the first Init() and is joined by the last
//     Finalize(). Context objects stay allocated (a few hundred bytes) until process exit so that late
//     records can never point at freed memory.
#pragma once

#include <cstdint>
#include <string>

#include "event_model.h"
#include "prof_abi.h"
#include "rerail/status.h"

namespace rr::prof {

// Parses a RERAIL_PROFILE_MASK value ("coll,p2p,proxyop,net", "all", numbers such as "0x1f" too).
// Unknown words are reported in *bad (comma-separated) and skipped.
int ParseMask(const std::string& text, std::string* bad);

// Why a NetPlugin event was recorded opaque (its pluginId only) instead of as a rerail net event. Counted
// process-wide, shown in each comm's summary ("net_opaque") and textfile.
enum class NetReject : int {
  kForeignId,   // another plugin's type (high 16 bits of pluginId): its descriptor is never read
  kBadVersion,  // rerail's type, a descriptor version this profiler does not know
  kNullData,    // rerail's id, data NULL
  kBadMagic,    // rerail's id, data does not start with RR_PROF_NET_MAGIC
  kShortSize,   // rerail's id and magic, size below sizeof(rrProfNetEvent_v1_t)
  kBadUpdate,   // an update of a rerail event whose new descriptor fails the checks above (ignored)
};
constexpr int kNetRejectKinds = 6;
const char* NetRejectName(NetReject why);
uint64_t NetRejectCount(NetReject why);
// True when (id, data) is a rerail net descriptor this profiler may read (prof_net_event.h contract);
// otherwise false and *why (if non-NULL) says which check failed. Reads at most 8 bytes of data, and
// only when the id is rerail's of version 1.
bool CheckNetDescr(int64_t id, const void* data, NetReject* why);

class Profiler {
 public:
  static constexpr uint64_t kFinalizeTimeoutMs = 30000;

  static Status Init(Context** out, uint64_t comm_id, int* activation_mask, const char* comm_name,
                     int n_nodes, int n_ranks, int rank, rrProfLogger_t logfn, int abi_version);
  // `type`/`parent` are the descriptor header; `union_bytes` points at its 88-byte union (v5 and v6 share
  // the layout of every v5 member; v6 CE members are copied verbatim).
  static void Start(Context* ctx, void** handle, uint64_t type, void* parent, const void* union_bytes);
  static void Stop(void* handle);
  static void State(void* handle, int state, const rrProfEventStateArgs_v5_t* args);
  static Status Finalize(Context* ctx);

  // Tests: make the collector release lingering collectives sooner (takes effect at the next first Init).
  static void SetLingerForTesting(uint64_t ns);
};

}  // namespace rr::prof
