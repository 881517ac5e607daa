#include "comm.h"

#include <sched.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "rerail/clock.h"
#include "rerail/log.h"

namespace rr::perf {
namespace {

std::mutex g_warn_mu;
std::vector<PluginWarning> g_warnings;  // guarded by g_warn_mu
char g_rank_prefix[32] = "rank ?";

// The plugin's logger (ncclDebugLogger_t): printed through rr::log with the rank as prefix.
void PluginLog(int level, unsigned long flags, const char* file, int line, const char* fmt, ...) {
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  if (level == static_cast<int>(log::Level::kWarn)) {
    std::lock_guard<std::mutex> lk(g_warn_mu);
    g_warnings.push_back({NowNs(), msg});
  }
  if (!log::Enabled(static_cast<log::Level>(level))) return;
  log::WriteP(g_rank_prefix, static_cast<log::Level>(level), flags, file, line, "%s", msg);
}

// NCCL always hands a profiler callback to init; this one creates no event (no --profiler).
rrNcclResult_t NoProfiler(void** eHandle, int, void*, int64_t, void*) {
  if (eHandle) *eHandle = nullptr;
  return rrNcclSuccess;
}

struct HandleRec {
  int32_t src;  // the sending rank this listen is for
  int32_t channel;
  int32_t p2p;
  int32_t pad;
  char handle[RR_NCCL_NET_HANDLE_MAXSIZE];
};

std::string KeyName(const ConnKey& k) {
  return std::string(k.p2p ? "p2p " : "ring ") + (k.send ? "send to rank " : "recv from rank ") +
         std::to_string(k.peer) + " channel " + std::to_string(k.channel);
}

Status PluginError(const char* call, const ConnKey& k, rrNcclResult_t rc) {
  return Status(static_cast<Code>(rc), std::string(call) + " (" + KeyName(k) + ") returned " + netdrv::ResultName(rc));
}

}  // namespace

void Comm::SetLogRank(int rank) { snprintf(g_rank_prefix, sizeof(g_rank_prefix), "rank %d", rank); }

std::vector<PluginWarning> Comm::PluginWarnings() {
  std::lock_guard<std::mutex> lk(g_warn_mu);
  return g_warnings;
}

Comm::~Comm() {
  conns_.clear();  // closes every connection before finalize
  if (inited_) {
    rrNcclResult_t rc = net_->Finalize(ctx_);
    if (rc != rrNcclSuccess) RR_WARN("plugin finalize returned %s", netdrv::ResultName(rc));
  }
}

Conn* Comm::Find(const ConnKey& k) const {
  auto it = conns_.find(k);
  return it == conns_.end() ? nullptr : it->second.get();
}

uint64_t Comm::CommId(int nranks) { return 0x72657261696c7066ull ^ static_cast<uint64_t>(nranks); }

Status Comm::Setup(const std::string& plugin_path, Oob* oob, const std::vector<ConnKey>& keys, int timeout_ms,
                   rrNcclProfilerCallback_t prof, std::unique_ptr<Comm>* out) {
  std::unique_ptr<Comm> c(new Comm());
  std::string err;
  c->net_ = netdrv::NetPlugin::Open(plugin_path, &err);
  if (!c->net_) return Status::InvalidUsage(err);
  // Every rank must pass the same commId (NCCL passes the comm hash).
  rrNcclResult_t rc = c->net_->Init(&c->ctx_, CommId(oob->Size()), &PluginLog, prof ? prof : &NoProfiler);
  if (rc != rrNcclSuccess)
    return Status(static_cast<Code>(rc), "plugin '" + c->net_->Path() + "' init returned " + netdrv::ResultName(rc));
  c->inited_ = true;
  rc = c->net_->Devices(&c->ndev_);
  if (rc != rrNcclSuccess || c->ndev_ < 1)
    return Status::InvalidUsage("plugin '" + c->net_->Path() + "' reports no devices (" + netdrv::ResultName(rc) + ")");
  for (int d = 0; d < c->ndev_; ++d) {
    rrNcclNetProperties_v12_t props;
    rc = c->net_->GetProperties(d, &props);
    if (rc != rrNcclSuccess) return Status(static_cast<Code>(rc), "getProperties(" + std::to_string(d) + ") failed");
    c->dev_names_.push_back(props.name ? props.name : ("dev" + std::to_string(d)));
  }
  RR_CHECK(c->Connect(oob, keys, timeout_ms));
  *out = std::move(c);
  return Status::Ok();
}

Status Comm::Connect(Oob* oob, const std::vector<ConnKey>& keys, int timeout_ms) {
  my_rank_ = oob->Rank();
  // 1. Listen for every receiving connection and publish the handles.
  std::vector<HandleRec> mine;
  std::vector<std::pair<ConnKey, void*>> pending;  // recv: listenComm; send: filled below
  for (const ConnKey& k : keys) {
    if (k.send) continue;
    HandleRec rec{};
    rec.src = k.peer, rec.channel = k.channel, rec.p2p = k.p2p;
    void* lc = nullptr;
    rrNcclResult_t rc = net_->Listen(ctx_, DevOf(k.channel), rec.handle, &lc);
    if (rc != rrNcclSuccess || lc == nullptr) return PluginError("listen", k, rc == rrNcclSuccess ? rrNcclInternalError : rc);
    mine.push_back(rec);
    pending.push_back({k, lc});
  }
  std::vector<std::string> all;
  RR_CHECK(oob->AllGather(std::string(reinterpret_cast<const char*>(mine.data()), mine.size() * sizeof(HandleRec)), &all));
  // 2. Find the handle each sending connection needs (published by its peer for us).
  handles_.clear();
  for (const ConnKey& k : keys) {
    if (!k.send) continue;
    const std::string& blob = all[k.peer];
    const HandleRec* recs = reinterpret_cast<const HandleRec*>(blob.data());
    const HandleRec* found = nullptr;
    for (size_t i = 0; i < blob.size() / sizeof(HandleRec); ++i)
      if (recs[i].src == oob->Rank() && recs[i].channel == k.channel && recs[i].p2p == (k.p2p ? 1 : 0)) found = &recs[i];
    if (found == nullptr) return Status::Internal("no listen handle published for " + KeyName(k));
    handles_.push_back(std::make_unique<std::string>(found->handle, sizeof(found->handle)));
    pending.push_back({k, handles_.back()->data()});
  }
  return Poll(&pending, timeout_ms);
}

// 3. connect()/accept() until every connection is up (NULL comm = not yet, call again).
Status Comm::Poll(std::vector<std::pair<ConnKey, void*>>* pending, int timeout_ms) {
  Deadline dl = Deadline::AfterMs(static_cast<uint64_t>(timeout_ms));
  while (!pending->empty()) {
    for (size_t i = 0; i < pending->size();) {
      const ConnKey& k = (*pending)[i].first;
      void* comm = nullptr;
      rrNcclResult_t rc;
      if (k.send) {
        rc = net_->Connect(ctx_, DevOf(k.channel), (*pending)[i].second, &comm);
        if (rc != rrNcclSuccess) return PluginError("connect", k, rc);
      } else {
        rc = net_->Accept((*pending)[i].second, &comm);
        if (rc != rrNcclSuccess) return PluginError("accept", k, rc);
        if (comm != nullptr && (rc = net_->CloseListen((*pending)[i].second)) != rrNcclSuccess)
          return PluginError("closeListen", k, rc);
      }
      if (comm == nullptr) {
        ++i;
        continue;
      }
      size_t step = k.p2p ? kP2pStepBytes : kRingStepBytes;
      auto conn = std::make_unique<Conn>(net_.get(), k.send, my_rank_, k.peer, k.channel, DevOf(k.channel), step);
      conns_[k] = std::move(conn);
      RR_CHECK(conns_[k]->Attach(comm));
      pending->erase(pending->begin() + static_cast<long>(i));
    }
    if (pending->empty()) break;
    if (dl.Expired())
      return Status::Remote("connection setup timed out after " + std::to_string(timeout_ms) + " ms; still waiting for " +
                            KeyName(pending->front().first));
    sched_yield();
  }
  return Status::Ok();
}

}  // namespace rr::perf
