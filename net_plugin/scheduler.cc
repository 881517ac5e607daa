#include "scheduler.h"

#include <algorithm>
#include <limits>

namespace rr::net {

void Scheduler::Reset(const std::vector<int>& devs, const std::vector<double>& nominal_bps, RailLoad* loads) {
  size_t n = devs.size();
  if (loads == nullptr) {
    private_ = std::make_unique<RailLoad[]>(kMaxRails);
    loads = private_.get();
  }
  loads_ = loads;
  devs_ = devs;
  nominal_.resize(n);
  for (size_t i = 0; i < n; ++i) nominal_[i] = std::max(nominal_bps[i], 1e6) / 8e9;
  own_.assign(n, 0);
  own_backlog_.assign(n, 0);
  resent_.assign(n, false);
  avg_.assign(n, 0);
  own_pending_ = 0;
  published_ = true;
  last_observe_ns_ = 0;
  backlog_stale_ = false;
}

void Scheduler::OnQueued(int link, int64_t delta) {
  own_[link] += delta;
  load(link).queued.fetch_add(delta, std::memory_order_relaxed);
  // The kernel cannot hold more of this comm's bytes than the peer has not acknowledged (plus
  // headers and control frames): acknowledged messages refresh the backlog between kernel reads,
  // and a comm with nothing outstanding, which NCCL may never call again, leaves none behind.
  int64_t bound = own_[link] <= 0 ? 0 : own_[link] + kHeaderSlack;
  if (own_backlog_[link] > bound) {
    if (own_[link] <= 0 && resent_[link] && own_backlog_[link] > kHeaderSlack) backlog_stale_ = true;
    OnKernelQueue(link, static_cast<uint64_t>(bound));
  }
}

void Scheduler::SetPending(int64_t bytes) {
  if (bytes == own_pending_ || devs_.empty()) return;
  load(0).pending.fetch_add(bytes - own_pending_, std::memory_order_relaxed);
  own_pending_ = bytes;
}

void Scheduler::ClearQueued(int link) {
  if (own_[link] != 0) OnQueued(link, -own_[link]);
  OnKernelQueue(link, 0);
}

void Scheduler::OnWritten(int link, size_t bytes) {
  own_backlog_[link] += static_cast<int64_t>(bytes);
  if (published_) load(link).backlog.fetch_add(static_cast<int64_t>(bytes), std::memory_order_relaxed);
}

void Scheduler::OnKernelQueue(int link, uint64_t outq_bytes) {
  if (static_cast<int64_t>(outq_bytes) <= kHeaderSlack) resent_[link] = false;  // drained: no duplicate left
  int64_t delta = static_cast<int64_t>(outq_bytes) - own_backlog_[link];
  own_backlog_[link] += delta;
  if (delta != 0 && published_) load(link).backlog.fetch_add(delta, std::memory_order_relaxed);
}

void Scheduler::Publish(bool on) {
  if (on == published_) return;
  published_ = on;
  for (size_t i = 0; i < own_backlog_.size(); ++i) {
    if (own_backlog_[i] != 0) load(static_cast<int>(i)).backlog.fetch_add(on ? own_backlog_[i] : -own_backlog_[i], std::memory_order_relaxed);
  }
}

void Scheduler::OnDelivered(int link, size_t bytes, bool backlogged, uint64_t now) {
  RailLoad& r = load(link);
  std::lock_guard<std::mutex> g(r.mu);
  uint64_t since = r.last_report_ns != 0 && now > r.last_report_ns ? now - r.last_report_ns : 0;
  r.last_report_ns = now;
  if (r.win_start_ns == 0 || now < r.win_start_ns || since > kMaxReportGapNs) {
    r.win_start_ns = now;
    r.win_bytes = 0;
    r.win_reports = 0;
    r.win_busy_ns = 0;
    return;
  }
  r.win_bytes += bytes;
  if (bytes > 0) r.progress_ns.store(now, std::memory_order_relaxed);
  ++r.win_reports;
  // A report speaks for the time since the rail's previous one: a window is a sample only if the
  // senders had bytes waiting for most of its TIME. Counting reports instead, an idle window with one
  // quiet report and one backlogged report (the failover that had just moved a dead rail's chunks
  // here) measured a heartbeat over 60 ms as the rail's rate (seed 4045415).
  if (backlogged) r.win_busy_ns += std::min(since, now - r.win_start_ns);
  uint64_t span = now - r.win_start_ns;
  if (span < std::max<uint64_t>(kSampleNs, kSampleRtts * r.rtt_ns.load(std::memory_order_relaxed))) return;
  double rate = std::max(static_cast<double>(r.win_bytes) / static_cast<double>(span), 1e-6);
  double old = r.bw.load(std::memory_order_relaxed);
  // Only a window in which the rail's senders mostly had bytes waiting for TCP measures the rail;
  // otherwise it measured the demand — unless it delivered more than the estimate: that rate is a
  // lower bound on the rail's, so an estimate far too low climbs back whenever the rail is used at
  // all (else the cap of rule 1, sized by the estimate, keeps the rail's kernel queue short, no
  // window is backlogged, and the rail stays throttled to a chunk per report for good).
  // A backlogged window that delivered nothing is a sample too: the rail's estimate, shared by every
  // comm, falls within a few windows of a black hole, long before a stall watchdog fires, and keeps
  // comms with nothing on the rail from putting chunks into it. (Skipped as "no rate", the comms
  // whose links had failed over left the rail looking healthy and empty, the others moved in, stalled
  // a second later: netns 1 Gbit/s -C 4, black hole 0.97 -> 0.84 of 3X from +1 s.) A receiver not
  // reading is told apart by its closed window (SendCore::ReportDelivered), not here.
  if (old > 0 && rate > kFarAbove * old) {  // an empty window (rate = the 1e-6 floor) never is
    // Far more than the estimate is a lower bound on the rail's rate: taken whole, so an estimate far
    // too low is back within a window or two (the cap it sets admits at least twice what one window
    // then delivered) instead of a quarter of the way per window. Near the estimate it is the
    // window-to-window noise of a rail's rate and goes through the average: taking every upward
    // swing whole overrated a quarter-rate rail (sim all_reduce on X,X,X,X/4 at 200 Mbit/s 0.95 -> 0.93).
    r.bw.store(rate, std::memory_order_relaxed);
  } else if ((r.win_reports >= 2 && 2 * r.win_busy_ns >= span) || (old > 0 && rate > old)) {
    r.bw.store(old == 0 ? rate : (1 - kAlpha) * old + kAlpha * rate, std::memory_order_relaxed);
  }
  r.win_start_ns = now;
  r.win_bytes = 0;
  r.win_reports = 0;
  r.win_busy_ns = 0;
}

void Scheduler::OnLinkBack(int link) {
  RailLoad& r = load(link);
  std::lock_guard<std::mutex> g(r.mu);
  r.bw.store(0, std::memory_order_relaxed);
  r.win_start_ns = 0;
}

double Scheduler::Bw(int link) const {
  double b = load(link).bw.load(std::memory_order_relaxed);
  return b > 0 ? b : nominal_[link];
}

void Scheduler::Observe(uint64_t now_ns) {
  double w = last_observe_ns_ == 0 ? 1.0 : std::min(1.0, static_cast<double>(now_ns - last_observe_ns_) / kLoadTauNs);
  last_observe_ns_ = now_ns;
  for (size_t i = 0; i < avg_.size(); ++i) {
    avg_[i] += (static_cast<double>(std::max<int64_t>(rail_queued(static_cast<int>(i)), 0)) - avg_[i]) * w;
  }
}

double Scheduler::Ect(int link, size_t chunk, bool primary_eligible) const {
  int64_t backlog = std::max<int64_t>(rail_backlog(link), 0);
  double t = static_cast<double>(backlog + static_cast<int64_t>(chunk)) / Bw(link);
  if (link == 0 || !primary_eligible || Bw(0) < kSameSpeed * Bw(link)) return t;
  // A rail running dry is free capacity: it competes by completion time alone (a single channel
  // striped over every rail; the end of a collective, one channel still busy and the others done).
  // Dry means little beyond what the path holds in flight (bandwidth x RTT): on a fast rail with a
  // long RTT the in-flight bytes alone exceed two chunks (400 Gbit/s x 10 us = 500 KB), and a bare
  // chunk count would feed the rail only at half its rate.
  double bdp = Bw(link) * static_cast<double>(RttNs(link));
  if (static_cast<double>(backlog) < bdp + static_cast<double>(kStarveChunks * static_cast<int64_t>(chunk))) return t;
  // Another rail about as fast as a working primary: only while the primary rail has carried
  // clearly more load for a while (two channels on one NIC, a failed rail's traffic) — a transient
  // difference is not worth the head-of-line waits of moving chunks.
  if (avg_[0] <= (1 + kPrimaryBias) * avg_[link] + static_cast<double>(chunk)) return kNever;
  return t + static_cast<double>(chunk) / Bw(link);
}

bool Scheduler::PrimaryDegraded(const std::vector<bool>& usable, bool was, int* faster) const {
  double mine = load(0).bw.load(std::memory_order_relaxed);
  if (!usable[0] || mine <= 0) return was;
  double best = 0;
  for (size_t i = 1; i < devs_.size(); ++i) {
    if (!usable[i] || devs_[i] == devs_[0]) continue;
    double b = load(static_cast<int>(i)).bw.load(std::memory_order_relaxed);
    if (b <= best) continue;
    best = b;
    if (faster != nullptr) *faster = static_cast<int>(i);
  }
  if (best <= 0) return was;
  return was ? mine < kRecoveredSpeed * best : mine < kDegradedSpeed * best;
}

void Scheduler::OnRtt(int link, uint64_t rtt_ns) {
  if (rtt_ns > 0) load(link).rtt_ns.store(rtt_ns, std::memory_order_relaxed);
}

bool Scheduler::RailFull(int link, size_t chunk) const {
  double queue_ns = kMaxQueueNs + kBdpFactor * static_cast<double>(RttNs(link));
  double cap = std::max(Bw(link) * queue_ns, static_cast<double>(kMinQueueChunks * (static_cast<int64_t>(chunk) + kFrameOverhead)));
  if (static_cast<double>(rail_backlog(link)) + static_cast<double>(chunk) <= cap) return false;
  // Full — but a comm with nothing of its own in the rail's queue (control frames aside) still gets
  // one chunk in. Otherwise room a draining rail frees goes to whichever comm looks first, and the
  // comms already writing there, which learn of it from their own kernel reads, kept it: a 4-byte
  // message waited 55.6 ms for a whole chunk's room (sim seed 3398388). The queue may exceed the cap
  // by one chunk per comm; its own bytes on another socket move at its stream's share of the wire.
  // Only on a rail that drains: one whose bytes stopped being acknowledged (a black hole, before any
  // watchdog fires) is full for everyone.
  uint64_t moved = load(link).progress_ns.load(std::memory_order_relaxed);
  // (Another comm's report may be newer than this comm's last Observe: drained just now.)
  bool draining = moved != 0 && (moved >= last_observe_ns_ || last_observe_ns_ - moved <= kDrainingNs);
  return !draining || own_backlog_[link] > kOwnIdleBacklog;
}

bool Scheduler::Admit(int link, const std::vector<bool>& eligible, size_t chunk, size_t pending) const {
  if (RailFull(link, chunk)) return false;
  bool primary = eligible[0];
  // mine: this link's completion time as the policy sees it (kNever: the primary bias keeps this
  // comm off it). The reference is where the chunk would complete first by plain completion time:
  // the bias keeps chunks off busy non-primary rails, it does not make another rail (the primary, a
  // slow rail) the best place for them.
  double mine = Ect(link, chunk, primary);
  double best_plain = std::numeric_limits<double>::infinity(), best_bw = Bw(link);
  double rest_bytes = static_cast<double>(pending), rest_bw = 0;
  for (size_t i = 0; i < devs_.size(); ++i) {  // other comms' waiting work (each rail counted once)
    bool seen = false;
    for (size_t j = 0; j < i; ++j) seen |= devs_[j] == devs_[i];
    if (seen) continue;
    int64_t others = load(static_cast<int>(i)).pending.load(std::memory_order_relaxed) - (i == 0 ? own_pending_ : 0);
    rest_bytes += static_cast<double>(std::max<int64_t>(others, 0));
  }
  for (size_t i = 0; i < devs_.size(); ++i) {
    int o = static_cast<int>(i);
    if (!eligible[i] || o == link) continue;
    double plain = Ect(o, chunk, false);
    if (plain < best_plain) best_plain = plain, best_bw = Bw(o);
    rest_bytes += static_cast<double>(std::max<int64_t>(rail_backlog(o), 0));
    rest_bw += Bw(o);
  }
  // Half a chunk on the faster of the two: equal rails do not trade chunks back and forth, and a slow
  // rail does not take a chunk that finishes half of ITS chunk time later than on a fast one.
  double slack = 0.5 * static_cast<double>(chunk) / std::max(Bw(link), best_bw);
  if (mine <= best_plain + slack) return true;
  // Backlogs are capped, so the comm's pending bytes wait here rather than in the kernel: a rail that
  // would not finish this chunk first still takes one if the others need longer than that for
  // everything pending (a slow rail keeps its share; the end of a message stays on the fast ones).
  return rest_bw > 0 && mine <= rest_bytes / rest_bw;
}

}  // namespace rr::net
