// The three files one communicator's profile produces, and the metrics behind them.
//
//   <dir>/rerail-r<rank>-<commId hex>.trace.json    Chrome/Perfetto trace (JSON object format)
//   <dir>/rerail-r<rank>-<commId hex>.summary.json  per-rank summary (format "rerail-profile-summary/1")
//   <dir>/rerail-r<rank>-<commId hex>.prom          Prometheus textfile (node-exporter textfile collector)
//
// Contract
//   * Used by the collector thread only (no locking inside). Never called from NCCL's threads.
//   * The trace is streamed: Emit() queues each completed event, FlushTrace() appends the batch and the file
//     always ends with a valid closing tail (rewritten after each batch), so it parses after every flush
//     and memory stays bounded (at most kFlushBytes are held).
//     Trace timestamps are µs since the process's first profiler init (otherData.t0_unix_ns says when
//     that was, so traces of several ranks can be aligned).
//   * Summary and textfile are rewritten whole by WriteSnapshots(): written to a temporary file in the
//     same directory and renamed over the old one (atomic for readers).
//   * I/O errors are reported once per file through the logger (WARN) and the file is given up; recording
//     and the other outputs go on.
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "event_model.h"
#include "rerail/status.h"

namespace rr::prof {

struct RailStats {
  uint64_t bytes_sent = 0, bytes_recv = 0, io_events = 0;
  uint64_t failovers = 0, failbacks = 0, migrations = 0, migrated_bytes = 0;
  uint64_t retransmits = 0, retransmit_bytes = 0, requeued_bytes = 0;
  uint64_t stall_ns = 0;
  int state = -1;  // last RR_PROF_RAIL_* seen, -1 = never reported
};

// Collective latency histogram (host start of the collective → end of its last proxy operation).
struct LatencyHist {
  static constexpr double kBoundsUs[] = {10,   25,   50,    100,   250,    500, 1000,
                                         2500, 5000, 10000, 25000, 100000, 1e6};
  static constexpr size_t kN = sizeof(kBoundsUs) / sizeof(kBoundsUs[0]);
  uint64_t buckets[kN + 1] = {};  // non-cumulative; the last one is +Inf
  uint64_t count = 0;
  double sum_us = 0;
  void Add(double us);
};

struct StallEntry {
  double ts_us;  // trace time
  uint64_t stall_ns;
  int rail, to_rail, peer;
  std::string reason;
};

// Process-wide counters the collector adds to every comm's summary.
struct GlobalCounters {
  uint64_t dropped_records = 0;  // ring full
  uint64_t orphan_records = 0;   // stop/state for a handle whose start was never seen
  uint64_t dropped_open = 0;     // starts refused because too many events were open
};

class CommOutput {
 public:
  CommOutput(Context* ctx, std::string dir, uint64_t t0_mono_ns, int64_t t0_unix_ns);
  ~CommOutput();
  CommOutput(const CommOutput&) = delete;
  CommOutput& operator=(const CommOutput&) = delete;

  // Creates the trace file and writes its header. Error: kSystemError naming the path and errno.
  Status Open();
  // Appends one completed event to the trace (if visible) and updates the metrics.
  void Emit(const EventRec& ev);
  // Writes the events emitted since the last flush to the trace file (one write per batch, so the
  // collector calls it once per pass; also done when the batch exceeds kFlushBytes).
  void FlushTrace();
  // Flushes the trace, rewrites the summary and the textfile. `final` marks the summary as complete.
  void WriteSnapshots(const GlobalCounters& g, bool final);

  const std::string& trace_path() const { return trace_path_; }
  const std::string& summary_path() const { return summary_path_; }
  const std::string& prom_path() const { return prom_path_; }
  uint64_t emitted() const { return emitted_; }

 private:
  double Us(uint64_t mono_ns) const;
  void AppendTrace(const std::string& json_line);
  void EnsureTrack(int tid);
  void UpdateMetrics(const EventRec& ev);
  std::string SummaryJson(const GlobalCounters& g, bool final) const;
  std::string PromText(const GlobalCounters& g) const;
  bool WriteAtomic(const std::string& path, const std::string& text, bool* warned);

  Context* ctx_;
  std::string dir_, base_, trace_path_, summary_path_, prom_path_;
  uint64_t t0_mono_ns_;
  int64_t t0_unix_ns_;
  FILE* trace_ = nullptr;
  long tail_pos_ = 0;    // where the closing tail starts
  std::string pending_;  // events not yet written
  static constexpr size_t kFlushBytes = 1 << 20;
  bool first_event_ = true;
  bool trace_failed_ = false, summary_warned_ = false, prom_warned_ = false;
  std::set<int> tracks_;
  uint64_t emitted_ = 0;

  // metrics
  uint64_t events_by_type_[15] = {};
  uint64_t unfinished_ = 0, parent_lost_ = 0;
  std::map<int, RailStats> rails_;
  std::map<std::string, LatencyHist> coll_latency_;  // by collective name
  std::vector<StallEntry> top_stalls_;               // largest first, at most kTopStalls
  static constexpr size_t kTopStalls = 16;
};

}  // namespace rr::prof
