// In-process rail-health registry (health_link.h). A handful of entries at most: a vector is enough.
#include "rerail/tuner/health_link.h"

#include <mutex>
#include <vector>

namespace rr::tuner {
namespace {

struct Source {
  uint64_t comm_id;
  RailStatesFn fn;
  void* arg;
};

std::mutex g_mu;
std::vector<Source>& Sources() {
  static std::vector<Source>* v = new std::vector<Source>();  // never destroyed: safe at exit
  return *v;
}

}  // namespace

void RegisterRailSource(uint64_t comm_id, RailStatesFn fn, void* arg) {
  std::lock_guard<std::mutex> lk(g_mu);
  for (Source& s : Sources()) {
    if (s.comm_id == comm_id) {
      s.fn = fn;
      s.arg = arg;
      return;
    }
  }
  try {
    Sources().push_back({comm_id, fn, arg});
  } catch (...) {  // out of memory: the tuner falls back to the board
  }
}

void UnregisterRailSource(uint64_t comm_id) {
  std::lock_guard<std::mutex> lk(g_mu);
  auto& v = Sources();
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i].comm_id == comm_id) {
      v.erase(v.begin() + static_cast<long>(i));
      return;
    }
  }
}

int ReadRailSource(uint64_t comm_id, uint32_t* states, int max) {
  std::lock_guard<std::mutex> lk(g_mu);
  const Source* any = nullptr;
  for (const Source& s : Sources()) {
    if (s.comm_id == comm_id && s.fn != nullptr) return s.fn(s.arg, states, max);
    if (s.comm_id == 0 && s.fn != nullptr) any = &s;
  }
  return any != nullptr ? any->fn(any->arg, states, max) : -1;
}

bool HasRailSources() {
  std::lock_guard<std::mutex> lk(g_mu);
  return !Sources().empty();
}

}  // namespace rr::tuner
