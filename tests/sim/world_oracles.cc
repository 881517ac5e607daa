// rerail-simnet: the oracles (sim.h lists them) — what a frame, a placement and a completion must
// satisfy, and the liveness bounds.
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "world.h"

namespace rr::sim {

using detail::Comm;
using detail::Msg;
using detail::kFrameBytes;
using detail::kGuard;
using net::Frame;

void World::CheckTx(Comm& c, int link, const net::TxFrame& f) {
  const Frame& h = f.hdr;
  if (net::TypeOf(h) != net::FrameType::kData) return;
  auto who = [&] { return "comm " + std::to_string(c.id) + " link " + std::to_string(link) + " msg " + std::to_string(h.seq); };
  if (h.seq >= c.msgs.size() || !c.msgs[h.seq].s_posted) return Violate(who() + ": data frame of a send never posted");
  Msg& m = c.msgs[h.seq];
  if (!OnGrid(m, h)) return Violate(who() + ": bad chunk (offset " + std::to_string(h.offset) + " len " + std::to_string(h.len) + ")");
  if (net::IsEager(h)) {
    // From the core's own copy: every byte (the frame then carries exactly the pattern, FrameRec).
    m.eager = true;
    if (sc_.copy_bytes && h.len > 0) {
      size_t bad = detail::PatternMismatch(f.payload, m.key, h.offset, h.len);
      if (bad < h.len) return Violate(who() + ": eager payload differs from what was sent (byte " + std::to_string(bad) + ")");
    }
  } else {
    if (m.s_core_done) return Violate(who() + ": data frame of a completed send (its buffer is NCCL's again)");
    if (h.len > 0 && f.payload != m.src_p + h.offset) return Violate(who() + ": payload is not at the buffer + offset");
  }
  m.written_payload += h.len;
  // Fresh, or a re-send of the same range: its granules were handed out equally often.
  auto [first, end] = Granules(h);
  for (uint64_t i = first; i < end; ++i) {
    if (m.handed[i] != m.handed[first]) return Violate(who() + ": chunk at offset " + std::to_string(h.offset) + " overlaps another one");
  }
  for (uint64_t i = first; i < end; ++i) m.handed[i] = static_cast<uint8_t>(std::min(m.handed[i] + 1, 255));
}

// A chunk of message m on the grid (wire.h): inside the message, starting on a granule, at most a full
// chunk of whole granules, only the message's last chunk ending inside one; a message of 0 bytes is one
// empty chunk.
bool World::OnGrid(const detail::Msg& m, const Frame& h) const {
  uint64_t g = net::ChunkGranule(sc_.core.chunk);
  if (h.total != m.size) return false;
  if (m.size == 0) return h.offset == 0 && h.len == 0;
  return h.offset < m.size && h.offset % g == 0 && h.len > 0 && h.len <= g * net::kChunkGranules &&
         h.len <= m.size - h.offset && (h.len % g == 0 || h.offset + h.len == m.size);
}

// The granules [first, end) a chunk on the grid covers (a message of 0 bytes: granule 0).
std::pair<uint64_t, uint64_t> World::Granules(const Frame& h) const {
  uint64_t g = net::ChunkGranule(sc_.core.chunk);
  uint64_t first = h.offset / g;
  return {first, std::max(first + 1, (h.offset + h.len + g - 1) / g)};
}


// A chunk reaches the receive buffer: from the wire (bytes == nullptr: the frame's payload, which is
// the pattern at its header's offset, FrameRec; its sampled bytes are written, ChunkSamples) or from
// the core's stash (stash_copy: every byte, checked here). Both are checked as an interval: inside
// the message, on the chunk grid, at buf + offset of the frame's own message, and counted.
void World::Place(Comm& c, const Frame& h, const uint8_t* dst, const uint8_t* bytes, bool stash_copy) {
  auto who = [&] {
    return "comm " + std::to_string(c.id) + " msg " + std::to_string(h.seq) + " offset " + std::to_string(h.offset) +
           (stash_copy ? " (stash)" : "");
  };
  if (h.seq >= c.msgs.size()) return Violate(who() + ": placed for a message never sent");
  Msg& m = c.msgs[h.seq];
  if (!m.r_posted) return Violate(who() + ": placed into a receive not posted");
  if (m.r_core_done) return Violate(who() + ": placed into a receive the core already completed");
  if (!OnGrid(m, h)) return Violate(who() + ": placement of " + std::to_string(h.len) + " bytes off the chunk grid");
  if (dst != m.dst_p + h.offset) return Violate(who() + ": placed at the wrong address");
  if (sc_.copy_bytes) {
    uint8_t* out = m.dst.get();
    if (bytes != nullptr) {
      size_t bad = detail::PatternMismatch(bytes, m.key, h.offset, h.len);
      if (bad < h.len) return Violate(who() + ": copied bytes differ from the sent ones (byte " + std::to_string(bad) + " of the chunk)");
      memcpy(out + h.offset, bytes, h.len);
    } else {
      detail::GranuleSamples(m.key, h.offset, h.len, net::ChunkGranule(sc_.core.chunk),
                             [&](uint64_t at, uint64_t n) { detail::Pattern(out + at, m.key, at, n); });
    }
  }
  // Exactly once, unless the chunk was re-sent: a late first copy and its re-sent copy may both land
  // (identical bytes, before the completion: the core defers it while a stream still writes).
  auto [first, end] = Granules(h);
  uint8_t n = m.placed[first];
  for (uint64_t i = first; i < end; ++i) {
    if (m.placed[i] != n) return Violate(who() + ": placed over part of another chunk");
    if (m.placed[i] >= m.handed[i]) return Violate(who() + ": placed more often than the sender sent it");
    ++m.placed[i];
  }
  if (n == 0) m.chunks_placed += end - first;
  else res_.dup_bytes += h.len;
}


// Completions come in the order the core finished them; NCCL tests only its oldest request, so it
// learns of them in posting order (the checks that need NCCL's view run then).
void World::DrainSend(Comm& c) {
  net::Completion d;
  while (!violated() && c.send->NextCompletion(&d)) {
    size_t k = detail::FromOwner(d.owner);
    std::string who = "comm " + std::to_string(c.id) + " send " + std::to_string(k);
    if (k >= c.s_post || k < c.s_test || c.msgs[k].s_core_done) return Violate(who + ": completed twice or never posted");
    Msg& m = c.msgs[k];
    if (d.size != m.size) return Violate(who + ": completed with size " + std::to_string(d.size));
    if (!m.eager && !detail::Delivered(m)) return Violate(who + ": a send completed before every chunk was placed at the receiver");
    if (m.eager && m.written_payload < m.size) return Violate(who + ": eager send completed before all its bytes were written");
    m.s_core_done = true;
    Trace("comm %d send %zu (%" PRIu64 " bytes%s) complete", c.id, k, m.size, m.eager ? ", eager" : "");
  }
  while (!violated() && c.s_test < c.s_post && c.msgs[c.s_test].s_core_done) {
    Msg& m = c.msgs[c.s_test++];
    m.s_done = true;
    if (m.r_done) Finish(c, m, c.s_test - 1);
  }
}


// Both sides of a message are done (as NCCL sees them): its latency bound, then its memory goes back.
void World::Finish(Comm& c, Msg& m, size_t k) {
  res_.worst_latency_ns = std::max(res_.worst_latency_ns, now_ - m.t_start);
  if (sc_.mode == Mode::kSurvive && now_ - m.t_start > Bound(c, m, now_)) {
    char b[200];
    snprintf(b, sizeof(b), "comm %d msg %zu: liveness: took %.3f ms, bound %.3f ms", c.id, k, (now_ - m.t_start) / 1e6,
             Bound(c, m, now_) / 1e6);
    return Violate(b);
  }
  m.dst.reset();  // the source stays: an eager chunk may still be re-sent (and compared) from the core's copy
}


void World::DrainRecv(Comm& c) {
  net::Completion d;
  while (!violated() && c.recv->NextCompletion(&d)) {
    size_t k = detail::FromOwner(d.owner) + static_cast<size_t>(d.index);  // a grouped receive: its element
    std::string who = "comm " + std::to_string(c.id) + " recv " + std::to_string(k);
    if (k >= c.r_post || k < c.r_test || c.msgs[k].r_core_done) return Violate(who + ": completed twice or never posted");
    Msg& m = c.msgs[k];
    if (d.size != m.size) return Violate(who + ": reported " + std::to_string(d.size) + " bytes, " + std::to_string(m.size) + " sent");
    if (!detail::Delivered(m)) {
      return Violate(who + ": completed with chunks never placed (" + std::to_string(m.chunks_placed) + " of " +
                     std::to_string(m.placed.size()) + " chunks, size " + std::to_string(m.size) + ")");
    }
    m.r_core_done = true;
    Trace("comm %d recv %zu (%" PRIu64 " bytes) complete", c.id, k, m.size);
  }
  while (!violated() && c.r_test < c.r_post && c.msgs[c.r_test].r_core_done) {
    size_t k = c.r_test++;
    Msg& m = c.msgs[k];
    std::string who = "comm " + std::to_string(c.id) + " recv " + std::to_string(k);
    if (sc_.copy_bytes) {
      // Every granule's boundaries and samples still hold the pattern (nothing wrote over them since).
      uint64_t granule = net::ChunkGranule(sc_.core.chunk);
      for (uint64_t off = 0; off < m.size; off += granule) {
        bool same = true;
        detail::GranuleSamples(m.key, off, std::min<uint64_t>(granule, m.size - off), granule, [&](uint64_t at, uint64_t n) {
          same = same && detail::PatternMismatch(m.dst.get() + at, m.key, at, n) == n;
        });
        if (!same) return Violate(who + ": received bytes differ from the sent ones (granule at " + std::to_string(off) + ")");
      }
      for (uint64_t b = m.size; b < m.cap; ++b) {
        if (m.dst[b] != kGuard) return Violate(who + ": byte " + std::to_string(b) + " beyond the message was written");
      }
    }
    c.recv->Release(m.slot);
    m.r_done = true;
    outstanding_[c.spec.from] -= m.size;
    res_.bytes += m.size;
    ++res_.messages;
    // Benchmarks: bytes that reached the receivers' kernels, from the first bench_skip messages'
    // worth of completed bytes to the moment a comm has nothing left (then fewer comms compete).
    // Counting the wire, not completed messages: messages in flight at either end would skew it.
    if (sc_.bench_skip > 0 && !bench_over_) {
      if (bench_t0_ == 0 && res_.bytes >= sc_.bench_skip * m.size) bench_t0_ = now_, bench_bytes0_ = wire_bytes_;
      if (bench_t0_ != 0) res_.bench_bytes = wire_bytes_ - bench_bytes0_, res_.bench_ns = now_ - bench_t0_;
      bench_over_ = c.r_test == c.msgs.size();
    }
    if (m.s_done) Finish(c, m, k);
  }
}


void World::Failed(Comm& c, int side) {
  if (c.failed[side]) return;
  c.failed[side] = true;
  c.failed_at[side] = now_;
  const Status& st = side == 0 ? c.send->status() : c.recv->status();
  size_t pending = side == 0 ? c.s_post - c.s_test : c.r_post - c.r_test;
  res_.errors += pending;
  std::string who = "comm " + std::to_string(c.id) + (side == 0 ? " send" : " recv");
  Trace("%s failed: %s (%zu requests error)", who.c_str(), st.message().c_str(), pending);
  switch (sc_.mode) {
    case Mode::kSurvive:
    case Mode::kTransient:
      return Violate(who + ": spurious error while a rail was usable: " + st.message());
    case Mode::kAllDead:
      if (now_ < sc_.dead_at + sc_.core.giveup_ns) {
        return Violate(who + ": gave up " + std::to_string((sc_.dead_at + sc_.core.giveup_ns - now_) / kMs) +
                       " ms before RERAIL_GIVEUP_MS: " + st.message());
      }
      break;
    case Mode::kDeath:
      if (now_ < sc_.dead_at) return Violate(who + ": error before the peer died: " + st.message());
      break;
  }
}


// The slowest a rail moves a comm's bytes in [t0, t1] (bytes/ns): its rate (a slowed one at its slowed
// rate), and at most one window per round trip (the receive buffer, or what the send buffer holds):
// the driver fills a stream's socket before it turns to the next (SendComm::WriteStream), so with a
// send buffer far above the peer's window every chunk may queue on one stream (swarm seed 2212444:
// 26 KB windows, 33 ms RTT, 4 streams, all data on stream 0 at 0.78 MB/s, against a bound that
// assumed 4 windows). A failover comm keeps to its primary and a striping one may put a chunk on any
// rail, so the bounds use the slowest rail: liveness, not performance — hangs are what they catch.
double World::RateFloor(uint64_t t0, uint64_t t1) const {
  std::vector<uint64_t> rate(sc_.rails.size());
  for (size_t r = 0; r < rate.size(); ++r) rate[r] = sc_.rails[r].bps;
  for (const Fault& f : sc_.faults) {
    if (f.kind == FaultKind::kRate && std::max(f.at, t0) < std::min(f.at + f.dur, t1)) {
      rate[f.rail] = std::min(rate[f.rail], std::max<uint64_t>(sc_.rails[f.rail].bps / f.den * f.num, 100000));
    }
  }
  double bpns = 1e30;
  double win = static_cast<double>(std::min<uint64_t>(sc_.rcvbuf, sc_.sndbuf + sc_.core.chunk + kFrameBytes));
  for (size_t r = 0; r < rate.size(); ++r) {
    double rtt = static_cast<double>(2 * sc_.rails[r].delay_ns) + 2.0 * static_cast<double>(sc_.quantum) * 8e9 / static_cast<double>(rate[r]);
    bpns = std::min({bpns, static_cast<double>(rate[r]) / 8e9, win / rtt});
  }
  return bpns;
}


// Survive mode: how long a message may take from the moment both sides posted it: three times its
// bytes and those ahead of it at the floor rate, a recovery time per rail fault during its life, its
// endpoints' pauses, and what queued on a rail before it slowed (drained at the slowed rate).
uint64_t World::Bound(const Comm& c, const Msg& m, uint64_t t_end) const {
  // A fault shortly before the message started is still undetected when its chunks go out.
  uint64_t nfaults = 0, since = m.t_start > Recover() ? m.t_start - Recover() : 0;
  for (uint64_t t : fault_times_) nfaults += t >= since && t <= t_end;
  uint64_t extra = 0;
  for (const Fault& f : sc_.faults) {
    // A rail fault still on from before (a rail dead for good) keeps costing: probes, lost copies.
    bool rail_fault = f.kind != FaultKind::kPause && f.kind != FaultKind::kReset;
    if (rail_fault && f.at < since && f.at + f.dur > m.t_start && f.at <= t_end) ++nfaults;
    uint64_t a = std::max(f.at, m.t_start), b = std::min(f.at + f.dur, t_end);
    if (b <= a) continue;
    if (f.kind == FaultKind::kPause && f.comm == c.id) extra += b - a;
    if (f.kind == FaultKind::kRate) {
      double slow = static_cast<double>(std::max<uint64_t>(sc_.rails[f.rail].bps / f.den * f.num, 100000)) / 8e9;
      double depth = static_cast<double>((sc_.sndbuf + sc_.rcvbuf + sc_.core.chunk) * sc_.streams) * comms_.size();
      extra += static_cast<uint64_t>(depth / slow);
    }
  }
  // A wire serves its streams round robin, a segment each: a frame (an ack too) may wait one round,
  // and what is ahead of a message on its streams (its comm's earlier messages) moves at a stream's
  // share of the wire while other comms post more.
  double bpns = RateFloor(m.t_start, t_end);
  double streams = static_cast<double>(comms_.size() * (sc_.streams + 1));
  double round = streams * static_cast<double>(sc_.quantum) / bpns;
  double own = static_cast<double>(m.size + m.placed.size() * kFrameBytes);
  double transfer = 3.0 * streams * (static_cast<double>(m.ahead) + own) / bpns + 4 * round;
  return 20 * kMs + 8 * rtt_max_ + static_cast<uint64_t>(transfer) + nfaults * Recover() + extra;
}


void World::CheckBounds(bool /*final*/) {
  if (sc_.mode != Mode::kSurvive || violated()) return;
  for (const auto& cp : comms_) {
    for (size_t k = 0; k < cp->msgs.size(); ++k) {
      const Msg& m = cp->msgs[k];
      if (m.t_start == 0 || (m.s_done && m.r_done)) continue;
      uint64_t b = Bound(*cp, m, now_);
      if (now_ - m.t_start > b) {
        char buf[200];
        snprintf(buf, sizeof(buf), "comm %d msg %zu: liveness: open for %.3f ms, bound %.3f ms (send %s, recv %s)", cp->id, k,
                 (now_ - m.t_start) / 1e6, b / 1e6, m.s_done ? "done" : "open", m.r_done ? "done" : "open");
        return Violate(buf);
      }
    }
  }
}


// The chaos phase is over: everything still to move must now finish within a bound.
void World::OnHeal() {
  Trace("heal: every fault is over");
  CheckBounds(false);
  if (sc_.mode != Mode::kSurvive && sc_.mode != Mode::kTransient) return;
  uint64_t remaining = 0, nchunks = 0;
  for (const auto& cp : comms_) {
    for (const Msg& m : cp->msgs) {
      if (!m.r_done) remaining += m.size, nchunks += m.placed.size();
    }
  }
  double bpns = RateFloor(now_, now_);
  uint64_t transfer = static_cast<uint64_t>(3.0 * static_cast<double>(remaining + nchunks * kFrameBytes) / bpns);
  uint64_t probe = 2 * sc_.core.stall_ns + sc_.core.heartbeat_ns;
  limit_ = now_ + Recover() + sc_.core.backoff_max_ns + probe + transfer + 100 * kMs;
}


bool World::AllDone() const {
  for (const auto& cp : comms_) {
    const Comm& c = *cp;
    size_t n = c.msgs.size();
    if (!(c.dead[0] || c.failed[0] || c.s_test == n)) return false;
    if (!(c.dead[1] || c.failed[1] || c.r_test == n)) return false;
  }
  return true;
}

}  // namespace rr::sim
