#include "plugin.h"

#include <type_traits>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <sstream>

#include "duplex.h"
#include "idle_sends.h"
#include "rerail/auth.h"
#include "rerail/params.h"
#include "rerail/tuner/health_link.h"
#include "rerail/version.h"
#include "staging/cuda_driver.h"
#include "staging/stager.h"
#include "transports/tcp/tcp.h"
#if RERAIL_WITH_IB
#include "ib_comm.h"
#include "transports/ib/ib_devices.h"
#endif

namespace rr::net {
namespace {

constexpr uint32_t kCtxMagic = 0x43545852u;
// Properties NCCL validates (reference §2.4): sizes in (0, 2^40]; NCCL caps a message at 1 GiB anyway.
constexpr size_t kMaxMessageBytes = 1ull << 31;
constexpr int kMaxComms = 65536;
// Floor of TCP_USER_TIMEOUT: a receiver may legitimately not drain its socket for seconds (NCCL's GPU
// holding every buffer, a debugger, a host under load) and the kernel counts that against it too.
constexpr int64_t kMinUserTimeoutMs = 30000;

struct Ctx {
  uint32_t magic = kCtxMagic;
  uint64_t comm_id = 0;  // registered with the tuner's health registry when non-zero
};

// A regMr handle; valid while it is in Plugin::mrs_ (membership, not a magic, identifies one).
struct MemReg {
  void* data = nullptr;
  size_t size = 0;
  int type = 0;
  void* ib = nullptr;  // RERAIL_TRANSPORT=ib: the ib::MrHandle of IbContext::mrs (every rail's PD)
};

void FreeMemReg(MemReg* mr, IbContext* ib) {
  if (mr->type == RR_NCCL_PTR_CUDA) staging::GpuBuffers::Get().Remove(mr->data, mr->size);
#if RERAIL_WITH_IB
  if (mr->ib != nullptr && ib != nullptr) {
    Status st = ib->mrs->Deregister(static_cast<ib::MrHandle*>(mr->ib));
    if (!st.ok()) RR_WARN("deregMr: %s", st.ToString().c_str());
  }
#else
  (void)ib;
#endif
  delete mr;
}

bool IsSend(uint32_t m) { return m == kSendCommMagic || m == kIbSendCommMagic; }
bool IsRecv(uint32_t m) { return m == kRecvCommMagic || m == kIbRecvCommMagic; }

template <typename T>
Status CheckObj(void* p, uint32_t magic, const char* what) {
  if (p == nullptr) return Status::Internal(std::string(what) + " is NULL");
  uint32_t m;
  if constexpr (std::is_base_of_v<Comm, T>) m = Comm::PeekMagic(p);  // no member access on a foreign object
  else m = static_cast<T*>(p)->magic();
  if (m != magic) return Status::Internal(std::string(what) + " is not a rerail object");
  return Status::Ok();
}

}  // namespace

namespace {
Plugin* g_plugin = nullptr;  // set once by Get(); freed by FreeAtUnload when nothing uses it
}  // namespace

Plugin& Plugin::Get() {
  static const bool made = (g_plugin = new Plugin(), true);  // once, thread-safe
  (void)made;
  return *g_plugin;
}

// Library unload: dlclose, or exit() with the library still loaded. A Plugin whose every init was
// finalized is freed (nothing NCCL holds points into it, and no NCCL thread calls in without an init
// first), so a process that loads and unloads rerail ends with nothing of it left. One still in use is
// kept: exit() may run while NCCL's proxy threads are inside a call, and they must find it intact.
Plugin::~Plugin() {
#if RERAIL_WITH_IB
  delete ib_;
#endif
}

void Plugin::FreeAtUnload() {
  if (g_plugin == nullptr) return;
  {
    std::lock_guard<std::mutex> lk(g_plugin->mu_);
    if (g_plugin->refs_ != 0) return;
  }
  delete g_plugin;
  g_plugin = nullptr;
}

namespace {
__attribute__((destructor)) void FreePluginAtUnload() { Plugin::FreeAtUnload(); }
}  // namespace

Status Plugin::FirstInit(int abi_version) {
  RR_CHECK(Params::Load());
  RR_CHECK(ProbeIb());
  uint64_t nofile = 0;
  Status st = sock::RaiseNofileLimit(&nofile);
  if (!st.ok()) RR_WARN("cannot raise RLIMIT_NOFILE: %s", st.ToString().c_str());
  if (!transport_) {
    std::vector<DeviceInfo> devs;
    RR_CHECK(tcp::DiscoverTcpDevices(Params::Str(ParamId::TcpIfname), &devs));
    if (devs.size() > static_cast<size_t>(kMaxRails)) devs.resize(kMaxRails);
    tcp::TcpConfig cfg;
    cfg.streams = static_cast<int>(Params::Int(ParamId::TcpStreams));
    cfg.sockbuf = static_cast<int>(Params::Int(ParamId::TcpBufSize));
    cfg.connect_timeout_ms = static_cast<int>(Params::Int(ParamId::ConnectTimeoutMs));
    cfg.secret = auth::JobSecret();
    // Kernel backstop for black holes on a lone link (the heartbeat watchdog is faster when there are
    // siblings). It must not be short: Linux also aborts a connection whose peer advertises a zero
    // window for that long, i.e. a receiver that is merely slow to post or poll.
    cfg.user_timeout_ms = static_cast<unsigned>(std::max<int64_t>(kMinUserTimeoutMs, Params::Int(ParamId::GiveupMs)));
    transport_ = std::make_unique<tcp::TcpTransport>(std::move(devs), cfg);
  }
  // RERAIL_TRANSPORT=ib: the NCCL devices are IB ports; transport_ (TCP) carries only the handshakes.
  if (Params::Str(ParamId::Transport) == "ib") RR_CHECK(OpenIb());
  cfg_.transport = transport_.get();
  cfg_.rails = &rails_;
  cfg_.loads = loads_;
  cfg_.chunk = static_cast<uint32_t>(Params::Int(ParamId::ChunkSize));
  cfg_.eager_max = static_cast<size_t>(Params::Int(ParamId::EagerMax));
  cfg_.eager_pool = static_cast<size_t>(Params::Int(ParamId::EagerPool));
  // 0 = automatic: NCCL's IB default (8) on IB ports; 1 on TCP, where a send may leave before its
  // receive is posted (eager), which grouping would end (net_plugin/README.md, "Grouped receives").
  cfg_.max_recvs = static_cast<int>(Params::Int(ParamId::MaxRecvs));
  if (cfg_.max_recvs == 0) cfg_.max_recvs = ib_ != nullptr ? kMaxRecvs : 1;
  cfg_.streams = static_cast<int>(Params::Int(ParamId::TcpStreams));
#if RERAIL_WITH_IB
  if (ib_ != nullptr) cfg_.streams = ib_->link.streams;  // QPs per IB link (the init line)
#endif
  // auto = stripe on TCP, failover on IB (DESIGN.md); otherwise what was asked for.
  const std::string& policy = Params::Str(ParamId::Policy);
  cfg_.policy = policy == "failover" || (policy == "auto" && ib_ != nullptr) ? Policy::kFailover : Policy::kStripe;
  // One connection both ways (duplex.h). auto: TCP with the stripe policy only; with failover it cost
  // throughput in bench-rails (docs/hot-path-latency.md). A peer deciding otherwise costs nothing.
  const std::string& duplex = Params::Str(ParamId::TcpDuplex);
  cfg_.duplex = duplex == "1" || (duplex == "auto" && cfg_.policy == Policy::kStripe && ib_ == nullptr);
  cfg_.stall_ns = static_cast<uint64_t>(Params::Int(ParamId::StallMs)) * 1000000ull;
  cfg_.heartbeat_ns = static_cast<uint64_t>(Params::Int(ParamId::HeartbeatMs)) * 1000000ull;
  cfg_.giveup_ns = static_cast<uint64_t>(Params::Int(ParamId::GiveupMs)) * 1000000ull;
  cfg_.backoff_min_ms = static_cast<uint64_t>(Params::Int(ParamId::FailbackMinMs));
  cfg_.backoff_max_ms = std::max<uint64_t>(cfg_.backoff_min_ms, Params::Int(ParamId::FailbackMaxMs));
  cfg_.probation_ms = static_cast<uint64_t>(Params::Int(ParamId::FailbackProbationMs));
  // Board slot = NCCL device (IB ports with RERAIL_TRANSPORT=ib). The rtnetlink monitor watches TCP
  // interfaces only: with IB the IbEventMonitor reports port events (StartIbMonitor).
  if (Params::Bool(ParamId::Board)) StartBoard();
  cfg_.board = board_.get();
  if (Params::Bool(ParamId::LinkEvents) && ib_ == nullptr) StartLinkMonitor();
  StartIbMonitor();  // after the board: its events update it
  if (ib_ == nullptr) OfferGpuBuffers();
  else staging::GpuBuffers::Get().SetOffered(false);  // GPU memory over IB: not yet (host memory only)
  std::ostringstream names;
  for (int i = 0; i < NumDevs(); ++i) names << (i ? "," : "") << Dev(i).name;
  RR_INFO(log::kFlagInit | log::kFlagNet,
          "rerail %s ABI v%d, transports: %s(%s), policy %s, %d stream(s)/link, chunk %u B, maxRecvs %d, nofile %lu",
          rr::Version(), abi_version, ib_ != nullptr ? "ib" : transport_->name(), names.str().c_str(),
          cfg_.policy == Policy::kFailover ? "failover" : "stripe", cfg_.streams, cfg_.chunk, cfg_.max_recvs,
          static_cast<unsigned long>(nofile));
  return Status::Ok();
}

// IB (issue 12): libibverbs is opened here, never linked. Until the verbs data path lands only TCP devices
// are offered; one INFO line says why IB is not used (no library, no RDMA in the kernel, no active port)
// or which ports were found. A malformed RERAIL_IB_* value fails init (ncclInvalidUsage) like any knob.
Status Plugin::ProbeIb() {
#if RERAIL_WITH_IB
  RR_CHECK(ib::VerbsLib::CheckLibParam());
  ib::IbOptions opt;
  RR_CHECK(ib::IbOptions::FromParams(&opt));
  if (ib_probed_) return Status::Ok();
  ib_probed_ = true;
  ib::IbDiscovery d;
  RR_CHECK(ib::DiscoverIb(ib::VerbsLib::Default(), opt, &d));
  if (d.ports.empty()) {
    RR_INFO(log::kFlagInit | log::kFlagNet, "IB not used (%s): offering TCP devices only", d.why.c_str());
    return Status::Ok();
  }
  std::string names;
  for (const ib::IbPort& p : d.ports) names += (names.empty() ? "" : ",") + p.name;
  if (Params::Str(ParamId::Transport) != "ib") {
    RR_INFO(log::kFlagInit | log::kFlagNet, "IB ports found (%s) but RERAIL_TRANSPORT=tcp: offering TCP devices only",
            names.c_str());
  }
#else
  if (!ib_probed_) RR_INFO(log::kFlagInit | log::kFlagNet, "IB not used (built with RERAIL_ENABLE_IB=OFF): offering TCP devices only");
  ib_probed_ = true;
#endif
  return Status::Ok();
}

// GPU buffers (issue 13): offered only on request (RERAIL_GPU_BUFFERS=1, or RERAIL_FORCE_STAGING=1)
// and only where the CUDA driver works; their chunks are staged through host slots (staging/).
void Plugin::OfferGpuBuffers() {
  bool asked = Params::Bool(ParamId::GpuBuffers);
  auto& gpu = staging::GpuBuffers::Get();
  gpu.SetOffered(false);
  if (!asked && !Params::Bool(ParamId::ForceStaging)) return;
  const staging::CudaDriver& d = staging::CudaDriver::Get();
  if (!d.available()) {
    if (asked) RR_WARN("RERAIL_GPU_BUFFERS=1 but GPU buffers not offered (ptrSupport stays HOST): CUDA driver unusable: %s", d.why().c_str());
    else RR_INFO(log::kFlagInit | log::kFlagNet, "GPU buffers not offered (no usable CUDA driver: %s)", d.why().c_str());
    return;
  }
  gpu.SetOffered(true);
  RR_INFO(log::kFlagInit | log::kFlagNet,
          "GPU buffers offered (ptrSupport HOST|CUDA): chunks of GPU memory are staged through host slots by the CUDA driver");
  // Pinned here, before any comm exists: never from the proxy thread while NCCL's kernels run
  // (staging::PinnedPool). Once per process.
  static std::once_flag pinned;
  std::call_once(pinned, [this] {
    auto slots = static_cast<std::size_t>(Params::Int(ParamId::StagingSlots));
    if (slots == 0) return;
    void* ctx = nullptr;
    Status st = staging::CudaDriver::Get().ContextFor(nullptr, &ctx);
    if (st.ok()) st = staging::PinnedPool::Get().Grow(ctx, cfg_.chunk, slots);
    if (st.ok()) {
      RR_INFO(log::kFlagInit | log::kFlagNet, "staging: %zu pinned slots of %u bytes", slots, cfg_.chunk);
    } else {
      RR_WARN("staging slots stay pageable (GPU chunks copied through the driver's own bounce buffers): %s",
              st.message().c_str());
    }
  });
}

void Plugin::OnLinkEvent(const rails::LinkEvent& ev) {
  for (int d = 0; d < transport_->NumDevices(); ++d) {
    if (transport_->Device(d).name != ev.ifname) continue;
    bool down = !ev.up || ev.removed;
    if (rails_.down[d].exchange(down, std::memory_order_acq_rel) == down) return;
    rails_.gen[d].fetch_add(1, std::memory_order_acq_rel);
    if (board_) {
      if (down) board_->CountLinkDown(d);
      board_->SetState(d, down ? rails::RailState::kFailed : rails::RailState::kRecovering,
                       down ? rails::RailEvent::kLinkDown : rails::RailEvent::kLinkUp);
    }
    RR_INFO(log::kFlagNet, "rail %s link %s", ev.ifname.c_str(), down ? "down" : "up");
  }
}

void Plugin::StartBoard() {
  if (board_) return;
  Status st = rails::BoardWriter::Create("net", &board_);
  for (int d = 0; st.ok() && d < NumDevs(); ++d) {
    int slot = -1;
    st = board_->AddRail(Dev(d).name, &slot);
    if (st.ok() && slot != d) st = Status::Internal("board slot mismatch");
  }
  if (!st.ok()) {
    RR_INFO(log::kFlagNet, "no rail-health board: %s", st.ToString().c_str());
    board_.reset();
  }
}

void Plugin::StartLinkMonitor() {
  if (monitor_) return;
  rails::LinkMonitor::Options opts;
  for (int d = 0; d < transport_->NumDevices(); ++d) {
    if (!transport_->Device(d).loopback) opts.ifnames.push_back(transport_->Device(d).name);
  }
  if (opts.ifnames.empty()) return;  // loopback never goes down
  Status st = rails::LinkMonitor::Start(opts, [this](const rails::LinkEvent& ev) { OnLinkEvent(ev); }, &monitor_);
  if (!st.ok()) RR_WARN("link events disabled: %s (failures are still detected by errors and stalls)", st.ToString().c_str());
}

int Plugin::RailStatesForTuner(void* self, uint32_t* states, int max) {
  // Runs under the registry's lock; Finalize unregisters (taking that lock) before the board goes.
  auto* p = static_cast<Plugin*>(self);
  if (!p->transport_) return 0;
  int n = std::min(p->NumDevs(), std::min(max, static_cast<int>(kMaxRails)));
  for (int d = 0; d < n; ++d) {
    rails::RailState s = p->board_ ? p->board_->State(d)
                         : p->rails_.down[d].load(std::memory_order_acquire) ? rails::RailState::kFailed
                                                                               : rails::RailState::kHealthy;
    states[d] = static_cast<uint32_t>(s);
  }
  return n;
}

Status Plugin::Init(log::LoggerFn logger, rrNcclProfilerCallback_t prof, int abi_version, void** ctx,
                    uint64_t comm_id) {
  std::lock_guard<std::mutex> lk(mu_);
  if (refs_ == 0) {
    log::SetPrefix("NET/rerail");
    if (logger != nullptr) log::SetLogger(logger);
    // On failure the logger stays set: the shim reports the error through NCCL's logger right after
    // (NCCL's logger lives in libnccl, which outlives this library).
    RR_CHECK(FirstInit(abi_version));
  }
  if (prof != nullptr && !prof_) {
    // Same signature; NCCL's callback returns ncclResult_t, an int-sized enum.
    prof_ = std::make_unique<prof::NetEventEmitter>(reinterpret_cast<rrProfNetCallback_t>(prof));
    cfg_.prof = prof_.get();
    RR_INFO(log::kFlagInit | log::kFlagNet, "profiler callback set: emitting rerail net events");
  }
  if (refs_++ == 0) tuner::RegisterRailSource(0, &Plugin::RailStatesForTuner, this);
  if (ctx != nullptr) {
    auto* c = new Ctx();
    c->comm_id = comm_id;
    if (comm_id != 0) tuner::RegisterRailSource(comm_id, &Plugin::RailStatesForTuner, this);
    *ctx = c;
  }
  return Status::Ok();
}

void Plugin::ReleaseAll() {
  size_t leaked = sends_.size() + recvs_.size() + listens_.size() + connecting_.size() + ib_sends_.size() +
                  ib_recvs_.size() + ib_listens_.size() + ib_connecting_.size();
  if (leaked > 0) RR_INFO(log::kFlagNet, "finalize: closing %zu comm(s) NCCL left open", leaked);
  for (auto* c : sends_) delete c;
  for (auto* c : recvs_) delete c;
  for (auto* c : listens_) delete c;
  sends_.clear();
  recvs_.clear();
  listens_.clear();
  connecting_.clear();
  for (auto* c : ib_sends_) delete c;
  for (auto* c : ib_recvs_) delete c;
#if RERAIL_WITH_IB
  for (auto* c : ib_listens_) delete c;
#endif
  ib_sends_.clear();
  ib_recvs_.clear();
  ib_listens_.clear();
  ib_connecting_.clear();
  if (!mrs_.empty()) RR_INFO(log::kFlagNet, "finalize: freeing %zu memory registration(s) NCCL left", mrs_.size());
  for (void* mr : mrs_) FreeMemReg(static_cast<MemReg*>(mr), ib_);
  mrs_.clear();
}

Status Plugin::Finalize(void* ctx) {
  std::lock_guard<std::mutex> lk(mu_);
  if (ctx != nullptr) {
    auto* c = static_cast<Ctx*>(ctx);
    if (c->magic != kCtxMagic) return Status::Internal("finalize with a context rerail did not create");
    c->magic = 0;
    if (c->comm_id != 0) tuner::UnregisterRailSource(c->comm_id);
    delete c;
  }
  if (refs_ == 0) {
    // NCCL finalizes a context whose init failed; nothing was set up for it.
    if (ctx == nullptr) return Status::Ok();
    return Status::Internal("finalize without a matching init");
  }
  if (--refs_ == 0) {
    tuner::UnregisterRailSource(0);
    ReleaseAll();
    IdleSends::Get().JoinIfIdle();  // every comm is gone: its thread ends, joined here
    if (monitor_) monitor_->Stop();
    monitor_.reset();
    StopIbMonitor();
#if RERAIL_WITH_IB
    // The IB devices go with the last finalize, as TCP's sockets do: their contexts hold descriptors
    // (a provider's command and async fds) and the cached registrations pin memory. A process that
    // finalized every init holds nothing of rerail's; the next init opens them again (OpenIb).
    delete ib_;
    ib_ = nullptr;
#endif
    cfg_.board = nullptr;
    board_.reset();
    cfg_.prof = nullptr;
    prof_.reset();
    log::SetLogger(nullptr);
  }
  return Status::Ok();
}

int Plugin::NumDevs() const {
#if RERAIL_WITH_IB
  if (ib_ != nullptr) return static_cast<int>(ib_->info.size());
#endif
  return transport_ ? transport_->NumDevices() : 0;
}

const DeviceInfo& Plugin::Dev(int dev) const {
#if RERAIL_WITH_IB
  if (ib_ != nullptr) return ib_->info[dev];
#endif
  return transport_->Device(dev);
}

Status Plugin::CheckDev(int dev) const {
  if (!transport_) return Status::Internal("net plugin used before init");
  if (dev < 0 || dev >= NumDevs()) {
    return Status::Internal("device " + std::to_string(dev) + " does not exist (" + std::to_string(NumDevs()) + " devices)");
  }
  return Status::Ok();
}

Status Plugin::Devices(int* ndev) {
  if (ndev == nullptr) return Status::Internal("devices with a NULL count pointer");
  if (!transport_) return Status::Internal("devices() before init");
  *ndev = NumDevs();
  return Status::Ok();
}

Status Plugin::GetProperties(int dev, rrNcclNetProperties_v12_t* p) {
  if (p == nullptr) return Status::Internal("getProperties with a NULL properties pointer");
  RR_CHECK(CheckDev(dev));
  const DeviceInfo& d = Dev(dev);
  std::memset(p, 0, sizeof(*p));
  p->name = const_cast<char*>(d.name.c_str());
  p->pciPath = d.pci_path.empty() ? nullptr : const_cast<char*>(d.pci_path.c_str());
  p->guid = d.guid;
  p->ptrSupport = RR_NCCL_PTR_HOST | (staging::GpuBuffers::Get().offered() ? RR_NCCL_PTR_CUDA : 0);
  p->regIsGlobal = 0;
  p->forceFlush = 0;
  p->speed = d.speed_mbps;
  p->port = 0;
  p->latency = 0;
  p->maxComms = kMaxComms;
  p->maxRecvs = cfg_.max_recvs;  // grouped receives, TCP and IB alike (core/core.h)
  p->netDeviceType = RR_NCCL_NET_DEVICE_HOST;
  p->netDeviceVersion = 0;
  p->vProps.ndevs = 1;
  p->vProps.devs[0] = dev;
  p->maxP2pBytes = kMaxMessageBytes;
  p->maxCollBytes = kMaxMessageBytes;
  p->maxMultiRequestSize = 1;
  p->railId = static_cast<int16_t>(dev);
  p->planeId = -1;
  return Status::Ok();
}

Status Plugin::Listen(int dev, void* handle, void** listen_comm) {
  if (listen_comm == nullptr) return Status::Internal("listen with a NULL comm pointer");
  *listen_comm = nullptr;
  if (handle == nullptr) return Status::Internal("listen with a NULL handle buffer");
  std::lock_guard<std::mutex> lk(mu_);
  RR_CHECK(CheckDev(dev));
  if (ib_ != nullptr) return IbListen(dev, handle, listen_comm);
  Nonce nonce;
  RR_CHECK(RandomNonce(&nonce));
  StampNonce(&nonce);  // the listener's process (duplex.h)
  Handle h;
  std::unique_ptr<Listener> l;
  RR_CHECK(transport_->Listen(dev, nonce, &h, &l));
  RR_CHECK(EncodeHandle(h, handle));
  ConnConfig lcfg = cfg_;
  lcfg.dev = dev;
  auto* lc = new ListenComm(lcfg, std::move(l));
  listens_.insert(lc);
  *listen_comm = lc;
  RR_INFO(log::kFlagNet, "listen on %s at %s", transport_->Device(dev).name.c_str(), h.addrs[0].addr.ToString().c_str());
  return Status::Ok();
}

Status Plugin::Connect(int dev, void* handle, void** send_comm) {
  if (send_comm == nullptr) return Status::Internal("connect with a NULL comm pointer");
  *send_comm = nullptr;
  if (handle == nullptr) return Status::Internal("connect with a NULL handle");
  Handle h;
  Status dec = DecodeHandle(handle, &h);
  if (!dec.ok()) return Status::InvalidArg("connect: " + dec.message());
  std::lock_guard<std::mutex> lk(mu_);
  RR_CHECK(CheckDev(dev));
  if (ib_ != nullptr) return IbConnect(dev, h, handle, send_comm);
  auto key = std::make_pair(static_cast<const void*>(handle), h.nonce);
  auto it = connecting_.find(key);
  if (it == connecting_.end()) {
    uint64_t conn_id = 0;
    RR_CHECK(NewConnId(&conn_id));  // the sender's process in the high 32 bits (duplex.h)
    it = connecting_.emplace(key, std::make_unique<SendComm>(cfg_, h.nonce, conn_id, PlanLinks(dev, h))).first;
  }
  bool ready = false;
  Status st = it->second->PollConnect(&ready);
  if (!st.ok()) {
    connecting_.erase(it);
    return st;
  }
  if (!ready) return Status::Ok();
  SendComm* sc = it->second.release();
  connecting_.erase(it);
  sends_.insert(sc);
  *send_comm = sc;
  return Status::Ok();
}

// Link 0 runs from NCCL's device to the listener's primary address; every other listener rail gets a
// standby link from the local device of the same rail index (rail-optimised fabrics: rail r reaches
// rail r), skipping rails this host lacks or already uses.
std::vector<LinkPlan> Plugin::PlanLinks(int dev, const Handle& h) const {
  std::vector<LinkPlan> plan;
  std::vector<bool> used(transport_->NumDevices(), false);
  for (size_t i = 0; i < h.addrs.size(); ++i) {
    int local = i == 0 ? dev : h.addrs[i].rail;
    if (local < 0 || local >= transport_->NumDevices() || used[local]) continue;
    if (transport_->Device(local).addr.family() != h.addrs[i].addr.family()) continue;
    used[local] = true;
    plan.push_back(LinkPlan{local, h.addrs[i].rail, h.addrs[i].addr});
  }
  return plan;
}

Status Plugin::Accept(void* listen_comm, void** recv_comm) {
  if (recv_comm == nullptr) return Status::Internal("accept with a NULL comm pointer");
  *recv_comm = nullptr;
  if (listen_comm != nullptr && *static_cast<const uint32_t*>(listen_comm) == kIbListenCommMagic) {
    std::lock_guard<std::mutex> lk(mu_);
    return IbAccept(listen_comm, recv_comm);
  }
  RR_CHECK(CheckObj<ListenComm>(listen_comm, kListenCommMagic, "listen comm"));
  std::lock_guard<std::mutex> lk(mu_);
  if (listens_.count(static_cast<ListenComm*>(listen_comm)) == 0) {
    return Status::Internal("accept on a listen comm that is closed or unknown");
  }
  std::unique_ptr<RecvComm> rc;
  RR_CHECK(static_cast<ListenComm*>(listen_comm)->Accept(&rc));
  if (!rc) return Status::Ok();
  recvs_.insert(rc.get());
  *recv_comm = rc.release();
  return Status::Ok();
}

Status Plugin::RegMr(void* comm, void* data, size_t size, int type, void** mhandle) {
  if (mhandle == nullptr) return Status::Internal("regMr with a NULL handle pointer");
  *mhandle = nullptr;
  if (comm == nullptr) return Status::Internal("regMr on a NULL comm");
  uint32_t m = Comm::PeekMagic(comm);
  if (!IsSend(m) && !IsRecv(m)) return Status::Internal("regMr on an object that is not a rerail comm");
  bool gpu = type == RR_NCCL_PTR_CUDA && staging::GpuBuffers::Get().offered();
  if (type != RR_NCCL_PTR_HOST && !gpu) {
    return Status::Internal("regMr type " + std::to_string(type) + ": rerail offers " +
                            (staging::GpuBuffers::Get().offered() ? "host and CUDA memory" : "host memory only") +
                            " (RERAIL_GPU_BUFFERS=1 and a working CUDA driver offer CUDA memory)");
  }
  if (data == nullptr && size > 0) return Status::Internal("regMr of NULL");
  void* ctx = nullptr;
  if (gpu) {
    RR_CHECK(staging::CudaDriver::Get().ContextFor(data, &ctx));
    staging::GpuBuffers::Get().Add(data, size, ctx);
  }
  auto mr = std::make_unique<MemReg>();
  mr->data = data;
  mr->size = size;
  mr->type = type;
#if RERAIL_WITH_IB
  if (m == kIbSendCommMagic || m == kIbRecvCommMagic) {
    ib::MrHandle* h = nullptr;
    RR_CHECK(ib_->mrs->Register(data, size, &h));  // takes the cache's own lock
    mr->ib = h;
  }
#endif
  std::lock_guard<std::mutex> lk(mu_);
  mrs_.insert(mr.get());
  *mhandle = mr.release();
  return Status::Ok();
}

Status Plugin::DeregMr(void* /*comm*/, void* mhandle) {
  if (mhandle == nullptr) return Status::Ok();
  std::lock_guard<std::mutex> lk(mu_);
  // Looked up, not dereferenced: a foreign or already freed handle is refused without touching it.
  if (mrs_.erase(mhandle) == 0) return Status::Internal("deregMr of a handle rerail did not create or already freed");
  FreeMemReg(static_cast<MemReg*>(mhandle), ib_);
  return Status::Ok();
}

Status Plugin::Isend(void* send_comm, void* data, size_t size, int tag, void* mhandle, void* phandle, void** request) {
  if (request == nullptr) return Status::Internal("isend with a NULL request pointer");
  *request = nullptr;
  const bool ib = send_comm != nullptr && Comm::PeekMagic(send_comm) == kIbSendCommMagic;
  if (!ib) RR_CHECK(CheckObj<Comm>(send_comm, kSendCommMagic, "send comm"));
  if (size > kMaxMessageBytes) return Status::Internal("isend of " + std::to_string(size) + " bytes exceeds maxP2pBytes");
  Request* r = nullptr;
  if (ib) {
#if RERAIL_WITH_IB
    // The data path never takes mu_: mhandle is what regMr returned (a MemReg while registered).
    auto* mh = mhandle != nullptr ? static_cast<ib::MrHandle*>(static_cast<MemReg*>(mhandle)->ib) : nullptr;
    RR_CHECK(static_cast<IbSendComm*>(send_comm)->Isend(data, size, tag, mh, phandle, &r));
#endif
  } else {
    RR_CHECK(static_cast<SendComm*>(send_comm)->Isend(data, size, tag, phandle, &r));
  }
  (void)mhandle;
  *request = r;
  return Status::Ok();
}

Status Plugin::Irecv(void* recv_comm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** phandles,
                     void** request) {
  if (request == nullptr) return Status::Internal("irecv with a NULL request pointer");
  *request = nullptr;  // the 0x1 optional-completion hint is ignored: every receive completes normally
  const bool ib = recv_comm != nullptr && Comm::PeekMagic(recv_comm) == kIbRecvCommMagic;
  if (!ib) RR_CHECK(CheckObj<Comm>(recv_comm, kRecvCommMagic, "recv comm"));
  const int max_recvs = cfg_.max_recvs;
  if (n < 1 || n > max_recvs) {
    return Status::Internal("irecv with n=" + std::to_string(n) + " but maxRecvs is " + std::to_string(max_recvs));
  }
  if (data == nullptr || sizes == nullptr) return Status::Internal("irecv with NULL data or sizes array");
  if (n > 1 && tags == nullptr) return Status::Internal("grouped irecv with a NULL tags array");
  static const int kNoTag = 0;  // n == 1 without a tags array (older NCCL ABIs)
  const int* t = tags != nullptr ? tags : &kNoTag;
  Request* r = nullptr;
  if (ib) {
#if RERAIL_WITH_IB
    ib::MrHandle* mhs[kMaxRecvs] = {};
    for (int k = 0; k < n; ++k) {
      void* mr = mhandles != nullptr ? mhandles[k] : nullptr;
      mhs[k] = mr != nullptr ? static_cast<ib::MrHandle*>(static_cast<MemReg*>(mr)->ib) : nullptr;
    }
    RR_CHECK(static_cast<IbRecvComm*>(recv_comm)->Irecv(n, data, sizes, t, mhs,
                                                        phandles != nullptr ? phandles[0] : nullptr, &r));
#endif
  } else {
    RR_CHECK(static_cast<RecvComm*>(recv_comm)->Irecv(n, data, sizes, t,
                                                      phandles != nullptr ? phandles[0] : nullptr, &r));
  }
  (void)mhandles;
  *request = r;
  return Status::Ok();
}

Status Plugin::Iflush(void* recv_comm, int /*n*/, void** request) {
  if (request == nullptr) return Status::Internal("iflush with a NULL request pointer");
  *request = nullptr;  // host memory: the data is visible as soon as the receive completed
  if (recv_comm != nullptr && Comm::PeekMagic(recv_comm) == kIbRecvCommMagic) return Status::Ok();
  return CheckObj<Comm>(recv_comm, kRecvCommMagic, "recv comm");
}

Status Plugin::Test(void* request, int* done, int* sizes) {
  if (done == nullptr) return Status::Internal("test with NULL done");
  *done = 0;
  auto* r = static_cast<Request*>(request);
  if (r == nullptr || r->magic != kRequestMagic || !r->comm->pool().Owns(r)) {
    return Status::Internal("test on a request rerail did not hand out");
  }
  // A TCP comm checks this under its drive mutex (RERAIL_TCP_DUPLEX: a send comm of this process may
  // be completing the comm's requests on another thread right now).
  const uint32_t m = r->comm->magic();
  if (m != kSendCommMagic && m != kRecvCommMagic && r->state == ReqState::kFree) {
    return Status::Internal("test on a request already reported done");
  }
  return r->comm->Test(r, done, sizes);
}

Status Plugin::CloseSend(void* send_comm) {
  if (send_comm != nullptr && Comm::PeekMagic(send_comm) == kIbSendCommMagic) {
    std::lock_guard<std::mutex> lk(mu_);
    auto* c = static_cast<Comm*>(send_comm);
    if (ib_sends_.erase(c) == 0) return Status::Internal("closeSend of an unknown or closed comm");
    delete c;
    return Status::Ok();
  }
  RR_CHECK(CheckObj<Comm>(send_comm, kSendCommMagic, "send comm"));
  std::lock_guard<std::mutex> lk(mu_);
  auto* c = static_cast<SendComm*>(send_comm);
  if (sends_.erase(c) == 0) return Status::Internal("closeSend of an unknown or closed comm");
  delete c;
  return Status::Ok();
}

Status Plugin::CloseRecv(void* recv_comm) {
  if (recv_comm != nullptr && Comm::PeekMagic(recv_comm) == kIbRecvCommMagic) {
    std::lock_guard<std::mutex> lk(mu_);
    auto* c = static_cast<Comm*>(recv_comm);
    if (ib_recvs_.erase(c) == 0) return Status::Internal("closeRecv of an unknown or closed comm");
    delete c;
    return Status::Ok();
  }
  RR_CHECK(CheckObj<Comm>(recv_comm, kRecvCommMagic, "recv comm"));
  std::lock_guard<std::mutex> lk(mu_);
  auto* c = static_cast<RecvComm*>(recv_comm);
  if (recvs_.erase(c) == 0) return Status::Internal("closeRecv of an unknown or closed comm");
  delete c;
  return Status::Ok();
}

Status Plugin::CloseListen(void* listen_comm) {
#if RERAIL_WITH_IB
  if (listen_comm != nullptr && *static_cast<const uint32_t*>(listen_comm) == kIbListenCommMagic) {
    std::lock_guard<std::mutex> lk(mu_);
    auto* c = static_cast<IbListenComm*>(listen_comm);
    if (ib_listens_.erase(c) == 0) return Status::Internal("closeListen of an unknown or closed comm");
    delete c;
    return Status::Ok();
  }
#endif
  RR_CHECK(CheckObj<ListenComm>(listen_comm, kListenCommMagic, "listen comm"));
  std::lock_guard<std::mutex> lk(mu_);
  auto* c = static_cast<ListenComm*>(listen_comm);
  if (listens_.erase(c) == 0) return Status::Internal("closeListen of an unknown or closed comm");
  delete c;
  return Status::Ok();
}

}  // namespace rr::net
