#include "proxy_driver.h"

#include <sched.h>

#include <cstdarg>
#include <cstdio>
#include <mutex>

#include "rerail/clock.h"

namespace rr::netbench {
namespace {

std::mutex g_log_mu;
std::vector<LogLine> g_lines;  // guarded by g_log_mu
bool g_echo = false;           // guarded by g_log_mu

void CaptureLogger(int level, unsigned long /*flags*/, const char* file, int line, const char* fmt, ...) {
  char buf[4096];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  std::lock_guard<std::mutex> lk(g_log_mu);
  g_lines.push_back({level, buf});
  // Lines are kept for assertions; echo only when asked so expected warnings stay quiet.
  if (g_echo) std::fprintf(stderr, "[plugin %s:%d] L%d %s\n", file ? file : "?", line, level, buf);
}

}  // namespace

rrNcclDebugLogger_t LogCapture::Logger() {
  return &CaptureLogger;
}

std::vector<LogLine> LogCapture::Take() {
  std::lock_guard<std::mutex> lk(g_log_mu);
  std::vector<LogLine> out;
  out.swap(g_lines);
  return out;
}

std::vector<LogLine> LogCapture::Snapshot() {
  std::lock_guard<std::mutex> lk(g_log_mu);
  return g_lines;
}

void LogCapture::SetEcho(bool on) {
  std::lock_guard<std::mutex> lk(g_log_mu);
  g_echo = on;
}

bool LogCapture::HasWarn(const std::vector<std::string>& words) {
  std::lock_guard<std::mutex> lk(g_log_mu);
  for (const auto& l : g_lines) {
    if (l.level != 2) continue;
    bool all = true;
    for (const auto& w : words) all = all && l.text.find(w) != std::string::npos;
    if (all) return true;
  }
  return false;
}

Status FromNccl(rrNcclResult_t r, const std::string& what) {
  if (r == rrNcclSuccess) return Status::Ok();
  return Status(static_cast<Code>(r), what + ": " + netdrv::ResultName(r));
}

Status Endpoint::Open(const std::string& plugin, int dev, std::unique_ptr<Endpoint>* out) {
  std::unique_ptr<Endpoint> ep(new Endpoint());
  std::string err;
  ep->net_ = netdrv::NetPlugin::Open(plugin, &err);
  if (!ep->net_) return Status::InvalidUsage(err);
  RR_CHECK(FromNccl(ep->net_->Init(&ep->ctx_, 0x7e4a11c0ffee0001ull, LogCapture::Logger(), nullptr), "init"));
  ep->finalized_ = false;
  RR_CHECK(FromNccl(ep->net_->Devices(&ep->ndev_), "devices"));
  if (ep->ndev_ < 1 || dev >= ep->ndev_)
    return Status::InvalidUsage("plugin reports " + std::to_string(ep->ndev_) + " devices; need device " +
                                std::to_string(dev));
  ep->dev_ = dev;
  *out = std::move(ep);
  return Status::Ok();
}

Endpoint::~Endpoint() {
  if (!finalized_) (void)Finalize();
}

Status Endpoint::Finalize() {
  if (finalized_) return Status::Ok();
  finalized_ = true;
  return FromNccl(net_->Finalize(ctx_), "finalize");
}

Status Endpoint::Listen(Handle* handle, void** listen_comm) {
  handle->fill(0);
  *listen_comm = nullptr;
  RR_CHECK(FromNccl(net_->Listen(ctx_, dev_, handle->data(), listen_comm), "listen"));
  if (*listen_comm == nullptr) return Status::Internal("listen returned success but no listenComm");
  return Status::Ok();
}

Status Endpoint::SelfConnect(void** send_comm, void** recv_comm, uint64_t timeout_ms) {
  Handle h;
  void* lc = nullptr;
  RR_CHECK(Listen(&h, &lc));
  *send_comm = *recv_comm = nullptr;
  Deadline dl = Deadline::AfterMs(timeout_ms);
  while (*send_comm == nullptr || *recv_comm == nullptr) {
    if (*send_comm == nullptr) RR_CHECK(FromNccl(net_->Connect(ctx_, dev_, h.data(), send_comm), "connect"));
    if (*recv_comm == nullptr) RR_CHECK(FromNccl(net_->Accept(lc, recv_comm), "accept"));
    if (dl.Expired()) return Status::Internal("self-connection timed out");
  }
  return FromNccl(net_->CloseListen(lc), "closeListen");
}

Status Endpoint::Connect(const Handle& handle, void** send_comm, uint64_t timeout_ms) {
  std::vector<void*> comms;
  RR_CHECK(ConnectAll({handle}, &comms, timeout_ms));
  *send_comm = comms[0];
  return Status::Ok();
}

Status Endpoint::Accept(void* listen_comm, void** recv_comm, uint64_t timeout_ms) {
  std::vector<void*> comms;
  RR_CHECK(AcceptAll({listen_comm}, &comms, timeout_ms));
  *recv_comm = comms[0];
  return Status::Ok();
}

Status Endpoint::ConnectAll(const std::vector<Handle>& handles, std::vector<void*>* send_comms,
                            uint64_t timeout_ms) {
  send_comms->assign(handles.size(), nullptr);
  std::vector<Handle> hs = handles;  // NCCL passes its own copy of the peer's handle, writable
  size_t left = hs.size();
  Deadline dl = Deadline::AfterMs(timeout_ms);
  while (left > 0) {
    for (size_t i = 0; i < hs.size(); ++i) {
      if ((*send_comms)[i] != nullptr) continue;
      rrNcclResult_t r = net_->Connect(ctx_, dev_, hs[i].data(), &(*send_comms)[i]);
      if (r != rrNcclSuccess) {
        if ((*send_comms)[i] != nullptr) (void)net_->CloseSend((*send_comms)[i]);
        (*send_comms)[i] = nullptr;
        return FromNccl(r, "connect #" + std::to_string(i));
      }
      if ((*send_comms)[i] != nullptr) --left;
    }
    if (left > 0 && dl.Expired())
      return Status::Internal("connect timed out after " + std::to_string(timeout_ms) + " ms (" +
                              std::to_string(left) + " of " + std::to_string(hs.size()) + " pending)");
    if (left > 0) sched_yield();
  }
  return Status::Ok();
}

Status Endpoint::AcceptAll(const std::vector<void*>& listen_comms, std::vector<void*>* recv_comms,
                           uint64_t timeout_ms) {
  recv_comms->assign(listen_comms.size(), nullptr);
  std::vector<bool> closed(listen_comms.size(), false);
  size_t left = listen_comms.size();
  Deadline dl = Deadline::AfterMs(timeout_ms);
  Status st;
  while (left > 0 && st.ok()) {
    for (size_t i = 0; i < listen_comms.size() && st.ok(); ++i) {
      if (closed[i]) continue;
      rrNcclResult_t r = net_->Accept(listen_comms[i], &(*recv_comms)[i]);
      if (r != rrNcclSuccess) st = FromNccl(r, "accept #" + std::to_string(i));
      if ((*recv_comms)[i] != nullptr) {
        closed[i] = true, --left;
        RR_CHECK(FromNccl(net_->CloseListen(listen_comms[i]), "closeListen"));
      }
    }
    if (st.ok() && left > 0 && dl.Expired())
      st =
          Status::Internal("accept timed out after " + std::to_string(timeout_ms) + " ms (" +
                           std::to_string(left) + " of " + std::to_string(listen_comms.size()) + " pending)");
    if (left > 0) sched_yield();
  }
  for (size_t i = 0; i < listen_comms.size(); ++i)
    if (!closed[i]) (void)net_->CloseListen(listen_comms[i]);
  return st;
}

Status ReqQueue::Post(void* data, size_t size, int tag, void* mhandle, uint64_t msg, bool* posted,
                      void* preset) {
  *posted = false;
  if (full()) return Status::Ok();
  void* req = preset;
  rrNcclResult_t r;
  if (send_) {
    req = nullptr;
    r = net_->Isend(comm_, data, size, tag, mhandle, nullptr, &req);
  } else {
    size_t cap = size;
    void* mh = mhandle;
    r = net_->Irecv(comm_, 1, &data, &cap, &tag, &mh, nullptr, &req);
  }
  if (r != rrNcclSuccess)
    return FromNccl(r, std::string(send_ ? "isend" : "irecv") + " msg " + std::to_string(msg));
  if (req == nullptr) return Status::Ok();  // retry on the next pass
  if (!send_ && req == reinterpret_cast<void*>(0x1) && preset == req)
    return Status::Internal("irecv returned success but left the 0x1 hint as the request");
  q_.push_back({req, msg});
  *posted = true;
  return Status::Ok();
}

Status ReqQueue::TestOldest(bool* done, Done* out, bool null_sizes) {
  *done = false;
  if (q_.empty()) return Status::Ok();
  int d = 0;
  int sizes[1] = {-1};
  Pending p = q_.front();
  rrNcclResult_t r = net_->Test(p.req, &d, (send_ || !null_sizes) ? sizes : nullptr);
  if (r != rrNcclSuccess)
    return FromNccl(r,
                    std::string("test(") + (send_ ? "send" : "recv") + " msg " + std::to_string(p.msg) + ")");
  if (!d) return Status::Ok();
  q_.pop_front();
  *done = true;
  out->msg = p.msg;
  out->size = (send_ || null_sizes) ? -1 : sizes[0];
  return Status::Ok();
}

}  // namespace rr::netbench
