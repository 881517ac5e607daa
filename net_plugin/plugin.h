// rerail — the net plugin implementation behind the ABI shims (abi/net_v10.cc, v11, v12).
//
// Contract
//   * One process-global Plugin, freed when the library is unloaded with no init left open
//     (FreeAtUnload). Init() is reference-counted: NCCL calls v11/v12 init once per
//     communicator (v10 once per process); the first Init sets the logger, loads RERAIL_* (bad value →
//     kInvalidUsage with a WARN), raises RLIMIT_NOFILE, discovers devices and logs one INFO line; the
//     Finalize() matching the last Init closes whatever comms NCCL left open, joins every thread and
//     detaches the logger (the library may be dlclosed right after). The only thread rerail runs is
//     the rtnetlink link monitor (RERAIL_LINK_EVENTS), started at first init and joined at last
//     finalize; it publishes rail up/down into RailSignals.
//   * Device properties are version-neutral (v12 layout); strings stay valid until the library is
//     unloaded (the device table is kept across finalize/init cycles).
//   * listen/connect/accept never block: they return Ok with a NULL comm until the connection exists
//     and NCCL calls again with the same arguments. connect keeps its in-progress state keyed by the
//     handle's address and nonce.
//   * Thread-safety: setup calls (listen/connect/accept/regMr/close*) may run on NCCL's proxy service
//     thread concurrently with data calls on its progress thread; setup state is guarded by a mutex
//     that the data path (isend/irecv/test) never takes.
//   * Profiler (reference §4.2): the first init that brings a non-NULL profiler callback creates the
//     NetEventEmitter every later comm uses (comms created before keep none); it lives until the last
//     finalize. isend/irecv pass NCCL's phandle so IO spans and queued failover/failback/retransmit/
//     rail-state events hang off a ProxyStep; a NULL phandle (bootstrap traffic) starts nothing. With a
//     NULL callback nothing is created and the data path only tests one pointer.
//   * Every method returns a Status; the shims turn it into ncclResult_t and WARN on errors.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>

#include "../net_plugin/abi/nccl_net_abi.h"
#include "conn.h"
#include "rerail/log.h"
#include "rerail/prof_net_event.h"
#include "rerail/rails/board.h"
#include "rerail/rails/link_monitor.h"
#include "transport.h"

namespace rr::net {

struct IbContext;
class IbListenComm;

class Plugin {
 public:
  static Plugin& Get();
  // Called once when the library is unloaded (a destructor function): frees the Plugin unless an
  // init is still unmatched by a finalize.
  static void FreeAtUnload();

  // comm_id: NCCL's commHash (v11/v12 init; 0 for v10). The rail health of this process is published
  // to the tuner's in-process registry (rerail/tuner/health_link.h) for comm_id and for 0 (every comm).
  Status Init(log::LoggerFn logger, rrNcclProfilerCallback_t prof, int abi_version, void** ctx,
              uint64_t comm_id = 0);
  Status Finalize(void* ctx);
  Status Devices(int* ndev);
  Status GetProperties(int dev, rrNcclNetProperties_v12_t* props);
  Status Listen(int dev, void* handle, void** listen_comm);
  Status Connect(int dev, void* handle, void** send_comm);
  Status Accept(void* listen_comm, void** recv_comm);
  Status RegMr(void* comm, void* data, size_t size, int type, void** mhandle);
  Status DeregMr(void* comm, void* mhandle);
  // mhandle / mhandles[0]: regMr's handle (used by IB; may be NULL over TCP).
  // phandle / phandles[0]: NCCL's profiler step handle (may be NULL).
  // tag / tags: NCCL's; matched in grouped receives (maxRecvs > 1, core/core.h), else ignored.
  Status Isend(void* send_comm, void* data, size_t size, int tag, void* mhandle, void* phandle, void** request);
  Status Irecv(void* recv_comm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** phandles,
               void** request);
  Status Iflush(void* recv_comm, int n, void** request);
  Status Test(void* request, int* done, int* sizes);
  Status CloseSend(void* send_comm);
  Status CloseRecv(void* recv_comm);
  Status CloseListen(void* listen_comm);

  ~Plugin();

 private:
  Plugin() = default;
  Status FirstInit(int abi_version);
  Status ProbeIb();  // once per process: logs why IB is (not) used; bad RERAIL_IB_* → InvalidUsage
  void StartLinkMonitor();
  void OfferGpuBuffers();
  void StartBoard();
  void OnLinkEvent(const rails::LinkEvent& ev);
  // The tuner's in-process source: board states when there is a board, else link up/down per device.
  static int RailStatesForTuner(void* self, uint32_t* states, int max);
  void ReleaseAll();
  Status CheckDev(int dev) const;
  std::vector<LinkPlan> PlanLinks(int dev, const Handle& h) const;
  // The NCCL devices: IB ports with RERAIL_TRANSPORT=ib, else the TCP transport's interfaces.
  int NumDevs() const;
  const DeviceInfo& Dev(int dev) const;
  // RERAIL_TRANSPORT=ib (ib_comm.h); only with RERAIL_WITH_IB, else they refuse.
  Status OpenIb();
  Status IbListen(int dev, void* handle, void** listen_comm);
  Status IbConnect(int dev, const Handle& h, const void* handle, void** send_comm);
  Status IbAccept(void* listen_comm, void** recv_comm);
  // IB port events -> rails_ (slot = IB device): started at the first init, joined at the last finalize.
  void StartIbMonitor();
  void StopIbMonitor();

  std::mutex mu_;  // guards everything below; never taken by isend/irecv/test
  int refs_ = 0;
  bool ib_probed_ = false;
  std::unique_ptr<Transport> transport_;
  ConnConfig cfg_;
  RailSignals rails_;  // written by the link-monitor thread, read lock-free by comms
  RailLoad loads_[kMaxRails];  // per-rail queue and bandwidth, shared by the send comms' schedulers
  std::unique_ptr<rails::LinkMonitor> monitor_;
  std::unique_ptr<rails::BoardWriter> board_;  // RERAIL_BOARD=1; slot i = device i
  std::unique_ptr<prof::NetEventEmitter> prof_;  // NCCL passed a profiler callback; else null
  std::set<SendComm*> sends_;
  std::set<RecvComm*> recvs_;
  std::set<ListenComm*> listens_;
  std::set<void*> mrs_;  // live regMr handles (MemReg): deregMr checks membership; the last finalize frees the rest
  // connect() in progress: (handle address, nonce) → the send comm being set up.
  std::map<std::pair<const void*, Nonce>, std::unique_ptr<SendComm>> connecting_;
  // RERAIL_TRANSPORT=ib: the IB devices and registrations (ib_comm.h; opened by the first init, closed
  // by the last finalize) and the IB comms. Raw: IbContext is only complete
  // where the IB transport is built (plugin.cc frees them).
  IbContext* ib_ = nullptr;
  std::set<Comm*> ib_sends_, ib_recvs_;
  std::set<IbListenComm*> ib_listens_;
  std::map<std::pair<const void*, Nonce>, std::unique_ptr<Comm>> ib_connecting_;
};

}  // namespace rr::net
