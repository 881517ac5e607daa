#include "event_ring.h"

namespace rr::prof {
namespace {

size_t RoundPow2(size_t n) {
  size_t p = 1;
  while (p < n) p <<= 1;
  return p;
}

// Marks the thread's ring abandoned at thread exit; the collector frees it after draining. Kept trivially
// small so the TLS destructor does nothing but one atomic store.
struct RingHolder {
  Ring* ring = nullptr;
  ~RingHolder() {
    if (ring != nullptr) ring->Abandon();
  }
};
thread_local RingHolder t_ring;

}  // namespace

Ring::Ring(size_t capacity, uint32_t thread_index)
    : cap_(RoundPow2(capacity)), mask_(cap_ - 1), thread_(thread_index), slots_(new Record[cap_]) {}

size_t Ring::Drain(std::vector<Record>* out) {
  uint64_t t = tail_.load(std::memory_order_relaxed);
  uint64_t h = head_.load(std::memory_order_acquire);
  for (uint64_t i = t; i < h; ++i) out->push_back(slots_[i & mask_]);
  tail_.store(h, std::memory_order_release);
  return static_cast<size_t>(h - t);
}

Ring* ThreadRing(size_t capacity) {
  if (__builtin_expect(t_ring.ring == nullptr, 0)) t_ring.ring = RingRegistry::Get().Create(capacity);
  return t_ring.ring;
}

RingRegistry& RingRegistry::Get() {
  // Never destroyed: threads may still hold ring pointers while the library's statics are torn down.
  static RingRegistry* reg = new RingRegistry();
  return *reg;
}

Ring* RingRegistry::Create(size_t capacity) {
  std::lock_guard<std::mutex> lock(mu_);
  rings_.push_back(std::make_unique<Ring>(capacity, next_thread_++));
  return rings_.back().get();
}

void RingRegistry::DrainAll(std::vector<Record>* out) {
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < rings_.size();) {
    Ring* r = rings_[i].get();
    // Read the abandoned flag before draining: a ring seen abandoned and then drained empty is final.
    bool abandoned = r->Abandoned();
    r->Drain(out);
    if (abandoned && r->Empty()) {
      dropped_of_freed_ += r->Dropped();
      rings_.erase(rings_.begin() + static_cast<std::ptrdiff_t>(i));
      continue;
    }
    ++i;
  }
}

uint64_t RingRegistry::TotalDropped() {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t total = dropped_of_freed_;
  for (auto& r : rings_) total += r->Dropped();
  return total;
}

}  // namespace rr::prof
