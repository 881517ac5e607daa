#include "nccl_emu.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "rerail/log.h"

namespace rr::prof {
namespace {

constexpr const char* kP = "PROFILER/emu";

using StopFn = rrProfResult_t (*)(void*);
using RecordFn = rrProfResult_t (*)(void*, int, rrProfEventStateArgs_v5_t*);
// NCCL keeps one process-wide profiler table; the net callback's stop/update use it the same way.
std::atomic<StopFn> g_stop{nullptr};
std::atomic<RecordFn> g_record{nullptr};

// The logger handed to the profiler: forwards its (already prefixed) lines into this process's rr::log,
// so tools print them and tests can capture them.
void EmuLogger(int level, unsigned long flags, const char* file, int line, const char* fmt, ...) {
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  if (level == static_cast<int>(log::Level::kTrace) && !log::Enabled(log::Level::kTrace)) return;
  log::WriteP("NCCL-emu", static_cast<log::Level>(level), flags, file, line, "%s", msg);
}

// NCCL's gating (src/plugin/profiler.cc): an event is started when its own bit or a descendant's is set.
constexpr int kGroupNeeds = RR_PROF_GROUP | RR_PROF_COLL | RR_PROF_P2P | RR_PROF_PROXY_OP |
                            RR_PROF_PROXY_STEP | RR_PROF_KERNEL_CH | RR_PROF_NET_PLUGIN;
constexpr int kCollNeeds =
    RR_PROF_COLL | RR_PROF_PROXY_OP | RR_PROF_PROXY_STEP | RR_PROF_KERNEL_CH | RR_PROF_NET_PLUGIN;
constexpr int kP2pNeeds =
    RR_PROF_P2P | RR_PROF_PROXY_OP | RR_PROF_PROXY_STEP | RR_PROF_KERNEL_CH | RR_PROF_NET_PLUGIN;
constexpr int kOpNeeds = RR_PROF_PROXY_OP | RR_PROF_PROXY_STEP | RR_PROF_NET_PLUGIN;
constexpr int kStepNeeds = RR_PROF_PROXY_STEP | RR_PROF_NET_PLUGIN;

rrProfEventDescr_v5_t Descr(uint64_t type, void* parent, int rank) {
  rrProfEventDescr_v5_t d;
  std::memset(&d, 0, sizeof(d));
  d.type = type;
  d.parentObj = parent;
  d.rank = rank;
  return d;
}

}  // namespace

Status NcclEmu::Open(const std::string& path, const CommInfo& comm, std::unique_ptr<NcclEmu>* out,
                     int version) {
  std::unique_ptr<NcclEmu> emu(new NcclEmu());
  emu->lib_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (emu->lib_ == nullptr) return Status(Code::kSystemError, "dlopen(" + path + "): " + dlerror());
  if (version == 0 || version == 6)
    emu->v6_ = static_cast<const rrProfiler_v6_t*>(dlsym(emu->lib_, "ncclProfiler_v6"));
  if (emu->v6_ == nullptr && (version == 0 || version == 5))
    emu->v5_ = static_cast<const rrProfiler_v5_t*>(dlsym(emu->lib_, "ncclProfiler_v5"));
  if (emu->v6_ == nullptr && emu->v5_ == nullptr)
    return Status::InvalidUsage(path + " exports no ncclProfiler_v" +
                                (version ? std::to_string(version) : "6/_v5"));
  emu->version_ = emu->v6_ != nullptr ? 6 : 5;
  emu->rank_ = comm.rank;
  int rc;
  if (emu->v6_ != nullptr) {
    emu->name_ = emu->v6_->name;
    rc = emu->v6_->init(&emu->ctx_, comm.comm_id, &emu->mask_, comm.name.c_str(), comm.n_nodes, comm.n_ranks,
                        comm.rank, EmuLogger);
    g_stop.store(emu->v6_->stopEvent);
    g_record.store(emu->v6_->recordEventState);
  } else {
    emu->name_ = emu->v5_->name;
    rc = emu->v5_->init(&emu->ctx_, comm.comm_id, &emu->mask_, comm.name.c_str(), comm.n_nodes, comm.n_ranks,
                        comm.rank, EmuLogger);
    g_stop.store(emu->v5_->stopEvent);
    g_record.store(emu->v5_->recordEventState);
  }
  if (rc != 0) {
    emu->mask_ = 0;  // NCCL runs the comm without the profiler
    return Status(static_cast<Code>(rc), std::string("profiler ") + emu->name_ + " init failed for comm");
  }
  emu->finalized_ = false;
  RR_INFO_P(kP, log::kFlagInit, "loaded %s (ncclProfiler_v%d '%s'), activation mask 0x%x", path.c_str(),
            emu->version_, emu->name_, emu->mask_);
  *out = std::move(emu);
  return Status::Ok();
}

NcclEmu::~NcclEmu() {
  Finalize().ok();
  // NCCL dlcloses the profiler after the last comm; keeping it loaded avoids unloading a library whose
  // threads (and thread-local destructors) may still be winding down in the caller's process.
}

Status NcclEmu::Finalize() {
  if (finalized_) return Status::Ok();
  finalized_ = true;
  int rc = v6_ != nullptr ? v6_->finalize(ctx_) : v5_->finalize(ctx_);
  if (rc != 0) return Status(static_cast<Code>(rc), std::string("profiler ") + name_ + " finalize failed");
  return Status::Ok();
}

void* NcclEmu::Start(rrProfEventDescr_v5_t* d) {
  if (finalized_) return nullptr;
  void* h = nullptr;
  if (v6_ != nullptr) {
    rrProfEventDescr_v6_t d6;
    static_assert(sizeof(d6) == sizeof(*d), "v5 and v6 descriptors share their size and v5 members");
    std::memcpy(&d6, d, sizeof(d6));
    v6_->startEvent(ctx_, &h, &d6);
  } else {
    v5_->startEvent(ctx_, &h, d);
  }
  return h;
}

void NcclEmu::Record(void* handle, int state, rrProfEventStateArgs_v5_t* args) {
  if (handle == nullptr || finalized_) return;
  if (v6_ != nullptr)
    v6_->recordEventState(handle, state, args);
  else
    v5_->recordEventState(handle, state, args);
}

void NcclEmu::Stop(void* handle) {
  if (handle == nullptr || finalized_) return;
  if (v6_ != nullptr)
    v6_->stopEvent(handle);
  else
    v5_->stopEvent(handle);
}

void* NcclEmu::StartGroup() {
  if (!(mask_ & kGroupNeeds)) return nullptr;
  rrProfEventDescr_v5_t d = Descr(RR_PROF_GROUP, nullptr, rank_);
  return Start(&d);
}

void* NcclEmu::StartColl(void* group, const CollInfo& c) {
  if (!(mask_ & kCollNeeds)) return nullptr;
  rrProfEventDescr_v5_t d = Descr(RR_PROF_COLL, nullptr, rank_);  // parentObj = CollApi event (not emulated)
  d.coll.parentGroup = group;
  d.coll.seqNumber = c.seq != UINT64_MAX ? c.seq : seq_.fetch_add(1);
  d.coll.func = c.func;
  d.coll.count = c.count;
  d.coll.root = c.root;
  d.coll.datatype = c.datatype;
  d.coll.nChannels = static_cast<uint8_t>(c.n_channels);
  d.coll.nWarps = 16;
  d.coll.algo = c.algo;
  d.coll.proto = c.proto;
  return Start(&d);
}

void* NcclEmu::StartP2p(void* group, const char* func, int peer, size_t count, const char* datatype,
                        int n_channels) {
  if (!(mask_ & kP2pNeeds)) return nullptr;
  rrProfEventDescr_v5_t d = Descr(RR_PROF_P2P, nullptr, rank_);
  d.p2p.parentGroup = group;
  d.p2p.func = func;
  d.p2p.peer = peer;
  d.p2p.count = count;
  d.p2p.datatype = datatype;
  d.p2p.nChannels = static_cast<uint8_t>(n_channels);
  return Start(&d);
}

void* NcclEmu::StartProxyOp(void* task, int channel, int peer, int n_steps, int chunk_size, bool is_send) {
  if (!(mask_ & kOpNeeds)) return nullptr;
  rrProfEventDescr_v5_t d = Descr(RR_PROF_PROXY_OP, task, rank_);
  d.proxyOp.pid = getpid();
  d.proxyOp.channelId = static_cast<uint8_t>(channel);
  d.proxyOp.peer = peer;
  d.proxyOp.nSteps = n_steps;
  d.proxyOp.chunkSize = chunk_size;
  d.proxyOp.isSend = is_send ? 1 : 0;
  return Start(&d);
}

void NcclEmu::StartProxyStep(ProxyStep* slot, void* op, int step) {
  if (slot == nullptr) return;
  slot->emu = this;
  slot->event = nullptr;
  if (!(mask_ & kStepNeeds)) return;
  rrProfEventDescr_v5_t d = Descr(RR_PROF_PROXY_STEP, op, rank_);
  d.proxyStep.step = step;
  slot->event = Start(&d);
}

void NcclEmu::StopProxyStep(ProxyStep* slot) {
  if (slot == nullptr || slot->event == nullptr) return;
  Stop(slot->event);
  slot->event = nullptr;
}

void NcclEmu::StepState(ProxyStep* slot, int state, size_t trans_size) {
  if (slot == nullptr) return;
  rrProfEventStateArgs_v5_t a;
  std::memset(&a, 0, sizeof(a));
  a.proxyStep.transSize = trans_size;
  Record(slot->event, state, &a);
}

void* NcclEmu::StartKernelCh(void* task, int channel, uint64_t start_timer) {
  if (!(mask_ & RR_PROF_KERNEL_CH)) return nullptr;
  rrProfEventDescr_v5_t d = Descr(RR_PROF_KERNEL_CH, task, rank_);
  d.kernelCh.channelId = static_cast<uint8_t>(channel);
  d.kernelCh.pTimer = start_timer;
  return Start(&d);
}

void NcclEmu::StopKernelCh(void* handle, uint64_t stop_timer) {
  if (handle == nullptr) return;
  rrProfEventStateArgs_v5_t a;
  std::memset(&a, 0, sizeof(a));
  a.kernelCh.pTimer = stop_timer;
  Record(handle, RR_PROF_STATE_KERNEL_CH_STOP, &a);
  Stop(handle);
}

void* NcclEmu::StartProxyCtrl() {
  if (!(mask_ & RR_PROF_PROXY_CTRL)) return nullptr;
  rrProfEventDescr_v5_t d = Descr(RR_PROF_PROXY_CTRL, nullptr, rank_);
  return Start(&d);
}

void NcclEmu::ProxyCtrlState(void* handle, int state, int appended_ops) {
  rrProfEventStateArgs_v5_t a;
  std::memset(&a, 0, sizeof(a));
  a.proxyCtrl.appendedProxyOps = appended_ops;
  Record(handle, state, &a);
}

rrProfNetCallback_t NcclEmu::NetCallback() {
  return &NcclEmu::Callback;
}

int NcclEmu::Callback(void** eHandle, int type, void* pHandle, int64_t pluginId, void* extData) {
  if (eHandle == nullptr) return static_cast<int>(Code::kInvalidArgument);
  if (type == 0) {
    if (pHandle == nullptr) {
      RR_WARN_P(kP, "net plugin started an event with a NULL phandle (NCCL would crash here)");
      return static_cast<int>(Code::kInvalidArgument);
    }
    auto* slot = static_cast<ProxyStep*>(pHandle);
    NcclEmu* emu = slot->emu;
    if (emu == nullptr || !(emu->mask_ & RR_PROF_NET_PLUGIN)) return 0;
    rrProfEventDescr_v5_t d = Descr(RR_PROF_NET_PLUGIN, slot->event, emu->rank_);
    d.netPlugin.id = pluginId;
    d.netPlugin.data = extData;
    *eHandle = emu->Start(&d);
    return 0;
  }
  StopFn stop = g_stop.load();
  RecordFn record = g_record.load();
  if (stop == nullptr || *eHandle == nullptr) return 0;
  if (type == 2 || type == 3) {
    rrProfEventStateArgs_v5_t a;
    std::memset(&a, 0, sizeof(a));
    a.netPlugin.data = extData;
    record(*eHandle, RR_PROF_STATE_NET_PLUGIN_UPDATE, &a);
  }
  if (type == 1 || type == 3) stop(*eHandle);
  return 0;
}

}  // namespace rr::prof
