// rerail — which link gets the next chunk: expected completion time over an EWMA bandwidth estimate.
//
// Streams pull work when their socket can take bytes; before a chunk is handed to a link the
// scheduler checks that the link is (nearly) the one where it would complete first:
//   ect(l) = (queued(l) + chunk) / bw(l)       queued = bytes handed to l and not yet acknowledged
// and admits it only if ect(l) ≤ min over eligible links of ect + kSlack. Over time every link's share
// of the in-flight bytes follows its bandwidth, so a message finishes on all rails at about the same
// time (a slow rail gets a proportionally small share instead of an equal one).
//
// bw(l) is an EWMA (weight kAlpha) of the rate the link's sockets accepted bytes, sampled over
// kSampleNs windows in which the link was backlogged (a write hit EAGAIN); windows limited by
// demand are not samples. Starts at the device's nominal speed.
//
// Thread-safety: none; owned by one SendComm.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace rr::net {

class Scheduler {
 public:
  static constexpr double kAlpha = 0.25;
  static constexpr uint64_t kSampleNs = 5'000'000;  // 5 ms
  static constexpr double kSlackNs = 2'000'000;     // 2 ms of tolerance between links

  // nominal_bps: one entry per link (bits/s).
  void Reset(const std::vector<double>& nominal_bps);
  void OnWritten(int link, size_t bytes, uint64_t now_ns);
  void OnBlocked(int link, uint64_t now_ns);  // a write of this link hit a full socket
  void OnQueued(int link, int64_t delta) { queued_[link] += delta; }
  void ClearQueued(int link) { queued_[link] = 0; }
  // eligible[i]: link i may carry data at all (healthy, allowed by policy).
  bool Admit(int link, const std::vector<bool>& eligible, size_t chunk) const;
  double BandwidthBps(int link) const { return bw_[link] * 8e9; }
  int64_t queued(int link) const { return queued_[link]; }

 private:
  double Ect(int link, size_t chunk) const;
  void Sample(int link, uint64_t now_ns);

  std::vector<double> bw_;  // bytes per ns
  std::vector<int64_t> queued_;
  std::vector<uint64_t> win_start_, win_bytes_;
  std::vector<bool> win_blocked_;
};

}  // namespace rr::net
