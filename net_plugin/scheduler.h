// rerail — which link gets the next chunk: expected completion time over measured rail bandwidth,
// with every rail's kernel queue kept short.
//
// Streams pull work when their socket can take bytes; before a chunk is handed to a link the
// scheduler checks two things.
//   1. The rail is not full: its backlog (bytes written to the sockets of EVERY send comm of the
//      process on that rail and not yet acknowledged by the peer's TCP, SIOCOUTQ) plus the chunk
//      stays within kMaxQueueNs of its measured bandwidth (at least kMinQueueChunks chunks; a comm
//      with nothing of its own queued there gets one chunk in regardless: fairness between comms). The
//      kernel would otherwise take megabytes per socket (autotuned buffers, deep switch or tbf
//      queues): chunks bound to a rail long before they move, a tail in which one rail still drains
//      its queue while the others idle, and acks and dependent data (a ring step waits for the
//      previous one) waiting behind it. Measured on 4 x 200 Mb/s rails (tbf, 100 ms queue): all_reduce
//      busbw 0.93 -> 0.99 of 4 X. Pending chunks now wait in the plugin, where any rail can take them.
//   2. The link is (nearly) where the chunk completes first:
//        ect(l) = (backlog(rail of l) + chunk) / bw(rail of l)  [+ bias when l is not the primary]
//      admitted if ect(l) <= min over the other eligible links of their plain ect (no bias) + half a
//      chunk's time on the faster of the two (slack), or if ect(l) <= (the other eligible rails'
//      backlogs + the comm's pending bytes + every other comm's pending bytes) / their bandwidth:
//      with short kernel queues the work still to do sits in `pending`, and a slower rail that would
//      not finish THIS chunk first still helps as long as the others have more than that to do
//      (a 50 Mb/s rail next to a 200 Mb/s one carries its 20 %); near the end of a message it stops.
//      (Tried and dropped: such a rail taking the LAST pending chunk, the newest message's tail. The
//      simulator liked it; on the netns fabric, rerail-perf -C 1 sendrecv on X,X,X,X/4 at 200 Mbit/s
//      fell from 0.907 to 0.618 of 3.25 X with it, and 500 Mbit/s / 1 Gbit/s passed without it.)
//   * backlog(rail) is counted when bytes are written, replaced by the kernel's figure every
//     kReportNs, capped by the bytes the receiver has not acknowledged, and dropped when a comm has
//     no open request (NCCL may never call it again): stale shares never hold a rail.
//   * The primary bias: while the primary works and its measured bandwidth is at least kSameSpeed of
//     another rail's, that rail is used only if (a) the primary rail's message-level load (`queued`,
//     bytes handed out and not acknowledged by the receiver), smoothed over kLoadTauNs, exceeds
//     1 + kPrimaryBias times that rail's (two channels' primaries on one NIC must shed load), or (b)
//     that rail is running dry (backlog under kStarveChunks chunks): then plain completion time. An
//     idle rail is free capacity — a single channel striped over every rail (1 MiB of NCCL window
//     per p2p channel: 0.25 -> 0.99 of 4 X with one channel), the end of a collective with one
//     channel still busy and the other rails done. Moving chunks between equally fast, equally BUSY
//     rails only adds head-of-line waits. The bias never lets the primary itself take a chunk that
//     another rail would finish clearly sooner by plain completion time: that chunk waits here for the
//     first rail to drain (one connection striped over equal rails, rerail-perf -C 1: the primary took
//     every chunk the others refused, and each ring loop waited for its queue). A measurably slower primary (slow or congested rail, narrower
//     NIC) spills by plain completion time, and so does a comm whose primary failed.
//   * bw(rail) is an EWMA (weight kAlpha) of the rate at which the peer's TCP acknowledged the rail's
//     bytes (tcpi_bytes_acked of every comm's links on that rail, summed), sampled over windows of
//     kSampleNs or kSampleRtts round trips, whichever is longer (a window must span many RTTs of
//     acknowledgements to measure a rate), in which the senders had bytes waiting (unsent bytes in a socket, or the
//     rail full by rule 1) for most of the window's time; windows limited by demand, or by the peer's
//     receive window (its application not reading), are not samples; a backlogged window that
//     delivered nothing is (a black hole: the shared estimate falls and keeps every comm's chunks off
//     the rail before any stall watchdog fires). A window that delivered more than the estimate counts, backlogged or not, and one
//     that delivered more than kFarAbove times it replaces it (a lower bound on the rail's rate: an
//     estimate far too low, which caps the rail's queue so that no window is backlogged, is back
//     within a window or two). Kernel acknowledgements, not message
//     acks: a message striped over several rails is acknowledged once, which would credit every rail
//     with the slowest one's pace. Until the first sample the device's nominal speed is used (so
//     rule 1 does not bind before the rail has been measured). Shared per rail, so every comm learns
//     from all traffic.
// Over time every rail's share follows its bandwidth, so a message finishes on all rails at about the
// same time (a slow rail gets a proportionally small share instead of an equal one), and a healed
// rail is used again at once: its queue is empty, and its estimate restarts from the nominal speed
// (OnLinkBack). A window across a silence (no report for kMaxReportGapNs: links down, comm not
// driven) is no sample. Both guard the same trap: a rail measured far too slow gets no chunks, so
// no backlogged window, so no new sample — it stayed idle for good (a healed rail at 6 Mb/s next to
// one at 309 Mb/s, NetFaults.HealedRailIsProbedAndReadmitted under load).
//
// Thread-safety: a Scheduler belongs to one SendComm (one thread at a time); RailLoad is shared by
// comms that NCCL may drive from different proxy threads (atomics, a mutex around the sampler).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace rr::net {

constexpr int kMaxRails = 16;

// Load and bandwidth of one local rail, shared by every send comm of a plugin context.
struct RailLoad {
  std::atomic<int64_t> queued{0};     // bytes handed to the rail's links, not yet acknowledged
  std::atomic<int64_t> backlog{0};    // bytes written to the rail's sockets, not yet TCP-acknowledged
  std::atomic<double> bw{0};          // bytes/ns measured; 0 until the first sample
  std::atomic<uint64_t> rtt_ns{0};    // the transport's minimum round-trip time on the rail; 0 unknown
  std::atomic<int64_t> pending{0};    // bytes of comms whose PRIMARY is this rail, waiting in the plugin
  std::atomic<uint64_t> progress_ns{0};  // the last report in which the rail's peer acknowledged bytes
  std::mutex mu;                      // guards the window below
  uint64_t win_start_ns = 0;
  uint64_t win_bytes = 0;
  uint32_t win_reports = 0;
  uint64_t win_busy_ns = 0;     // the part of the window covered by reports of backlogged senders
  uint64_t last_report_ns = 0;  // the rail's last report (OnDelivered), any comm
};

class Scheduler {
 public:
  static constexpr double kAlpha = 0.25;
  static constexpr double kFarAbove = 2.0;  // a window this far above the estimate replaces it
  static constexpr uint64_t kSampleNs = 50'000'000;  // 50 ms
  static constexpr uint64_t kReportNs = 5'000'000;   // how often a comm reports its links' acked bytes
  // Reports further apart than this (the rail's links were down, or no comm was driven) end the
  // window without a sample: the silence is not a rate.
  static constexpr uint64_t kMaxReportGapNs = 10 * kReportNs;
  static constexpr double kPrimaryBias = 0.5;    // the primary rail must carry 1.5x another's load
  static constexpr double kLoadTauNs = 200e6;     // time constant of the smoothed rail loads
  static constexpr double kNever = 1e30;
  static constexpr double kSameSpeed = 0.75;     // bw(primary) >= this x bw(other): "as fast"
  // Failover policy: a primary below kDegradedSpeed x a survivor's measured bandwidth is degraded;
  // healthy again from kRecoveredSpeed. Far apart: equal rails measured during a collective (loop
  // boundaries, ring dependencies) differ by up to ~0.6x; a port at a quarter of the speed is 0.25x.
  static constexpr double kDegradedSpeed = 0.4;
  static constexpr double kRecoveredSpeed = 0.6;
  static constexpr int64_t kStarveChunks = 2;    // a rail with less backlog is running dry: free capacity
  static constexpr double kMaxQueueNs = 20e6;     // a rail's kernel backlog is kept below this much time
                                                  // beyond its bandwidth-delay product (RailFull)
  static constexpr double kBdpFactor = 2.0;       // ... of kBdpFactor round trips
  static constexpr uint64_t kSampleRtts = 8;      // a bandwidth window spans at least this many RTTs
  static constexpr int64_t kMinQueueChunks = 2;  // ... but at least this many chunks (with their headers)
  static constexpr int64_t kFrameOverhead = 64;  // a chunk's header on the wire, at most
  // A comm's backlog on a rail at most this (a few control frames) counts as nothing queued there:
  // such a comm gets one chunk in even when the rail is full (RailFull).
  static constexpr int64_t kOwnIdleBacklog = 4 * kFrameOverhead;
  // ... as long as the rail drains: its peer acknowledged bytes within this long.
  static constexpr uint64_t kDrainingNs = 4 * kReportNs;
  static constexpr int64_t kHeaderSlack = 64 * 1024;  // headers and control frames above the payload

  // Per link: its local device (index into `loads`) and nominal speed (bits/s). `loads` is the
  // plugin context's table (kMaxRails entries); nullptr gives the scheduler a private one (tests).
  void Reset(const std::vector<int>& devs, const std::vector<double>& nominal_bps, RailLoad* loads);
  // Bytes handed to (+) or taken back from (-) a link: acknowledged or re-queued elsewhere.
  void OnQueued(int link, int64_t delta);
  void ClearQueued(int link);  // the link failed: everything it held is taken back
  // Bytes written to a link's sockets (counted at once), and the kernel's count of written bytes not
  // yet acknowledged (SIOCOUTQ, read every kReportNs), which replaces the running count.
  void OnWritten(int link, size_t bytes);
  void OnKernelQueue(int link, uint64_t outq_bytes);
  // Whether this comm's backlog counts in the rails' shared figure. A comm with no request open may
  // never be driven again (NCCL calls it only for its next send), so the share it last published
  // would hold the rail "full" long after its socket drained (tests/sim seed 3256910): the owner
  // publishes only while it holds open requests. Its own count stays exact either way (the stale-
  // duplicate check of OnQueued needs it).
  void Publish(bool on);
  // The transport's minimum round-trip time on the rail of `link` (TCP: tcpi_min_rtt; 0: unknown).
  void OnRtt(int link, uint64_t rtt_ns);
  uint64_t RttNs(int link) const { return load(link).rtt_ns.load(std::memory_order_relaxed); }
  // Bytes of `link` the peer's TCP acknowledged since the last report (every kReportNs or so), and
  // whether the rail, not the demand, was the limit (unsent bytes in a socket, or the rail full).
  void OnDelivered(int link, size_t bytes, bool backlogged, uint64_t now_ns);
  // A failed link of this comm is back (failback): the rail's estimate describes the path before the
  // fault, and a low one (measured while the fault starved the rail) would keep the healed rail idle,
  // since an idle rail yields no samples. The rail starts over from its nominal speed and a fresh window.
  void OnLinkBack(int link);
  // The comm's bytes not handed to any link yet (published on its primary rail's `pending`: the rest
  // rule of Admit counts every comm's waiting work, not only this one's).
  void SetPending(int64_t bytes);
  // Updates the comm's smoothed view of every rail's load (call before Admit).
  void Observe(uint64_t now_ns);
  // eligible[i]: link i may carry data at all (healthy, allowed by policy). Link 0 is the primary.
  // `pending`: the comm's bytes not handed to any link yet (the chunk included).
  bool Admit(int link, const std::vector<bool>& eligible, size_t chunk, size_t pending) const;
  double BandwidthBps(int link) const { return Bw(link) * 8e9; }
  // The primary's measured bandwidth against the best other usable link's: below kDegradedSpeed it
  // is degraded, and stays so until it is back to kRecoveredSpeed (hysteresis). Only measured rails
  // count (a nominal speed says nothing about a congested port). Returns `was` when undecided.
  bool PrimaryDegraded(const std::vector<bool>& usable, bool was, int* faster = nullptr) const;
  // True when the rail of `link` already holds its share of queued time: its bandwidth-delay product
  // (kBdpFactor x the minimum RTT: what must be in flight to keep the rail busy; on a 50 ms WAN rail
  // a bare 20 ms cap would hold it to 40 % of its rate) plus kMaxQueueNs (the driver's service gap),
  // at least kMinQueueChunks chunks. More bytes would only wait in the kernel, bound to this rail,
  // and delay what follows on it (acks included). Never full for a comm with nothing of its own
  // queued there (kOwnIdleBacklog) while the rail drains (kDrainingNs): each comm gets a chunk in,
  // whoever else keeps the rail busy. Uses the time of the last Observe.
  bool RailFull(int link, size_t chunk) const;
  int64_t queued(int link) const { return own_[link]; }
  int64_t rail_queued(int link) const { return load(link).queued.load(std::memory_order_relaxed); }
  int64_t rail_backlog(int link) const { return load(link).backlog.load(std::memory_order_relaxed); }
  // A re-sent chunk was handed to `link`. Such a link's socket may hold chunks of messages the peer
  // already has and acknowledged (it placed another copy: the data landed, its ack was lost), which
  // OnQueued's bound (the comm's unacknowledged bytes) does not count; until a kernel read finds the
  // socket drained, OnQueued dropping the link's backlog to nothing makes it unknown (BacklogStale).
  void OnResent(int link) { resent_[link] = true; }
  // The backlog of a link is unknown: the caller reads every link's kernel queue (OnKernelQueue),
  // then calls BacklogRead; no chunk may be placed before (the link would look empty while megabytes
  // of duplicates wait in its socket).
  bool BacklogStale() const { return backlog_stale_; }
  void BacklogRead() { backlog_stale_ = false; }

 private:
  RailLoad& load(int link) const { return loads_[devs_[link]]; }
  double Bw(int link) const;
  double Ect(int link, size_t chunk, bool primary_eligible) const;

  RailLoad* loads_ = nullptr;
  std::unique_ptr<RailLoad[]> private_;  // when Reset got no shared table
  std::vector<int> devs_;
  std::vector<double> nominal_;  // bytes per ns
  std::vector<int64_t> own_;     // this comm's share of each rail's queued bytes
  std::vector<int64_t> own_backlog_;  // this comm's share of each rail's backlog
  std::vector<bool> resent_;     // OnResent since a kernel read showed no unaccounted bytes
  std::vector<double> avg_;      // each rail's queued bytes, smoothed over kLoadTauNs
  int64_t own_pending_ = 0;      // what SetPending last published
  bool published_ = true;        // own_backlog_ counts in the shared RailLoad::backlog (Publish)
  uint64_t last_observe_ns_ = 0;
  bool backlog_stale_ = false;
};

}  // namespace rr::net
