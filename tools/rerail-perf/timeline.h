// rerail-perf — per-bin throughput per rail (--timeline FILE) and the run's events.
//
// Contract
//   * Each rank counts the bytes of every completed send per NCCL device (= rail: channel c uses
//     device c mod ndev) in bins of bin_ns (default 100 ms, --timeline-bin-ms) since the common
//     start time t0 (CLOCK_MONOTONIC, shared by
//     every process on the host, namespaces included) — or, when the plugin publishes per-rail
//     counters (board_source.h), the bytes each physical rail really carried (AddNamed).
//   * Completed sends are also counted per bin whatever the rail source (the "completed" series):
//     bytes the receiver acknowledged, unlike a board's bytes_sent (written to a socket), so a
//     stall of the whole connection shows there even while a dead rail's socket still accepts data.
//   * Serialize()/Merge() move a rank's counts to rank 0, which sums them (by rail name) and writes
//     the file: ".json" → {"bin_s", "rails", "t_s", "gbps" [bin][rail], "completed_gbps" [bin],
//     "events", "meta"}; anything
//     else → CSV with a header row `t_s,<rail>...,total` (GB/s = 1e9 B/s, nccl-tests units), one
//     `# event,t_s,kind,text` line per event and one `# meta,key,value` line per summed counter
//     (resent_bytes from the plugin's board; ranks_with_rail_counters: how many ranks counted per
//     physical rail — 0 means the columns are NCCL devices, which a striping plugin spreads over
//     every rail).
//   * Events: faults the launcher injected ("fault"), WARN lines the plugin logged ("plugin",
//     e.g. failover / failback; scripts/plot.py draws both as markers) and the begin/end of every
//     timed loop ("phase", from rank 0: "timed begin|end <coll> <bytes> B <placement>").
//   * Merge() refuses a blob counted with another bin width (kInternalError).
//   * Add() is cheap (no allocation except when a new bin starts); not thread-safe.
#pragma once

#include <cstdint>
#include <map>
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
  static constexpr uint64_t kBinNs = 100000000ull;  // default bin: 100 ms

  // dev_names: the NCCL devices counted by Add(); empty when the rail counts come from AddNamed()
  // only. bin_ns > 0.
  Timeline(uint64_t t0_ns, std::vector<std::string> dev_names, uint64_t bin_ns = kBinNs);

  // A completed send on NCCL device `dev`: counted in the completed series, and per rail when the
  // timeline counts per device.
  void Add(int dev, size_t bytes, uint64_t now_ns);
  void AddNamed(const std::string& rail, uint64_t bytes, uint64_t now_ns);
  void AddMeta(const std::string& key, uint64_t v) { meta_[key] += v; }
  uint64_t t0_ns() const { return t0_ns_; }
  uint64_t bin_ns() const { return bin_ns_; }
  uint64_t CompletedBytes() const;  // every byte Add() counted
  void AddEvent(TimelineEvent e) { events_.push_back(std::move(e)); }

  std::string Serialize() const;
  Status Merge(const std::string& blob);  // adds another rank's counts and events

  // Throughput in [from_s, to_s) summed over all rails and the longest run of empty bins inside
  // the active span (the "longest stall", in seconds); rail counts (board or devices).
  double GBps(double from_s, double to_s) const;
  double LongestStallS() const;

  Status Write(const std::string& path) const;

 private:
  size_t Index(const std::string& rail);

  uint64_t t0_ns_;
  uint64_t bin_ns_;
  std::vector<std::string> devs_;             // device index -> rail name (Add)
  std::vector<std::string> names_;            // rail names, one per row of bytes_
  std::vector<std::vector<uint64_t>> bytes_;  // [rail][bin]
  std::vector<uint64_t> completed_;           // [bin]: completed sends, every device
  std::map<std::string, uint64_t> meta_;
  std::vector<TimelineEvent> events_;
};

// Reads the launcher's fault log ("t_s<TAB>text" lines) into events.
std::vector<TimelineEvent> ReadFaultEvents(const std::string& path);

}  // namespace rr::perf
