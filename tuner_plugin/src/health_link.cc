// In-process rail-health registry (health_link.h): one entry per live communicator and one for comm 0.
// A fixed table in static storage, no heap: it needs no destructor (callers may come in during exit)
// and leaves nothing behind when the library is unloaded. A process with more live communicators than
// kMaxSources registers the rest nowhere: their tuners read comm 0's entry (every comm of the process),
// as they would after an allocation failure.
#include "rerail/tuner/health_link.h"

#include <cstddef>
#include <mutex>

namespace rr::tuner {
namespace {

struct Source {
  uint64_t comm_id;
  RailStatesFn fn;
  void* arg;
};

constexpr size_t kMaxSources = 256;
std::mutex g_mu;
Source g_sources[kMaxSources];  // [0, g_count) in use, in registration order
size_t g_count = 0;

}  // namespace

void RegisterRailSource(uint64_t comm_id, RailStatesFn fn, void* arg) {
  std::lock_guard<std::mutex> lk(g_mu);
  for (size_t i = 0; i < g_count; ++i) {
    if (g_sources[i].comm_id == comm_id) {
      g_sources[i].fn = fn;
      g_sources[i].arg = arg;
      return;
    }
  }
  if (g_count < kMaxSources) g_sources[g_count++] = {comm_id, fn, arg};
}

void UnregisterRailSource(uint64_t comm_id) {
  std::lock_guard<std::mutex> lk(g_mu);
  for (size_t i = 0; i < g_count; ++i) {
    if (g_sources[i].comm_id == comm_id) {
      for (size_t j = i + 1; j < g_count; ++j) g_sources[j - 1] = g_sources[j];
      --g_count;
      return;
    }
  }
}

int ReadRailSource(uint64_t comm_id, uint32_t* states, int max) {
  std::lock_guard<std::mutex> lk(g_mu);
  const Source* any = nullptr;
  for (size_t i = 0; i < g_count; ++i) {
    const Source& s = g_sources[i];
    if (s.comm_id == comm_id && s.fn != nullptr) return s.fn(s.arg, states, max);
    if (s.comm_id == 0 && s.fn != nullptr) any = &s;
  }
  return any != nullptr ? any->fn(any->arg, states, max) : -1;
}

bool HasRailSources() {
  std::lock_guard<std::mutex> lk(g_mu);
  return g_count > 0;
}

}  // namespace rr::tuner
