#include <cstring>

#include "rerail/clock.h"
#include "rerail/prof_net_event.h"

namespace rr::prof {
namespace {
constexpr int kStart = 0, kStop = 1, kUpdate = 2;
}

rrProfNetEvent_v1_t MakeNetEvent(uint16_t kind, int rail, const char* reason) {
  rrProfNetEvent_v1_t ev;
  std::memset(&ev, 0, sizeof(ev));
  ev.magic = RR_PROF_NET_MAGIC;
  ev.size = sizeof(ev);
  ev.kind = kind;
  ev.tsNs = NowNs();
  ev.rail = rail;
  ev.toRail = -1;
  ev.peer = -1;
  ev.state = -1;
  ev.prevState = -1;
  if (reason != nullptr) std::strncpy(ev.reason, reason, sizeof(ev.reason) - 1);
  return ev;
}

void NetEventEmitter::Post(const rrProfNetEvent_v1_t& ev) {
  if (fn_ == nullptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (pending_.size() >= kMaxPending) {
    pending_.erase(pending_.begin());  // keep the newest: they describe the current state of the rails
    dropped_.fetch_add(1, std::memory_order_relaxed);
  }
  pending_.push_back(ev);
  has_pending_.store(true, std::memory_order_release);
}

void NetEventEmitter::Flush(void* pHandle) {
  // The relaxed check keeps the data path free of the mutex when nothing is queued.
  if (fn_ == nullptr || pHandle == nullptr || !has_pending_.load(std::memory_order_acquire)) return;
  std::vector<rrProfNetEvent_v1_t> batch;
  {
    std::lock_guard<std::mutex> lock(mu_);
    batch.swap(pending_);
    has_pending_.store(false, std::memory_order_release);
  }
  for (auto& ev : batch) {
    void* h = nullptr;
    fn_(&h, kStart, pHandle, RR_PROF_NET_PLUGIN_ID, &ev);
    // NCCL leaves h untouched when the profiler did not enable NetPlugin events for this op.
    if (h != nullptr) fn_(&h, kStop, nullptr, 0, nullptr);
    delivered_.fetch_add(1, std::memory_order_relaxed);
  }
}

void* NetEventEmitter::StartIo(void* pHandle, rrProfNetEvent_v1_t* io) {
  if (fn_ == nullptr || pHandle == nullptr || io == nullptr) return nullptr;
  Flush(pHandle);
  void* h = nullptr;
  fn_(&h, kStart, pHandle, RR_PROF_NET_PLUGIN_ID, io);
  return h;
}

void NetEventEmitter::UpdateIo(void* handle, rrProfNetEvent_v1_t* io) {
  if (fn_ == nullptr || handle == nullptr) return;
  fn_(&handle, kUpdate, nullptr, 0, io);
}

void NetEventEmitter::StopIo(void* handle) {
  if (fn_ == nullptr || handle == nullptr) return;
  fn_(&handle, kStop, nullptr, 0, nullptr);
}

size_t NetEventEmitter::Pending() {
  std::lock_guard<std::mutex> lock(mu_);
  return pending_.size();
}

}  // namespace rr::prof
