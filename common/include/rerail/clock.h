// rerail — monotonic clock helpers. All times are CLOCK_MONOTONIC; never wall-clock on a data path.
// Thread-safe, allocation-free, header-only.
#pragma once

#include <time.h>

#include <cstdint>

namespace rr {

inline uint64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}
inline uint64_t NowUs() { return NowNs() / 1000ull; }
inline uint64_t NowMs() { return NowNs() / 1000000ull; }
inline double NowSec() { return static_cast<double>(NowNs()) * 1e-9; }

// A point in time after which an operation gives up. Deadline(0) never expires.
class Deadline {
 public:
  Deadline() = default;
  static Deadline AfterMs(uint64_t ms) { return Deadline(ms == 0 ? 0 : NowNs() + ms * 1000000ull); }
  bool Expired() const { return at_ns_ != 0 && NowNs() >= at_ns_; }
  bool Never() const { return at_ns_ == 0; }
  // Milliseconds left (0 when expired; UINT64_MAX when never).
  uint64_t RemainingMs() const {
    if (at_ns_ == 0) return UINT64_MAX;
    uint64_t now = NowNs();
    return now >= at_ns_ ? 0 : (at_ns_ - now) / 1000000ull;
  }

 private:
  explicit Deadline(uint64_t at_ns) : at_ns_(at_ns) {}
  uint64_t at_ns_ = 0;
};

}  // namespace rr
