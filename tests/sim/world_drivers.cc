// rerail-simnet: the NCCL-like drivers of each comm's SendCore / RecvCore (mirroring SendComm /
// RecvComm::Progress in net_plugin/) and the oracles (sim.h lists them).
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "idle_sends.h"
#include "world.h"

namespace rr::sim {

using detail::Comm;
using detail::FrameRec;
using detail::Inc;
using detail::Msg;
using detail::Stream;
using net::Frame;
using net::RxAction;

namespace detail {

// Counts and traces what the cores report.
class Observer : public net::CoreObserver {
 public:
  Observer(World* w, int comm, int side) : w_(w), comm_(comm), side_(side) {}
  void OnFailover(int link, const std::string& why, uint64_t bytes, uint64_t chunks, int to, uint64_t,
                  bool probing) override {
    if (side_ == 0 && !probing) ++w_->res_.failovers;
    w_->Trace("comm %d %s: link %d failed (%s): %" PRIu64 " bytes / %" PRIu64 " chunks re-queued, to link %d", comm_,
              side_ == 0 ? "send" : "recv", link, why.c_str(), bytes, chunks, to);
  }
  void OnRetransmit(int, uint64_t bytes, uint64_t) override { w_->res_.resent_bytes += bytes; }
  void OnFailback(int link) override { w_->Trace("comm %d send: link %d re-admitted", comm_, link); }
  void OnLinkState(int link, net::LinkState from, net::LinkState to, const std::string& why) override {
    w_->Trace("comm %d send: link %d %s -> %s (%s)", comm_, link, net::LinkStateName(from), net::LinkStateName(to),
              why.c_str());
  }

 private:
  World* w_;
  int comm_, side_;
};

}  // namespace detail

namespace detail {

void Pattern(uint8_t* out, uint64_t key, uint64_t off, size_t len) {
  size_t i = 0;
  if (size_t skip = off & 7; skip != 0 && len > 0) {  // the head up to the next word
    uint64_t w = PatternWord(key, off - skip);
    i = std::min(8 - skip, len);
    memcpy(out, reinterpret_cast<const uint8_t*>(&w) + skip, i);
  }
  for (; i + 8 <= len; i += 8) {
    uint64_t w = PatternWord(key, off + i);
    memcpy(out + i, &w, 8);
  }
  if (i < len) {
    uint64_t w = PatternWord(key, off + i);
    memcpy(out + i, &w, len - i);
  }
}

size_t PatternMismatch(const uint8_t* p, uint64_t key, uint64_t off, size_t len) {
  size_t i = 0;
  while (i < len) {
    uint64_t pos = off + i, w = PatternWord(key, pos & ~uint64_t{7});
    size_t skip = pos & 7, n = std::min(8 - skip, len - i);
    if (n == 8) {
      uint64_t v;
      memcpy(&v, p + i, 8);
      if (v == w) {
        i += 8;
        continue;
      }
    }
    const auto* e = reinterpret_cast<const uint8_t*>(&w) + skip;
    for (size_t j = 0; j < n; ++j) {
      if (p[i + j] != e[j]) return i + j;
    }
    i += n;
  }
  return len;
}

}  // namespace detail

World::World(const Scenario& sc, bool verbose) : sc_(sc), verbose_(verbose), perturb_(sc.seed ^ 0x7065727475726221ull) {
  now_ = 1000;
  user_timeout_ns_ = std::max<uint64_t>(30 * kSec, sc_.core.giveup_ns);  // net_plugin/plugin.cc
  // RERAIL_SIM_DEBUG=1 (with --verbose): every frame and pump; 2: plus wires and scheduler state.
  const char* dbg = getenv("RERAIL_SIM_DEBUG");
  debug_ = verbose && dbg != nullptr ? atoi(dbg) : 0;
  int nr = static_cast<int>(sc_.rails.size());
  wires_.resize(2 * nr);
  for (int r = 0; r < nr; ++r) {
    for (int d = 0; d < 2; ++d) {
      detail::Wire& w = wires_[WireOf(r, d)];
      w.base_bps = w.bps = sc_.rails[r].bps;
      w.delay = sc_.rails[r].delay_ns;
    }
    rtt_max_ = std::max(rtt_max_, 2 * sc_.rails[r].delay_ns);
    rate_min_ = std::min(rate_min_, sc_.rails[r].bps);
  }
  for (auto& l : loads_) l.reset(new net::RailLoad[net::kMaxRails]);
  flap_prev_.assign(sc_.faults.size(), 0);
  uint32_t chunk = sc_.core.chunk;
  for (size_t k = 0; k < sc_.comms.size(); ++k) {
    auto cp = std::make_unique<Comm>();
    Comm& c = *cp;
    c.id = static_cast<int>(k);
    c.spec = sc_.comms[k];
    ++ndir_[c.spec.from];
    net::CoreConfig cfg = sc_.core;
    cfg.loads = loads_[c.spec.from].get();  // one rail table per host, shared by its send comms
    std::vector<net::SendCore::LinkSpec> specs(nr);
    for (int i = 0; i < nr; ++i) {
      int rail = (c.spec.primary + i) % nr;
      specs[i].rail = rail;
      specs[i].nominal_bps = static_cast<double>(sc_.rails[rail].bps);
      specs[i].name = "comm " + std::to_string(k) + " rail " + std::to_string(rail);
    }
    uint64_t conn_id = Mix64(sc_.seed * 0x100 + k) | 1;
    c.obs[0] = std::make_unique<detail::Observer>(this, c.id, 0);
    c.obs[1] = std::make_unique<detail::Observer>(this, c.id, 1);
    c.send = std::make_unique<net::SendCore>(cfg, conn_id, specs, c.obs[0].get(), now_);
    c.recv = std::make_unique<net::RecvCore>(cfg, conn_id, chunk, c.obs[1].get());
    Comm* self = &c;
    // Stashed (eager) chunks are copied into the posted buffer by the core: the same oracles apply.
    c.recv->SetCopier([this, self](void* dst, const void* src, size_t len) {
      // Irecv drains the stash before it returns: the receive being posted counts.
      for (size_t j = self->r_test; j < std::min(self->r_post + 1, self->msgs.size()); ++j) {
        Msg& m = self->msgs[j];
        auto* d = static_cast<uint8_t*>(dst);
        if (d < m.dst_p || d >= m.dst_p + std::max<uint64_t>(m.size, 1)) continue;
        Frame h{};
        h.seq = j;
        h.offset = static_cast<uint64_t>(d - m.dst_p);
        h.len = static_cast<uint32_t>(len);
        h.total = m.size;
        Place(*self, h, d, static_cast<const uint8_t*>(src), true);
        return Status::Ok();
      }
      Violate("comm " + std::to_string(self->id) + ": a stashed chunk copied outside every posted buffer");
      return Status::Ok();
    });
    if (!sc_.copy_bytes) {
      c.send->SetCopier([](void*, const void*, size_t) { return Status::Ok(); });
    } else {
      // The eager copy at isend: the bytes of the send buffer it reads, i.e. the pattern at their offset
      // (the core never reads NCCL's buffer otherwise; the simulator never fills it).
      c.send->SetCopier([this, self](void* dst, const void* src, size_t len) {
        auto* p = static_cast<const uint8_t*>(src);
        for (size_t j = self->s_test; j < std::min(self->s_post + 1, self->msgs.size()); ++j) {
          Msg& m = self->msgs[j];
          if (p < m.src_p || p >= m.src_p + std::max<uint64_t>(m.size, 1)) continue;
          uint64_t off = static_cast<uint64_t>(p - m.src_p);
          if (off + len > m.size) {
            Violate("comm " + std::to_string(self->id) + " msg " + std::to_string(j) + ": the eager copy reads " +
                    std::to_string(off + len - m.size) + " bytes beyond the send buffer");
            return Status::Ok();
          }
          detail::Pattern(static_cast<uint8_t*>(dst), m.key, off, len);
          return Status::Ok();
        }
        Violate("comm " + std::to_string(self->id) + ": an eager copy from outside every posted send buffer");
        return Status::Ok();
      });
    }
    c.tx.resize(nr);
    c.rx.assign(nr, -1);
    c.samples.resize(nr);
    c.msgs.resize(c.spec.sizes.size());
    for (size_t j = 0; j < c.msgs.size(); ++j) {
      Msg& m = c.msgs[j];
      m.size = c.spec.sizes[j];
      m.cap = m.size + c.spec.slack;
      uint64_t granule = net::ChunkGranule(chunk);
      m.placed.assign(std::max<uint64_t>(1, (m.size + granule - 1) / granule), 0);
      m.handed.assign(m.placed.size(), 0);
      m.key = Mix64(sc_.seed ^ (k << 40) ^ (j << 8));
      if (sc_.copy_bytes) {
        // Neither is filled: the payload is Pattern(key) (world.h); the receive buffer is checked at
        // the bytes its placements wrote, and the guard bytes beyond the message are set.
        m.src.reset(new uint8_t[std::max<uint64_t>(m.size, 1)]);
        m.dst.reset(new uint8_t[std::max<uint64_t>(m.cap, 1)]);
        memset(m.dst.get() + m.size, detail::kGuard, m.cap - m.size);
        m.src_p = m.src.get();
        m.dst_p = m.dst.get();
      } else {  // addresses only: the cores never dereference them (no-op copiers)
        m.src_p = reinterpret_cast<uint8_t*>((uintptr_t{1} << 44) + ((uintptr_t{k} << 12) + j) * (uintptr_t{1} << 31));
        m.dst_p = reinterpret_cast<uint8_t*>((uintptr_t{1} << 45) + ((uintptr_t{k} << 12) + j) * (uintptr_t{1} << 31));
      }
    }
    comms_.push_back(std::move(cp));
  }
  engines_.resize(sc_.engines.size());
  for (size_t e = 0; e < sc_.engines.size(); ++e) {
    const EngineSpec& es = sc_.engines[e];
    if (es.send_comm >= 0) comms_[es.send_comm]->eng[0] = static_cast<int>(e);
    if (es.recv_comm >= 0) comms_[es.recv_comm]->eng[1] = static_cast<int>(e);
  }
  for (size_t k = 0; k < comms_.size(); ++k) Wake(static_cast<int>(k), 0, now_), Wake(static_cast<int>(k), 1, now_);
  for (int h = 0; h < 2 && !engines_.empty(); ++h) EngineStep(h);
  for (size_t i = 0; i < sc_.faults.size(); ++i) {
    const Fault& f = sc_.faults[i];
    Push(f.at, detail::kFaultStart, static_cast<int32_t>(i));
    if (f.dur < kForever && f.kind != FaultKind::kReset && f.kind != FaultKind::kDeath) {
      Push(f.at + f.dur, detail::kFaultEnd, static_cast<int32_t>(i));
    }
  }
  if (sc_.heal_at < kForever) Push(sc_.heal_at, detail::kHeal, 0);
  if (sc_.mode == Mode::kAllDead || sc_.mode == Mode::kDeath) limit_ = sc_.dead_at + sc_.core.giveup_ns + Recover() + DeadWireRound();
}

World::~World() = default;

// How long losing a rail may hold a message up: the stall watchdog (with a heartbeat to put bytes in
// flight and a sample to see it), plus sampling periods and a few round trips.
uint64_t World::Recover() const {
  const net::CoreConfig& c = sc_.core;
  return 2 * c.stall_ns + 2 * c.heartbeat_ns + 2 * net::StallCheckNs(c) + 2 * net::Scheduler::kReportNs +
         8 * rtt_max_ + 10 * kMs;
}

// When every rail is dead, a sender's heartbeat is in flight (and its stall clock runs) only once the
// wire serves its stream: a dead wire keeps serialising what every other stream on it queued, a
// segment per stream per round. The give-up bound allows one round at the slowest nominal rate
// (seed 40644772: 12 streams x 256 KiB at 100 Mbit/s; a sender's stall clock started 80 ms after the
// rails died and its error came 25 ms past the bound; 41004983 likewise).
uint64_t World::DeadWireRound() const {
  uint64_t slowest = UINT64_MAX;
  for (const auto& r : sc_.rails) slowest = std::min(slowest, r.bps);
  return static_cast<uint64_t>(static_cast<double>(comms_.size() * (sc_.streams + 1) * sc_.quantum) * 8e9 /
                               static_cast<double>(slowest));
}

void World::Wake(int k, int side, uint64_t t) {
  Comm& c = *comms_[k];
  if (c.dead[side] || c.failed[side]) return;
  t = std::max({t, now_, c.pause_until[side]});
  if (t >= c.pump_at[side]) return;  // an earlier pump is due anyway
  c.pump_at[side] = t;
  Push(t, detail::kPump, k * 2 + side);
}

// NCCL calls into a comm (connect, isend / irecv retried, test of its oldest request) only while it
// has a request there or one to post.
bool World::NcclDrives(const Comm& c, int side) const {
  const size_t n = c.msgs.size(), w = static_cast<size_t>(c.spec.window);
  if (side == 0) {
    return !c.ready || c.s_test < c.s_post ||
           (c.s_post < n && c.s_post - c.s_test < w && (c.eng[0] < 0 || c.s_post < engines_[c.eng[0]].filled));
  }
  return c.r_test < c.r_post ||
         (c.r_post < n && c.r_post - c.r_test < w && (c.eng[1] < 0 || c.r_post < engines_[c.eng[1]].consumed + w));
}

// The plugin's IdleSends thread drives a comm NCCL holds no request of (net_plugin/idle_sends.h,
// Comm::OwesIdleProgress): a send comm while its sends are unacknowledged, a receive comm while its
// sender may still wait for an ack (RecvCore::OwesIdleProgress).
bool World::IdleSendsDrive(const Comm& c, int side) const {
  if (side == 1) return c.r_test == c.r_post && c.recv->OwesIdleProgress();
  return c.ready && c.s_test == c.s_post && c.send->unacknowledged() && c.send->state() == net::ConnState::kActive;
}

void World::Pump(int k, int side) {
  Comm& c = *comms_[k];
  if (now_ != c.pump_at[side]) return;  // superseded by an earlier pump
  c.pump_at[side] = UINT64_MAX;
  if (c.dead[side] || c.failed[side]) return;
  if (now_ < c.pause_until[side]) return Wake(k, side, c.pause_until[side]);
  // The IdleSends thread passes every kPeriodNs; a lingering receive comm is driven only every
  // RecvCore::IdlePeriodNs (IdleSends keeps a due time per comm; here: multiples of that period).
  auto idle_period = [&] {
    constexpr uint64_t kPass = net::IdleSends::kPeriodNs;
    return side == 1 ? std::max<uint64_t>(1, c.recv->IdlePeriodNs() / kPass) * kPass : kPass;
  };
  uint64_t idle_ns = idle_period();
  const uint64_t idle_pass = (now_ + idle_ns - 1) / idle_ns * idle_ns;  // the IdleSends thread's next pass
  if (sc_.nccl_polling && !NcclDrives(c, side)) {
    // Nobody calls a comm that owes nothing: a post wakes it (MaybePost, EngineStep). One that owes
    // its peer something waits for the next IdleSends pass.
    if (!IdleSendsDrive(c, side)) return;
    if (now_ != idle_pass) return Wake(k, side, idle_pass);
  }
  if (debug_ >= 1) Trace("pump comm %d side %d", k, side);
  if (side == 0) PumpSend(c);
  else PumpRecv(c);
  if (c.failed[side] || violated()) return;
  uint64_t d = side == 0 ? c.send->Deadline() : c.recv->Deadline();
  if (sc_.nccl_polling && !NcclDrives(c, side)) {
    if (!IdleSendsDrive(c, side)) return;
    idle_ns = idle_period();
    d = now_ / idle_ns * idle_ns + idle_ns;
  }
  if (d == UINT64_MAX) return;
  if (d <= now_) {  // NCCL would poll again at once; a core that always asks for that spins
    if (++c.spins[side] > 100000) {
      Violate("comm " + std::to_string(k) + (side == 0 ? " send" : " recv") + ": Deadline() stays in the past (spin)");
      return;
    }
    d = now_ + kUs;
  } else {
    c.spins[side] = 0;
  }
  Wake(k, side, d);
}

// NCCL posts as far as the window lets it; a refused post is retried at the next call.
void World::MaybePost(Comm& c, int side) {
  size_t n = c.msgs.size(), w = static_cast<size_t>(c.spec.window);
  bool any = false;
  auto start = [&](Msg& m) {
    m.t_start = now_;
    m.ahead = outstanding_[c.spec.from] - m.size;
  };
  if (side == 0) {
    while (c.s_post < n && c.s_post - c.s_test < w && (c.eng[0] < 0 || c.s_post < engines_[c.eng[0]].filled)) {
      Msg& m = c.msgs[c.s_post];
      bool posted = false;
      Status st = c.send->Isend(now_, m.src_p, m.size, detail::Owner(c.s_post), &posted, static_cast<int>(c.s_post % 8));
      if (!st.ok()) return Failed(c, 0);
      if (!posted) break;
      m.s_posted = true;
      m.t_post_s = now_;
      Trace("comm %d isend %zu (%" PRIu64 " bytes)", c.id, c.s_post, m.size);
      outstanding_[c.spec.from] += m.size;
      if (m.r_posted) start(m);
      ++c.s_post;
      any = true;
    }
  } else {
    while (sc_.group > 0 && c.r_post < n && c.r_post - c.r_test < w &&
           (c.eng[1] < 0 || c.r_post < engines_[c.eng[1]].consumed + w)) {
      // Grouped: as many of the next messages as the window lets in, up to sc_.group, as ONE receive.
      size_t room = std::min<size_t>({static_cast<size_t>(sc_.group), n - c.r_post, w - (c.r_post - c.r_test)});
      if (c.eng[1] >= 0) room = std::min<size_t>(room, engines_[c.eng[1]].consumed + w - c.r_post);
      void* bufs[net::kMaxRecvs];
      size_t caps[net::kMaxRecvs];
      int tags[net::kMaxRecvs];
      void* slots[net::kMaxRecvs] = {};
      for (size_t k = 0; k < room; ++k) {
        Msg& m = c.msgs[c.r_post + k];
        bufs[k] = m.dst_p, caps[k] = m.cap, tags[k] = static_cast<int>((c.r_post + k) % 8);
        m.r_posted = true;
      }
      bool posted = false;
      Status st = c.recv->IrecvGroup(now_, static_cast<int>(room), bufs, caps, tags, detail::Owner(c.r_post), &posted, slots);
      for (size_t k = 0; k < room; ++k) c.msgs[c.r_post + k].r_posted = st.ok() && posted;
      if (!st.ok()) return Failed(c, 1);
      if (!posted) break;
      for (size_t k = 0; k < room; ++k) {
        Msg& m = c.msgs[c.r_post];
        m.slot = slots[k];
        m.t_post_r = now_;
        Trace("comm %d irecv %zu (%" PRIu64 " bytes, element %zu of %zu)", c.id, c.r_post, m.size, k, room);
        if (m.s_posted) start(m);
        ++c.r_post;
      }
      any = true;
    }
    while (sc_.group == 0 && c.r_post < n && c.r_post - c.r_test < w &&
           (c.eng[1] < 0 || c.r_post < engines_[c.eng[1]].consumed + w)) {
      Msg& m = c.msgs[c.r_post];
      bool posted = false;
      m.r_posted = true;  // stashed chunks may be placed before Irecv returns
      Status st = c.recv->Irecv(now_, m.dst_p, m.cap, detail::Owner(c.r_post), &posted, &m.slot);
      m.r_posted = st.ok() && posted;
      if (!st.ok()) return Failed(c, 1);
      if (!posted) break;
      m.t_post_r = now_;
      Trace("comm %d irecv %zu (%" PRIu64 " bytes)", c.id, c.r_post, m.size);
      if (m.s_posted) start(m);
      ++c.r_post;
      any = true;
    }
  }
  if (any) Wake(c.id, side, now_);  // the shells drive I/O inside isend / irecv
}

// rerail-perf's Engine::Run pass on `host` (sim.h: EngineSpec): every stream runs the primitives
// whose inputs (a received slice tested done) and slot (a send slot whose previous send was tested
// done) are ready; iterations end when every stream of the host got there and its sends completed.
void World::EngineStep(int host) {
  auto host_iters = [&] {
    uint64_t m = UINT64_MAX;
    for (size_t e = 0; e < engines_.size(); ++e) {
      if (sc_.engines[e].host == host) m = std::min(m, engines_[e].iters_done);
    }
    return m;
  };
  for (bool moved = true; moved;) {
    moved = false;
    for (size_t e = 0; e < engines_.size(); ++e) {
      const EngineSpec& es = sc_.engines[e];
      detail::Engine& g = engines_[e];
      if (es.host != host) continue;
      Comm* sc = es.send_comm >= 0 ? comms_[es.send_comm].get() : nullptr;
      Comm* rc = es.recv_comm >= 0 ? comms_[es.recv_comm].get() : nullptr;
      size_t per = es.per_iter > 0 ? es.per_iter : es.prims.size();
      bool boundary = g.pos > 0 && g.pos % per == 0;
      if (boundary && g.iters_done < g.pos / per && (sc == nullptr || sc->s_test == g.filled)) {
        g.iters_done = g.pos / per;
        moved = true;
      }
      if (g.pos >= es.prims.size() || (boundary && host_iters() < g.pos / per)) continue;
      uint8_t p = es.prims[g.pos];
      if ((p & kPrimRecv) && rc->r_test <= g.consumed) continue;
      if ((p & kPrimSend) && g.filled - sc->s_test >= static_cast<uint64_t>(sc->spec.window)) continue;
      if (p & kPrimRecv) ++g.consumed, Wake(rc->id, 1, now_);
      if (p & kPrimSend) ++g.filled, Wake(sc->id, 0, now_);
      ++g.pos;
      moved = true;
    }
  }
  for (uint64_t m = host_iters(); res_.iter_end_ns[host].size() < m;) res_.iter_end_ns[host].push_back(now_);
}

void World::Commands(Comm& c) {
  net::LinkCommand cmd;
  while (c.send->NextCommand(&cmd)) {
    detail::TxDrv& t = c.tx[cmd.link];
    if (cmd.kind == net::LinkCommand::kClose) {
      if (t.inc >= 0) CloseTx(t.inc, &cmd.notice);
      if (t.result == 1) CloseTx(t.new_inc, nullptr);  // connected, not yet seen by the core
      t.inc = -1;
      t.connecting = false;
      t.result = 0;
      ++t.token;
    } else {
      if (t.result == 1) CloseTx(t.new_inc, nullptr);
      Connect(c.id, cmd.link, cmd.epoch);
    }
  }
}

// One driver pass of the sender, in SendComm::Progress's order (rail events, connectors, writes,
// control reads, samples, Poll, completions); every input may queue link commands: drained at once.
void World::PumpSend(Comm& c) {
  if (!SendSetup(c)) return;
  if (c.ready) MaybePost(c, 0);
  if (!SendWrites(c)) return;
  SendReadControl(c);
  if (debug_ >= 2) DebugState(c);
  net::SendCore& s = *c.send;
  if (s.SampleDue(now_)) {
    for (int l = 0; l < s.links(); ++l) {
      net::LinkSample& ls = c.samples[l];
      int ii = c.tx[l].inc;
      ls.valid = ii >= 0 && !incs_[ii].reset && s.usable(l);
      ls.streams = ls.valid ? sc_.streams : 0;
      for (int i = 0; i < ls.streams; ++i) {
        const Stream& st = streams_[incs_[ii].fwd[i]];
        uint64_t rtt = wires_[st.wire].delay + wires_[st.wire ^ 1].delay;
        ls.s[i] = net::StreamSample{st.acked, st.sent - st.acked, st.written - st.sent, st.written - st.acked, rtt, RwndNs(st), PeerWindow(st)};
      }
    }
    s.OnSamples(now_, c.samples);
    Commands(c);
  }
  s.Poll(now_);
  Commands(c);
  DrainSend(c);
  if (c.eng[0] >= 0) EngineStep(c.spec.from);
  if (s.state() == net::ConnState::kFailed) return Failed(c, 0);
  if (c.ready) MaybePost(c, 0);
}

// Rail events, connectors that finished, and (until the comm is ready) SendCore::Ready. False when
// the connection failed.
bool World::SendSetup(Comm& c) {
  net::SendCore& s = *c.send;
  while (!c.rail_ev[0].empty()) {
    auto ev = c.rail_ev[0].front();
    c.rail_ev[0].pop_front();
    s.OnRail(now_, ev.first, ev.second);
  }
  Commands(c);
  for (int l = 0; l < s.links(); ++l) {
    detail::TxDrv& t = c.tx[l];
    if (t.result == 1) {
      // TcpConnector::Poll writes the hellos, in the same call that hands the link to the core: a
      // connection the sender closes before its driver saw it never reaches the peer's core (seed
      // 2166053: its EOF read as the sender's exit).
      t.result = 0;
      t.inc = t.new_inc;
      Push(now_ + wires_[WireOf(incs_[t.inc].rail, c.spec.from)].delay, detail::kHello, t.inc);
      s.OnLinkUp(now_, l);
    } else if (t.result == 2) {
      t.result = 0;
      s.OnConnectFailed(now_, l, t.why);
    }
    Commands(c);
  }
  if (c.ready) return true;
  bool ready = false;
  Status st = s.Ready(now_, &ready);
  Commands(c);
  if (!st.ok()) {
    Failed(c, 0);
    return false;
  }
  c.ready = ready;
  return true;
}

// Transport errors, then frames for every stream that can take one (SendComm::WriteStream: a stream
// writes until its socket is full). False on a violation.
bool World::SendWrites(Comm& c) {
  net::SendCore& s = *c.send;
  int nl = s.links();
  for (int l = 0; l < nl; ++l) {
    detail::TxDrv& t = c.tx[l];
    if (t.inc >= 0 && incs_[t.inc].reset) {
      bool pc = incs_[t.inc].peer_closed;
      t.inc = -1;
      s.OnLinkError(now_, l, "send failed: connection reset", pc);
      Commands(c);
    }
  }
  for (int pass = 0; pass < 64; ++pass) {
    bool progressed = false;
    for (int l = 0; l < nl; ++l) {
      for (int i = 0; i < sc_.streams; ++i) {
        while (c.tx[l].inc >= 0) {
          int sid = incs_[c.tx[l].inc].fwd[i];
          if (!CanTake(sid)) break;
          net::TxFrame f;
          if (!s.NextTx(now_, l, &f)) break;
          if (debug_ >= 1) {
            Trace("comm %d send: frame type %d seq %" PRIu64 " offset %" PRIu64 " len %u on link %d stream %d", c.id,
                  static_cast<int>(net::TypeOf(f.hdr)), f.hdr.seq, f.hdr.offset, f.hdr.len, l, i);
          }
          CheckTx(c, l, f);
          if (violated()) return false;
          Write(sid, f.hdr);
          s.OnWritten(l, detail::kFrameBytes + f.hdr.len);
          s.OnTxDone(now_, l, f.hdr);
          progressed = true;
        }
      }
    }
    if (!progressed) break;
  }
  return true;
}

// Control frames from the receiver (acks, credits, heartbeats, notices), then EOF.
void World::SendReadControl(Comm& c) {
  net::SendCore& s = *c.send;
  for (int l = 0; l < s.links(); ++l) {
    while (c.tx[l].inc >= 0) {
      Inc& in = incs_[c.tx[l].inc];
      Stream& r = streams_[in.rev];
      if (!r.frames.empty() && r.arrived >= r.frames.front().end) {
        Frame f = r.frames.front().hdr;
        r.read = r.frames.front().end;
        r.frames.pop_front();
        if (r.win_blocked) {
          r.win_blocked = false, r.kick_pending = true;
          Push(now_ + wires_[r.wire ^ 1].delay, detail::kWindowKick, in.rev, 0, r.read);
        }
        if (debug_ >= 1) {
          Trace("comm %d send: control type %d ack %" PRIu64 " credit %" PRIu64 " on link %d", c.id,
                static_cast<int>(net::TypeOf(f)), f.seq, f.offset, l);
        }
        s.OnControl(now_, l, f);
        Commands(c);
        Wake(c.id, 0, now_);  // NCCL keeps calling: the next pass writes what the ack or credit freed
        continue;
      }
      if (r.frames.empty() && r.fin_arrived && r.read == r.written) {
        c.tx[l].inc = -1;  // EOF: the socket is done
        s.OnLinkError(now_, l, "peer closed the link", true);
        Commands(c);
      }
      break;
    }
  }
}

// RERAIL_SIM_DEBUG=2: every wire, and the scheduler's view of each of the comm's links.
void World::DebugState(const Comm& c) {
  for (size_t wi = 0; wi < wires_.size(); ++wi) {
    const detail::Wire& w = wires_[wi];
    Trace("wire %zu: busy %d cur %d done at %.6f dead %d ready %zu held %zu bps %" PRIu64, wi, w.busy, w.cur,
          static_cast<double>(w.cur_done) / 1e9, w.dead, w.ready.size(), w.held.size(), w.bps);
  }
  const net::SendCore& s = *c.send;
  const net::Scheduler& sc = s.scheduler();
  for (int l = 0; l < s.links(); ++l) {
    int ii = c.tx[l].inc;
    uint64_t written = ii >= 0 ? streams_[incs_[ii].fwd[0]].written : 0, acked = ii >= 0 ? streams_[incs_[ii].fwd[0]].acked : 0;
    Trace("comm %d link %d %s inc %d: rail backlog %" PRId64 " queued %" PRId64 " own %" PRId64 " bw %.0f Mb/s rtt %" PRIu64
          "; stream 0 written %" PRIu64 " acked %" PRIu64,
          c.id, l, net::LinkStateName(s.link_state(l)), ii, sc.rail_backlog(l), sc.rail_queued(l), sc.queued(l),
          sc.BandwidthBps(l) / 1e6, sc.RttNs(l), written, acked);
  }
}

// Closes the links the receiving core dropped: its notice (best effort), then the FIN (RecvComm::Sync).
void World::SyncRecv(Comm& c) {
  for (size_t l = 0; l < c.rx.size(); ++l) {
    if (c.rx[l] < 0 || c.recv->alive(static_cast<int>(l))) continue;
    Frame notice = c.recv->DropNotice(static_cast<int>(l));
    CloseRx(c.rx[l], &notice);
    c.rx[l] = -1;
  }
}

// Reads one data stream as RecvComm::ReadStream does: a header, then its payload where the core says.
bool World::ReadStream(Comm& c, int link, int sid) {
  net::RecvCore& r = *c.recv;
  Stream& s = streams_[sid];
  bool progressed = false;
  auto consume = [&](uint64_t upto) {
    if (upto <= s.read) return;
    s.read = upto;
    if (s.win_blocked) {  // a window update travels back (and a black hole swallows it)
      s.win_blocked = false;
      s.kick_pending = true;
      Push(now_ + wires_[s.wire ^ 1].delay, detail::kWindowKick, sid, 0, s.read);
    }
  };
  while (c.rx[link] >= 0 && !s.frames.empty() && r.state() == net::ConnState::kActive) {
    FrameRec& fr = s.frames.front();
    uint64_t start = fr.end - detail::kFrameBytes - fr.hdr.len;
    if (!s.head_open) {
      if (s.arrived < start + detail::kFrameBytes) break;
      RxAction a = r.OnFrame(now_, link, s.idx, fr.hdr);
      if (a.kind == RxAction::kWait || a.kind == RxAction::kFail) {
        SyncRecv(c);
        break;
      }
      progressed = true;
      if (net::TypeOf(fr.hdr) == net::FrameType::kData && fr.hdr.len == 0 && fr.hdr.seq < c.msgs.size()) {
        c.msgs[fr.hdr.seq].zero_read = true;
      }
      consume(start + detail::kFrameBytes);
      if (a.kind == RxAction::kNone) {
        s.frames.pop_front();
        SyncRecv(c);
        continue;
      }
      if (a.len != fr.hdr.len) {
        Violate("comm " + std::to_string(c.id) + ": the core asked for " + std::to_string(a.len) + " payload bytes of a " +
                std::to_string(fr.hdr.len) + "-byte frame");
        return false;
      }
      s.head_open = true;
      s.act = a;
      SyncRecv(c);
      if (c.rx[link] < 0) break;
    }
    consume(std::min(s.arrived, fr.end));  // the payload is read as it arrives
    if (s.arrived < fr.end) break;
    if (s.act.kind == RxAction::kPlace) {
      Place(c, fr.hdr, s.act.dst, nullptr, false);
      if (violated()) return false;
    } else if (s.act.kind == RxAction::kStash && sc_.copy_bytes) {
      // The core's own memory, which it copies to the posted buffer later: every byte is real.
      if (fr.hdr.seq >= c.msgs.size()) {
        Violate("comm " + std::to_string(c.id) + ": a frame of a message never sent stashed");
        return false;
      }
      detail::Pattern(s.act.dst, c.msgs[fr.hdr.seq].key, fr.hdr.offset, fr.hdr.len);
    }
    s.head_open = false;
    s.frames.pop_front();
    r.OnPayload(now_, link, s.idx);
    SyncRecv(c);
    progressed = true;
  }
  return progressed;
}

// One driver pass of the receiver, in RecvComm::Progress's order (listener, reads, Poll, control
// writes, rail events, samples, completions).
void World::PumpRecv(Comm& c) {
  net::RecvCore& r = *c.recv;
  RecvAttach(c);
  MaybePost(c, 1);
  for (size_t l = 0; l < c.rx.size(); ++l) {
    if (c.rx[l] >= 0 && incs_[c.rx[l]].reset) {
      bool pc = incs_[c.rx[l]].peer_closed;
      c.rx[l] = -1;
      r.OnLinkError(now_, static_cast<int>(l), "receive failed: connection reset", pc);
      SyncRecv(c);
    }
  }
  bool read_any = false;
  if (!RecvReads(c, c.r_test < c.r_post ? c.r_test : kNoWant, &read_any)) return;
  r.Poll(now_, !read_any);
  SyncRecv(c);
  if (r.state() == net::ConnState::kActive) {
    for (size_t l = 0; l < c.rx.size(); ++l) {  // FlushControl
      Frame f;
      while (c.rx[l] >= 0 && r.NextControl(now_, static_cast<int>(l), &f)) {
        if (debug_ >= 1) {
          Trace("comm %d recv: writes control type %d ack %" PRIu64 " credit %" PRIu64 " on link %zu", c.id,
                static_cast<int>(net::TypeOf(f)), f.seq, f.offset, l);
        }
        Write(incs_[c.rx[l]].rev, f);
      }
    }
    while (!c.rail_ev[1].empty()) {
      auto ev = c.rail_ev[1].front();
      c.rail_ev[1].pop_front();
      r.OnRail(now_, ev.first, ev.second);
      SyncRecv(c);
    }
    if (r.SampleDue(now_)) {  // the receiver's sockets carry control frames only (stream 0)
      std::vector<net::LinkSample> v(r.links());
      for (int l = 0; l < r.links(); ++l) {
        int ii = l < static_cast<int>(c.rx.size()) ? c.rx[l] : -1;
        v[l].valid = ii >= 0 && !incs_[ii].reset;
        v[l].streams = v[l].valid ? sc_.streams : 0;
        if (!v[l].valid) continue;
        const Stream& st = streams_[incs_[ii].rev];
        uint64_t rtt = wires_[st.wire].delay + wires_[st.wire ^ 1].delay;
        v[l].s[0] = net::StreamSample{st.acked, st.sent - st.acked, st.written - st.sent, st.written - st.acked, rtt, RwndNs(st), PeerWindow(st)};
      }
      r.OnSamples(now_, v);
      SyncRecv(c);
    }
  }
  DrainRecv(c);
  if (c.eng[1] >= 0) EngineStep(1 - c.spec.from);
  if (r.state() == net::ConnState::kFailed) return Failed(c, 1);
  MaybePost(c, 1);
}

// The listener: incarnations whose hello arrived are attached (a refused one is closed; one that
// replaces an older incarnation of the same link closes that one).
void World::RecvAttach(Comm& c) {
  while (!c.attach.empty()) {
    int i = c.attach.front();
    c.attach.pop_front();
    Inc& in = incs_[i];
    if (in.reset) continue;
    if (!c.recv->OnLinkUp(now_, in.link, in.epoch, in.rail, sc_.streams, "rail " + std::to_string(in.rail))) {
      CloseRx(i, nullptr);
      continue;
    }
    if (c.rx[in.link] >= 0 && c.rx[in.link] != i) CloseRx(c.rx[in.link], nullptr);
    c.rx[in.link] = i;
    in.rx_open = true;
  }
}

// Up to 64 passes over every attached link's data streams, then EOF. False on a violation. As
// RecvComm::Progress does for a test() of receive `want` (kNoWant: NCCL tests none, IdleSends drives
// the comm), the reads stop once that receive is complete in the core's prefix and no completion is
// deferred: the other streams are read in the next call (a notice that would release a deferred
// completion is always read: RecvCommTest.ACompletionWaitingForADeadLinksNoticeReadsTheNotice).
bool World::RecvReads(Comm& c, size_t want, bool* read_any) {
  net::RecvCore& r = *c.recv;
  for (int pass = 0; pass < 64 && r.state() == net::ConnState::kActive; ++pass) {
    bool progressed = false;
    for (size_t l = 0; l < c.rx.size(); ++l) {
      for (int i = 0; i < sc_.streams && c.rx[l] >= 0; ++i) {
        progressed |= ReadStream(c, static_cast<int>(l), incs_[c.rx[l]].fwd[i]);
        if (violated()) return false;
        if (want != kNoWant && r.completed() > want && !r.deferring()) {
          *read_any |= progressed;
          return true;
        }
      }
      if (c.rx[l] >= 0) {  // EOF after the sender closed it
        const Stream& s0 = streams_[incs_[c.rx[l]].fwd[0]];
        if (s0.frames.empty() && s0.fin_arrived && s0.read == s0.written) {
          r.OnLinkError(now_, static_cast<int>(l), "closed by the sender", true);
          if (c.rx[l] >= 0 && !r.alive(static_cast<int>(l))) SyncRecv(c);
          if (c.rx[l] >= 0) CloseRx(c.rx[l], nullptr), c.rx[l] = -1;
          progressed = true;
        }
      }
    }
    *read_any |= progressed;
    if (!progressed) break;
  }
  return true;
}

}  // namespace rr::sim
