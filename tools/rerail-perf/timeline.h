// rerail-perf — per-100 ms throughput per rail (--timeline FILE) and the run's events.
//
// Contract
//   * Each rank counts the bytes of every completed send per NCCL device (= rail: channel c uses
//     device c mod ndev) in 100 ms bins since the common start time t0 (CLOCK_MONOTONIC, shared by
//     every process on the host, namespaces included).
//   * Serialize()/Merge() move a rank's counts to rank 0, which sums them and writes the file:
//     ".json" → {"bin_s", "rails", "t_s", "gbps" [bin][rail], "events"}; anything else → CSV with a
//     header row `t_s,<rail>...,total` (GB/s = 1e9 B/s, nccl-tests units) and one `# event,t_s,kind,text`
//     comment line per event.
//   * Events: faults the launcher injected ("fault") and WARN lines the plugin logged ("plugin",
//     e.g. failover / failback); scripts/plot.py draws them as markers.
//   * Add() is cheap (no allocation except when a new bin starts); not thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rerail/status.h"

namespace rr::perf {

struct TimelineEvent {
  double t_s;
  std::string kind;  // "fault" or "plugin"
  std::string text;
};

class Timeline {
 public:
  static constexpr uint64_t kBinNs = 100000000ull;  // 100 ms

  Timeline(uint64_t t0_ns, int ndev) : t0_ns_(t0_ns), bytes_(static_cast<size_t>(ndev)) {}

  void Add(int dev, size_t bytes, uint64_t now_ns);
  uint64_t t0_ns() const { return t0_ns_; }
  void AddEvent(TimelineEvent e) { events_.push_back(std::move(e)); }

  std::string Serialize() const;
  Status Merge(const std::string& blob);  // adds another rank's counts and events

  // Total bytes in [from_s, to_s) over all rails and the longest run of empty bins inside the
  // active span (the "longest stall", in seconds); used by the demo summary.
  double GBps(double from_s, double to_s) const;
  double LongestStallS() const;

  Status Write(const std::string& path, const std::vector<std::string>& rail_names) const;

 private:
  uint64_t t0_ns_;
  std::vector<std::vector<uint64_t>> bytes_;  // [dev][bin]
  std::vector<TimelineEvent> events_;
};

// Reads the launcher's fault log ("t_s<TAB>text" lines) into events.
std::vector<TimelineEvent> ReadFaultEvents(const std::string& path);

}  // namespace rr::perf
