#include "scheduler.h"

#include <algorithm>
#include <limits>

namespace rr::net {

void Scheduler::Reset(const std::vector<double>& nominal_bps) {
  size_t n = nominal_bps.size();
  bw_.resize(n);
  for (size_t i = 0; i < n; ++i) bw_[i] = std::max(nominal_bps[i], 1e6) / 8e9;
  queued_.assign(n, 0);
  win_start_.assign(n, 0);
  win_bytes_.assign(n, 0);
  win_blocked_.assign(n, false);
}

void Scheduler::Sample(int l, uint64_t now) {
  if (win_start_[l] == 0) {
    win_start_[l] = now;
    return;
  }
  uint64_t span = now - win_start_[l];
  if (span < kSampleNs) return;
  // Only a backlogged window measures the link; otherwise we measured our own demand.
  if (win_blocked_[l]) {
    double rate = static_cast<double>(win_bytes_[l]) / static_cast<double>(span);
    bw_[l] = (1 - kAlpha) * bw_[l] + kAlpha * std::max(rate, 1e-6);
  }
  win_start_[l] = now;
  win_bytes_[l] = 0;
  win_blocked_[l] = false;
}

void Scheduler::OnWritten(int l, size_t bytes, uint64_t now) {
  win_bytes_[l] += bytes;
  Sample(l, now);
}

void Scheduler::OnBlocked(int l, uint64_t now) {
  win_blocked_[l] = true;
  Sample(l, now);
}

double Scheduler::Ect(int l, size_t chunk) const {
  return static_cast<double>(std::max<int64_t>(queued_[l], 0) + static_cast<int64_t>(chunk)) / bw_[l];
}

bool Scheduler::Admit(int l, const std::vector<bool>& eligible, size_t chunk) const {
  double best = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < bw_.size(); ++i) {
    if (eligible[i]) best = std::min(best, Ect(static_cast<int>(i), chunk));
  }
  return Ect(l, chunk) <= best + kSlackNs;
}

}  // namespace rr::net
