// rr::prof::NcclEmu — plays NCCL's part of the profiler ABI without a GPU (issue 6, item 5).
//
// It loads a profiler library (any: rerail's, NCCL's example, the inspector), initialises it for one
// communicator and starts/stops the events NCCL 2.28/2.30 would, with the same descriptors, parents and
// activation-mask gating (reference §4.1; NCCL src/plugin/profiler.cc):
//
//     Group ─► Coll / P2p ─► ProxyOp ─► ProxyStep ─► NetPlugin (created by the net plugin via NetCallback)
//                        └─► KernelCh                ProxyCtrl (standalone)
//
// It also provides the profiler callback NCCL hands to a net plugin's init (NetCallback()): the net
// plugin passes the ProxyStep* it got as `phandle` on isend/irecv, and the callback creates NetPlugin
// events under that step exactly as NCCL's ncclProfilerCallback does.
//
// Typical use (rerail-perf --profiler PATH):
//     std::unique_ptr<NcclEmu> emu;
//     RR_CHECK(NcclEmu::Open(path, {commId, "perf", nNodes, nRanks, rank}, &emu));
//     net->Init(..., NcclEmu::NetCallback());                 // before the first StartProxyStep
//     void* g = emu->StartGroup();
//     void* c = emu->StartColl(g, {"AllReduce", count, "ncclFloat32", "Ring", "Simple", nChannels});
//     emu->Stop(c); emu->Stop(g);                              // NCCL stops both right after enqueue
//     void* op = emu->StartProxyOp(c, channel, peer, nSteps, chunkSize, /*isSend=*/true);
//     NcclEmu::ProxyStep slot[8];                              // like NCCL's pHandles[NCCL_STEPS]
//     emu->StartProxyStep(&slot[s % 8], op, s);
//     net->Isend(..., /*phandle=*/&slot[s % 8], ...);  ... test() done ...
//     emu->StopProxyStep(&slot[s % 8]);
//     emu->Stop(op);
//     RR_CHECK(emu->Finalize());                               // also done by the destructor
//
// Contract
//   * Ownership: the emu owns the dlopen handle and the profiler context; ProxyStep slots belong to the
//     caller and must outlive every net plugin call that received them as phandle.
//   * Thread-safety: all Start*/Stop/Record calls may be made from several threads at once (as NCCL's
//     app and proxy threads do); the emu adds no locking, so it is exactly as thread-safe as the profiler.
//     Open/Finalize/destruction from one thread, after the other threads stopped calling.
//   * Handles: a returned void* is the profiler's handle, or nullptr when NCCL would not have started the
//     event (mask) or the profiler declined it; Stop/Record accept nullptr (no-op), as NCCL does.
//   * Errors: Open returns kSystemError when the library cannot be loaded, kInvalidUsage when it exports
//     no ncclProfiler_v6/_v5, and the profiler's own code when its init fails (message logged).
//   * The callback never dereferences a NULL phandle (returns kInvalidArgument; NCCL itself would crash).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "prof_abi.h"
#include "rerail/prof_net_event.h"
#include "rerail/status.h"

namespace rr::prof {

class NcclEmu {
 public:
  struct CommInfo {
    uint64_t comm_id = 0;
    std::string name;
    int n_nodes = 1;
    int n_ranks = 1;
    int rank = 0;
  };
  struct CollInfo {
    const char* func = "AllReduce";  // must outlive the emu (NCCL passes static strings too)
    size_t count = 0;
    const char* datatype = "ncclFloat32";
    const char* algo = "Ring";
    const char* proto = "Simple";
    int n_channels = 1;
    int root = 0;
    uint64_t seq = UINT64_MAX;  // UINT64_MAX: next value of the emu's own counter
  };
  // NCCL's per-step handle (ncclProxyEventHandle): what the net plugin receives as phandle.
  struct ProxyStep {
    NcclEmu* emu = nullptr;
    void* event = nullptr;  // the profiler's ProxyStep handle (may be nullptr)
  };

  // `version`: 0 = newest exported (v6, then v5), or 5 / 6 to force one.
  static Status Open(const std::string& path, const CommInfo& comm, std::unique_ptr<NcclEmu>* out,
                     int version = 0);
  ~NcclEmu();
  NcclEmu(const NcclEmu&) = delete;
  NcclEmu& operator=(const NcclEmu&) = delete;

  int abi_version() const { return version_; }
  int activation_mask() const { return mask_; }
  const char* plugin_name() const { return name_; }

  void* StartGroup();
  void* StartColl(void* group, const CollInfo& info);
  void* StartP2p(void* group, const char* func, int peer, size_t count, const char* datatype, int n_channels);
  void* StartProxyOp(void* task, int channel, int peer, int n_steps, int chunk_size, bool is_send);
  void StartProxyStep(ProxyStep* slot, void* op, int step);
  void StopProxyStep(ProxyStep* slot);
  // Proxy step states (SendGPUWait, SendWait, RecvWait, ...), with the bytes transferred so far.
  void StepState(ProxyStep* slot, int state, size_t trans_size);
  void* StartKernelCh(void* task, int channel, uint64_t start_timer);
  void StopKernelCh(void* handle, uint64_t stop_timer);  // KernelChStop state, then stop
  void* StartProxyCtrl();
  void ProxyCtrlState(void* handle, int state, int appended_ops);
  void Stop(void* handle);

  // The ncclProfilerCallback_t to hand to a net plugin's init.
  static rrProfNetCallback_t NetCallback();

  // Finalizes the profiler context (idempotent); the library stays loaded until destruction.
  Status Finalize();

 private:
  NcclEmu() = default;
  void* Start(rrProfEventDescr_v5_t* d);
  void Record(void* handle, int state, rrProfEventStateArgs_v5_t* args);
  static int Callback(void** eHandle, int type, void* pHandle, int64_t pluginId, void* extData);

  void* lib_ = nullptr;
  const rrProfiler_v5_t* v5_ = nullptr;
  const rrProfiler_v6_t* v6_ = nullptr;
  int version_ = 0;
  const char* name_ = "";
  void* ctx_ = nullptr;
  int mask_ = 0;
  int rank_ = 0;
  bool finalized_ = true;
  std::atomic<uint64_t> seq_{0};
};

}  // namespace rr::prof
