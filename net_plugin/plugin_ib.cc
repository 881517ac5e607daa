// The RERAIL_TRANSPORT=ib half of Plugin (plugin.h): the IB devices, and listen / connect / accept of
// the IB comms with their TCP bootstrap stream (ib_comm.h). Called under Plugin::mu_.
#include "plugin.h"

#include <string>

#include "rerail/params.h"
#if RERAIL_WITH_IB
#include "ib_comm.h"
#include "transports/ib/ib_devices.h"
#endif

namespace rr::net {

#if RERAIL_WITH_IB
Status Plugin::OpenIb() {
  if (ib_ != nullptr) return Status::Ok();
  ib::IbOptions opt;
  RR_CHECK(ib::IbOptions::FromParams(&opt));
  ib::IbDiscovery d;
  RR_CHECK(ib::DiscoverIb(ib::VerbsLib::Default(), opt, &d));
  std::unique_ptr<IbContext> c;
  RR_CHECK(IbContext::Open(d, &c));
  ib_ = c.release();
  std::string names;
  for (const DeviceInfo& i : ib_->info) names += (names.empty() ? "" : ",") + i.name;
  RR_INFO(log::kFlagInit | log::kFlagNet, "RERAIL_TRANSPORT=ib: offering IB ports %s; handshakes over TCP (%s)",
          names.c_str(), transport_ && transport_->NumDevices() > 0 ? transport_->Device(0).name.c_str() : "none");
  return Status::Ok();
}

// Port down / up / device fatal of an IB device -> rails_[device] (the comms poll it, ib_comm.h). Runs on
// the monitor's thread: atomics and one log line, never mu_ (Finalize joins this thread under mu_).
void Plugin::StartIbMonitor() {
  if (ib_ == nullptr || ib_->monitor) return;
  auto cb = [this](const ib::IbEvent& e) {
    if (e.kind != ib::IbEvent::Kind::kPortDown && e.kind != ib::IbEvent::Kind::kPortUp &&
        e.kind != ib::IbEvent::Kind::kDeviceFatal) {
      return;
    }
    if (e.rail < 0 || e.rail >= kMaxRails) return;
    bool down = e.kind != ib::IbEvent::Kind::kPortUp;
    if (rails_.down[e.rail].exchange(down, std::memory_order_acq_rel) == down) return;
    rails_.gen[e.rail].fetch_add(1, std::memory_order_acq_rel);
    if (board_) {  // stopped before the board goes (Finalize)
      if (down) board_->CountLinkDown(e.rail);
      board_->SetState(e.rail, down ? rails::RailState::kFailed : rails::RailState::kRecovering,
                       down ? rails::RailEvent::kLinkDown : rails::RailEvent::kLinkUp);
    }
    RR_INFO(log::kFlagNet, "IB rail %s %s (%s)", ib_->info[e.rail].name.c_str(), down ? "down" : "up", e.name.c_str());
  };
  Status st = ib::IbEventMonitor::Start(ib_->rails(), cb, &ib_->monitor);
  if (!st.ok()) RR_WARN("IB port events disabled: %s (failures are still detected by WC errors and stalls)", st.ToString().c_str());
}

void Plugin::StopIbMonitor() {
  if (ib_ != nullptr) ib_->monitor.reset();  // joins its thread
}

// The handle: entry 0 = the bootstrap address with this IB device as rail, then the other IB devices
// (same address) in order, so the sender knows which rails it may dial (ib_comm.h).
Status Plugin::IbListen(int dev, void* handle, void** listen_comm) {
  Nonce nonce;
  RR_CHECK(RandomNonce(&nonce));
  Handle tcp;
  std::unique_ptr<Listener> l;
  RR_CHECK(transport_->Listen(0, nonce, &tcp, &l));
  Handle h;
  h.nonce = nonce;
  h.addrs.push_back(HandleAddr{dev, tcp.addrs[0].addr});
  for (int d = 0; d < NumDevs() && static_cast<int>(h.addrs.size()) < kMaxAddrs; ++d) {
    if (d != dev) h.addrs.push_back(HandleAddr{d, tcp.addrs[0].addr});
  }
  RR_CHECK(EncodeHandle(h, handle));
  ConnConfig lcfg = cfg_;
  lcfg.dev = dev;
  auto* lc = new IbListenComm(lcfg, ib_, std::move(l));
  ib_listens_.insert(lc);
  *listen_comm = lc;
  RR_INFO(log::kFlagNet, "listen on IB %s, bootstrap at %s", Dev(dev).name.c_str(), tcp.addrs[0].addr.ToString().c_str());
  return Status::Ok();
}

// Link k runs from the k-th local IB device (NCCL's first) to the k-th rail of the handle.
Status Plugin::IbConnect(int dev, const Handle& h, const void* handle, void** send_comm) {
  auto key = std::make_pair(handle, h.nonce);
  auto it = ib_connecting_.find(key);
  if (it == ib_connecting_.end()) {
    std::vector<ib::IbSendLinkSpec> plan;
    std::vector<int> local{dev};
    for (int d = 0; d < NumDevs(); ++d) {
      if (d != dev) local.push_back(d);
    }
    for (size_t k = 0; k < h.addrs.size() && k < local.size() && k < static_cast<size_t>(kMaxRails); ++k) {
      plan.push_back(ib::IbSendLinkSpec{ib_->devs[local[k]].get(), local[k], h.addrs[k].rail});
    }
    int tcp_dev = -1;
    for (int d = 0; d < transport_->NumDevices() && tcp_dev < 0; ++d) {
      if (transport_->Device(d).addr.family() == h.addrs[0].addr.family()) tcp_dev = d;
    }
    if (tcp_dev < 0) return Status::InvalidUsage("no TCP interface of the bootstrap address's family " + h.addrs[0].addr.ToString());
    uint64_t conn_id = 0;
    RR_CHECK(RandomU64(&conn_id));
    LinkIdentity id;
    id.nonce = h.nonce;
    id.conn_id = conn_id;
    id.chunk_size = cfg_.chunk;
    id.nstreams = 1;
    std::unique_ptr<Connector> boot;
    RR_CHECK(transport_->Connect(tcp_dev, h.addrs[0].addr, id, &boot));
    IbTcpPlan tcp;  // RERAIL_IB_TCP_FALLBACK: a TCP link to the bootstrap address after the IB links
    if (Params::Bool(ParamId::IbTcpFallback)) {
      tcp.transport = transport_.get();
      tcp.dev = tcp_dev;
      tcp.remote = h.addrs[0].addr;
      tcp.remote_rail = 0;
      tcp.streams = static_cast<int>(Params::Int(ParamId::TcpStreams));
      tcp.nonce = h.nonce;
      tcp.chunk = cfg_.chunk;
      tcp.grouped = cfg_.max_recvs > 1;
    }
    it = ib_connecting_.emplace(key, std::make_unique<IbSendComm>(cfg_, ib_, conn_id, std::move(plan), std::move(boot),
                                                                  std::move(tcp))).first;
  }
  bool ready = false;
  Status st = static_cast<IbSendComm*>(it->second.get())->PollConnect(&ready);
  if (!st.ok()) {
    ib_connecting_.erase(it);
    return st;
  }
  if (!ready) return Status::Ok();
  auto* sc = static_cast<IbSendComm*>(it->second.release());
  ib_connecting_.erase(it);
  ib_sends_.insert(sc);
  *send_comm = sc;
  return Status::Ok();
}

Status Plugin::IbAccept(void* listen_comm, void** recv_comm) {
  auto* lc = static_cast<IbListenComm*>(listen_comm);
  if (ib_listens_.count(lc) == 0) return Status::Internal("accept on a listen comm that is closed or unknown");
  std::unique_ptr<IbRecvComm> rc;
  RR_CHECK(lc->Accept(&rc));
  if (!rc) return Status::Ok();
  ib_recvs_.insert(rc.get());
  *recv_comm = rc.release();
  return Status::Ok();
}
#else
void Plugin::StartIbMonitor() {}
void Plugin::StopIbMonitor() {}
Status Plugin::OpenIb() { return Status::InvalidUsage("RERAIL_TRANSPORT=ib but rerail was built with RERAIL_ENABLE_IB=OFF"); }
Status Plugin::IbListen(int, void*, void**) { return Status::Internal("no IB transport in this build"); }
Status Plugin::IbConnect(int, const Handle&, const void*, void**) { return Status::Internal("no IB transport in this build"); }
Status Plugin::IbAccept(void*, void**) { return Status::Internal("no IB transport in this build"); }
#endif

}  // namespace rr::net
