#include "profiler.h"

#include <strings.h>
#include <time.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <sstream>
#include <vector>

#include "collector.h"
#include "comm_output.h"
#include "rerail/clock.h"
#include "rerail/log.h"
#include "rerail/params.h"
#include "rerail/prof_net_event.h"
#include "rerail/version.h"
#include "safe_text.h"
#include "rerail/version.h"

namespace rr::prof {
namespace {

constexpr const char* kP = "PROFILER/rerail";
constexpr const char* kMaskWords =
    "group,coll,p2p,proxyop,proxystep,proxyctrl,kernelch,net,groupapi,collapi,"
    "p2papi,kernellaunch,cecoll,cesync,cebatch,all, or a number";
constexpr size_t kCollParentGroupOff = 80;  // coll.parentGroup (104) - union start (24)
constexpr size_t kP2pParentGroupOff = 40;   // p2p.parentGroup (64) - 24
constexpr size_t kNetDataOff = 8;           // netPlugin.data (32) - 24
constexpr size_t kMaxCommName = 256;

struct Global {
  std::mutex mu;
  int refs = 0;
  std::unique_ptr<Collector> collector;
  std::vector<std::unique_ptr<Context>> contexts;  // kept until exit: see profiler.h
  uint64_t t0_mono = 0;
  int64_t t0_unix = 0;
  uint64_t linger_ns = 500'000'000ull;
};
Global& G() {
  static Global* g = new Global();  // never destroyed: rings and late records may outlive statics
  return *g;
}
std::atomic<size_t> g_ring_cap{32768};

template <typename T>
T Load(const void* base, size_t off) {
  T v;
  std::memcpy(&v, static_cast<const char*>(base) + off, sizeof(v));
  return v;
}

std::atomic<uint64_t> g_net_rejects[kNetRejectKinds];

void CountReject(NetReject why) {
  g_net_rejects[static_cast<int>(why)].fetch_add(1, std::memory_order_relaxed);
}

// Copies a descriptor CheckNetDescr() accepted into a payload (zero-filled beyond what the emitter filled).
void CopyNet(unsigned char* payload, const void* data) {
  uint32_t size = Load<uint32_t>(data, offsetof(rrProfNetEvent_v1_t, size));
  size_t n = size < kPayloadBytes ? size : kPayloadBytes;
  std::memcpy(payload, data, n);
  if (n < kPayloadBytes) std::memset(payload + n, 0, kPayloadBytes - n);
}

Status EnsureDir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    return Status::InvalidUsage("RERAIL_PROFILE_DIR=" + dir + ": cannot create directory: " + ec.message());
  if (!std::filesystem::is_directory(dir, ec))
    return Status::InvalidUsage("RERAIL_PROFILE_DIR=" + dir + " is not a directory");
  return Status::Ok();
}

std::string MaskNames(int mask) {
  std::string s;
  for (int i = 0; i < 15; ++i)
    if (mask & (1 << i)) s += std::string(s.empty() ? "" : ",") + TypeName(1u << i);
  return s.empty() ? "none" : s;
}

// RERAIL_PROFILE_MASK and RERAIL_PROFILE_DIR, with the WARN lines bad values deserve.
Status ReadConfig(uint64_t comm_id, int* mask, std::string* dir) {
  Status st = Params::Load();
  if (!st.ok()) {
    RR_WARN_P(kP, "%s", st.message().c_str());
    return st;
  }
  std::string bad;
  *mask = ParseMask(Params::Str(ParamId::ProfileMask), &bad);
  if (!bad.empty())
    RR_WARN_P(kP, "RERAIL_PROFILE_MASK=%s: unknown event kind(s) '%s' ignored; accepted: %s",
              Params::Str(ParamId::ProfileMask).c_str(), bad.c_str(), kMaskWords);
  *dir = Params::Str(ParamId::ProfileDir).empty() ? "." : Params::Str(ParamId::ProfileDir);
  st = EnsureDir(*dir);
  if (!st.ok())
    RR_WARN_P(kP, "%s; profiling disabled for comm %llx", st.message().c_str(),
              static_cast<unsigned long long>(comm_id));
  return st;
}

}  // namespace

const char* NetRejectName(NetReject why) {
  switch (why) {
    case NetReject::kForeignId: return "foreign_id";
    case NetReject::kBadVersion: return "bad_version";
    case NetReject::kNullData: return "null_data";
    case NetReject::kBadMagic: return "bad_magic";
    case NetReject::kShortSize: return "short_size";
    case NetReject::kBadUpdate: return "bad_update";
  }
  return "unknown";
}

uint64_t NetRejectCount(NetReject why) {
  return g_net_rejects[static_cast<int>(why)].load(std::memory_order_relaxed);
}

bool CheckNetDescr(int64_t id, const void* data, NetReject* why) {
  auto u = static_cast<uint64_t>(id);
  NetReject r;
  if ((u & ~0xffffull) != RR_PROF_NET_TYPE_RERAIL)
    r = NetReject::kForeignId;  // another plugin's descriptor: its layout is unknown, never read it
  else if ((u & 0xffffu) != RR_PROF_NET_DESCR_VERSION)
    r = NetReject::kBadVersion;
  else if (data == nullptr)
    r = NetReject::kNullData;
  else if (Load<uint32_t>(data, offsetof(rrProfNetEvent_v1_t, magic)) != RR_PROF_NET_MAGIC)
    r = NetReject::kBadMagic;
  else if (Load<uint32_t>(data, offsetof(rrProfNetEvent_v1_t, size)) < sizeof(rrProfNetEvent_v1_t))
    r = NetReject::kShortSize;
  else
    return true;
  if (why != nullptr) *why = r;
  return false;
}

int ParseMask(const std::string& text, std::string* bad) {
  static const char* const kWords[] = {"group",     "coll",         "p2p",    "proxyop",  "proxystep",
                                       "proxyctrl", "kernelch",     "net",    "groupapi", "collapi",
                                       "p2papi",    "kernellaunch", "cecoll", "cesync",   "cebatch"};
  int mask = 0;
  std::stringstream ss(text);
  std::string w;
  while (std::getline(ss, w, ',')) {
    w.erase(0, w.find_first_not_of(" \t"));
    w.erase(w.find_last_not_of(" \t") + 1);
    if (w.empty()) continue;
    if (w[0] >= '0' && w[0] <= '9') {
      char* end = nullptr;
      long v = std::strtol(w.c_str(), &end, 0);
      if (*end == '\0' && v >= 0 && v < (1 << 15)) {
        mask |= static_cast<int>(v);
        continue;
      }
    }
    int bit = -1;
    for (int i = 0; i < 15; ++i)
      if (strcasecmp(w.c_str(), kWords[i]) == 0) bit = i;
    if (strcasecmp(w.c_str(), "netplugin") == 0) bit = 7;
    if (strcasecmp(w.c_str(), "all") == 0) {
      mask |= (1 << 15) - 1;
      continue;
    }
    if (bit < 0) {
      if (bad != nullptr) *bad += (bad->empty() ? "" : ",") + w;
      continue;
    }
    mask |= 1 << bit;
  }
  return mask;
}

Status Profiler::Init(Context** out, uint64_t comm_id, int* activation_mask, const char* comm_name,
                      int n_nodes, int n_ranks, int rank, rrProfLogger_t logfn, int abi_version) {
  if (out == nullptr || activation_mask == nullptr)
    return Status::Internal("profiler init: NULL context or mask");
  *out = nullptr;
  if (logfn != nullptr) log::SetLogger(reinterpret_cast<log::LoggerFn>(logfn));
  int mask = 0;
  std::string dir;
  Status st = ReadConfig(comm_id, &mask, &dir);
  if (!st.ok()) return st;

  Global& g = G();
  std::lock_guard<std::mutex> lock(g.mu);
  auto ctx = std::make_unique<Context>();
  ctx->comm_id = comm_id;
  ctx->comm_name = SafeUtf8(comm_name, kMaxCommName);
  ctx->rank = rank;
  ctx->n_ranks = n_ranks;
  ctx->n_nodes = n_nodes;
  ctx->visible_mask = mask;
  ctx->abi_version = abi_version;
  if (g.refs == 0) {
    g.t0_mono = NowNs();
    timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    g.t0_unix = static_cast<int64_t>(ts.tv_sec) * 1000000000ll + ts.tv_nsec;
    g_ring_cap.store(static_cast<size_t>(Params::Int(ParamId::ProfileRing)), std::memory_order_relaxed);
  }
  ctx->out = std::make_unique<CommOutput>(ctx.get(), dir, g.t0_mono, g.t0_unix);
  st = ctx->out->Open();
  if (!st.ok()) {
    RR_WARN_P(kP, "%s; profiling disabled for comm %llx", st.message().c_str(),
              static_cast<unsigned long long>(comm_id));
    return Status::InvalidUsage(st.message());
  }
  if (g.refs++ == 0) {
    g.collector = std::make_unique<Collector>(g.linger_ns);
    g.collector->Start();
  }
  g.collector->Add(ctx.get());
  RR_INFO_P(kP, log::kFlagInit,
            "rerail %s profiler ABI v%d: rank %d/%d comm %llx '%s', recording %s, output %s",
            rr::Version(), abi_version, rank, n_ranks,
            static_cast<unsigned long long>(comm_id), ctx->comm_name.c_str(), MaskNames(mask).c_str(),
            ctx->out->trace_path().c_str());
  *activation_mask = mask;
  *out = ctx.get();
  g.contexts.push_back(std::move(ctx));
  return Status::Ok();
}

void Profiler::Start(Context* ctx, void** handle, uint64_t type, void* parent, const void* u) {
  if (handle == nullptr) return;
  *handle = nullptr;
  const int ti = TypeIndex(type);
  if (ctx == nullptr || u == nullptr || ti < 0) return;
  bool rerail_net = false;
  const void* net_data = nullptr;
  if (type == RR_PROF_NET_PLUGIN) {
    net_data = Load<const void*>(u, kNetDataOff);
    NetReject why;
    rerail_net = CheckNetDescr(Load<int64_t>(u, 0), net_data, &why);
    if (!rerail_net) CountReject(why);  // recorded as an opaque NetPlugin event (id only)
  }
  if (type == RR_PROF_COLL || type == RR_PROF_P2P) {
    // Structural parent is the Group (v5 puts the CollApi/P2pApi event in parentObj).
    void* group = Load<void*>(u, type == RR_PROF_COLL ? kCollParentGroupOff : kP2pParentGroupOff);
    if (group != nullptr) parent = group;
  }
  Ring* ring = ThreadRing(g_ring_cap.load(std::memory_order_relaxed));
  const uint64_t id = ring->NextId(ti, rerail_net);
  *handle = reinterpret_cast<void*>(id);
  Record* rec = ring->Claim();
  if (rec == nullptr) return;  // ring full: counted; the handle still works (its stop becomes an orphan)
  rec->ts = NowNs();
  rec->id = id;
  rec->parent = reinterpret_cast<uint64_t>(parent);
  rec->ctx = ctx;
  rec->type = static_cast<uint32_t>(type);
  rec->op = RecOp::kBegin;
  if (rerail_net)
    CopyNet(rec->payload, net_data);
  else
    std::memcpy(rec->payload, u, kPayloadBytes);
  ring->Publish();
}

void Profiler::Stop(void* handle) {
  if (handle == nullptr) return;
  Ring* ring = ThreadRing(g_ring_cap.load(std::memory_order_relaxed));
  Record* rec = ring->Claim();
  if (rec == nullptr) return;
  rec->ts = NowNs();
  rec->id = reinterpret_cast<uint64_t>(handle);
  rec->op = RecOp::kEnd;
  ring->Publish();
}

void Profiler::State(void* handle, int state, const rrProfEventStateArgs_v5_t* args) {
  if (handle == nullptr) return;
  const uint64_t id = reinterpret_cast<uint64_t>(handle);
  const bool net_update = handle::IsRerailNet(id) && state == RR_PROF_STATE_NET_PLUGIN_UPDATE;
  if (net_update && (args == nullptr || !CheckNetDescr(RR_PROF_NET_PLUGIN_ID, args->netPlugin.data, nullptr))) {
    CountReject(NetReject::kBadUpdate);  // the event keeps its last valid descriptor
    return;
  }
  Ring* ring = ThreadRing(g_ring_cap.load(std::memory_order_relaxed));
  Record* rec = ring->Claim();
  if (rec == nullptr) return;
  rec->ts = NowNs();
  rec->id = id;
  rec->op = RecOp::kState;
  rec->state = static_cast<uint16_t>(state);
  if (net_update)
    CopyNet(rec->payload, args->netPlugin.data);
  else if (args != nullptr)
    std::memcpy(rec->payload, args, sizeof(*args));
  else
    std::memset(rec->payload, 0, sizeof(*args));
  ring->Publish();
}

Status Profiler::Finalize(Context* ctx) {
  if (ctx == nullptr) return Status::Internal("profiler finalize: NULL context");
  Global& g = G();
  Collector* c = nullptr;
  {
    std::lock_guard<std::mutex> lock(g.mu);
    c = g.collector.get();
  }
  if (c == nullptr || ctx->closed.load())
    return Status::Internal("profiler finalize: context already finalized");
  if (!c->Close(ctx, kFinalizeTimeoutMs))
    RR_WARN_P(kP, "rank %d comm %llx: profile not fully written within %llu ms", ctx->rank,
              static_cast<unsigned long long>(ctx->comm_id),
              static_cast<unsigned long long>(kFinalizeTimeoutMs));
  std::lock_guard<std::mutex> lock(g.mu);
  if (--g.refs == 0) {
    g.collector->Stop();
    g.collector.reset();
  }
  return Status::Ok();
}

void Profiler::SetLingerForTesting(uint64_t ns) {
  std::lock_guard<std::mutex> lock(G().mu);
  G().linger_ns = ns;
}

}  // namespace rr::prof
