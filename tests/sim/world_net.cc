// rerail-simnet: the fabric and the kernels — wires, streams, link incarnations, connects, faults,
// and the event loop (sim.h describes the model).
#include <algorithm>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "world.h"

namespace rr::sim {

using detail::Event;
using detail::Inc;
using detail::Stream;
using detail::Wire;

uint64_t Mix64(uint64_t x) {  // splitmix64's finalizer
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

Rng::Rng(uint64_t seed) {
  for (auto& s : s_) seed = Mix64(seed), s = seed;
}

uint64_t Rng::Next() {
  auto rotl = [](uint64_t x, int k) { return (x << k) | (x >> (64 - k)); };
  uint64_t r = rotl(s_[1] * 5, 7) * 9, t = s_[1] << 17;
  s_[2] ^= s_[0], s_[3] ^= s_[1], s_[1] ^= s_[2], s_[0] ^= s_[3], s_[2] ^= t, s_[3] = rotl(s_[3], 45);
  return r;
}

// Integer-only: a uniform power-of-two octave, then a uniform value inside it.
uint64_t Rng::LogUniform(uint64_t lo, uint64_t hi) {
  if (hi <= lo) return lo;
  int a = 63 - __builtin_clzll(lo), b = 63 - __builtin_clzll(hi);
  int o = a + static_cast<int>(Below(static_cast<uint64_t>(b - a + 1)));
  uint64_t base = 1ull << o;
  uint64_t v = base + Below(base);
  return std::min(hi, std::max(lo, v));
}

void World::Push(uint64_t t, uint8_t kind, int32_t a, uint64_t b, uint64_t c) {
  Event e;
  e.t = t;
  // Same-time events are concurrent in reality: perturbed seeds order them at random.
  e.seq = sc_.perturb ? (perturb_.Next() >> 20) << 20 | (++seq_ & 0xfffff) : ++seq_;
  e.kind = kind;
  e.a = a;
  e.b = b;
  e.c = c;
  q_.push(e);
}

void World::Violate(const std::string& what) {
  if (!res_.ok) return;
  res_.ok = false;
  char head[96];
  snprintf(head, sizeof(head), "t=%.6f s: ", static_cast<double>(now_) / 1e9);
  res_.violation = head + what;
}

void World::Trace(const char* fmt, ...) {
  if (!verbose_) return;
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  printf("[%12.6f] %s\n", static_cast<double>(now_) / 1e9, buf);
}

int World::NewStream(int wire, int inc, int idx, bool ctl) {
  Stream s;
  s.wire = wire;
  s.inc = inc;
  s.idx = idx;
  s.ctl = ctl;
  streams_.push_back(std::move(s));
  return static_cast<int>(streams_.size()) - 1;
}

int World::NewInc(int comm, int link, uint32_t epoch) {
  const detail::Comm& c = *comms_[comm];
  Inc in;
  in.comm = comm;
  in.link = link;
  in.epoch = epoch;
  in.rail = (c.spec.primary + link) % static_cast<int>(sc_.rails.size());
  int id = static_cast<int>(incs_.size());
  for (int s = 0; s < sc_.streams; ++s) in.fwd.push_back(NewStream(WireOf(in.rail, c.spec.from), id, s, false));
  in.rev = NewStream(WireOf(in.rail, 1 - c.spec.from), id, 0, true);
  incs_.push_back(std::move(in));
  return id;
}

// Exact serialization: bits * 1e9 / bps with the remainder carried to the next segment.
uint64_t World::SerNs(Wire& w, uint64_t bytes) {
  unsigned __int128 bits = static_cast<unsigned __int128>(bytes) * 8u * 1000000000u + w.carry;
  uint64_t ns = static_cast<uint64_t>(bits / w.bps);
  w.carry = static_cast<uint64_t>(bits % w.bps);
  return ns;
}

void World::WireKick(int wi) {
  Wire& w = wires_[wi];
  while (!w.busy && !w.ready.empty()) {
    int sid = w.ready.front();
    w.ready.pop_front();
    Stream& s = streams_[sid];
    s.in_ready = false;
    if (s.reset || s.sent >= s.written) continue;
    // The window as the writer knows it: a lost window update (black hole) keeps it closed.
    uint64_t win = s.sent - std::min(s.known_read, s.sent);
    if (win >= sc_.rcvbuf) {
      s.win_blocked = true;
      if (s.rwnd_since == 0) s.rwnd_since = now_;
      // Linux probes a closed window from one RTO on and, with TCP_USER_TIMEOUT set, aborts the
      // connection once the window stayed closed that long after the first probe, answered or not
      // (icsk_probes_tstamp, reset only when the window opens): what ends a sender whose peer's
      // window was closed when every rail died (nothing in flight for the stall watchdog).
      if (!s.ctl && s.zw_abort_at == 0) {
        s.zw_abort_at = now_ + detail::kZeroWindowProbeNs + user_timeout_ns_;
        Push(s.zw_abort_at, detail::kZeroWindow, sid, ++s.zw_token);
      }
      // The reader consumed past the last window edge the writer heard of: its kernel announces the
      // opened window (a window update, lost in a black hole like any packet).
      if (s.read > s.known_read && !s.kick_pending) {
        s.kick_pending = true;
        Push(now_ + wires_[wi ^ 1].delay, detail::kWindowKick, sid, 0, s.read);
      }
      continue;
    }
    uint64_t n = std::min({sc_.quantum, s.written - s.sent, sc_.rcvbuf - win});
    s.sent += n;
    w.busy = true;
    w.cur = sid;
    w.cur_end = s.sent;
    Serialise(wi, n);
  }
}

// The wire starts putting `bytes` on the line now; a WireDone event fires when the last one is out.
void World::Serialise(int wi, uint64_t bytes) {
  Wire& w = wires_[wi];
  w.cur_start = now_;
  w.cur_bytes = bytes;
  w.cur_done = now_ + SerNs(w, bytes);
  Push(w.cur_done, detail::kWireDone, wi, ++w.token);
}

// A rate change acts within a packet, not a segment: the rest of the current segment goes at the new rate.
void World::SetRate(int wi, uint64_t bps) {
  Wire& w = wires_[wi];
  if (bps == w.bps) return;
  w.bps = bps;
  w.carry = 0;
  if (!w.busy || w.cur_done <= now_) return;
  uint64_t left = static_cast<uint64_t>(static_cast<unsigned __int128>(w.cur_bytes) * (w.cur_done - now_) /
                                        std::max<uint64_t>(w.cur_done - w.cur_start, 1));
  Serialise(wi, left);
}

void World::WireDone(int wi, uint64_t token) {
  Wire& w = wires_[wi];
  if (token != w.token || !w.busy) return;  // rescheduled by a rate change
  w.busy = false;
  Stream& s = streams_[w.cur];
  if (!s.reset) {
    Push(now_ + w.delay, detail::kArrive, w.cur, w.cur_end);
    if (s.sent < s.written && !s.in_ready) s.in_ready = true, w.ready.push_back(w.cur);  // round robin
  }
  WireKick(wi);
}

bool World::CanTake(int sid) const {
  const Stream& s = streams_[sid];
  return !s.reset && s.written - s.acked < sc_.sndbuf;
}

void World::Write(int sid, const net::Frame& hdr) {
  Stream& s = streams_[sid];
  if (s.reset) return;
  detail::FrameRec fr;
  fr.hdr = hdr;
  s.written += sizeof(net::Frame) + hdr.len;
  fr.end = s.written;
  s.frames.push_back(std::move(fr));
  if (!s.in_ready) s.in_ready = true, wires_[s.wire].ready.push_back(sid);
  WireKick(s.wire);
}

void World::SetFin(int sid) {
  Stream& s = streams_[sid];
  if (s.fin || s.reset) return;
  s.fin = true;
  if (s.arrived == s.written) Push(now_ + wires_[s.wire].delay, detail::kFin, sid);  // else with the last byte
}

void World::Hold(int wire, const Event& e) { wires_[wire].held.push_back(e); }

// A wire's black-hole count; back at zero, what it swallowed arrives in order (TCP retransmits).
void World::Dead(int wi, int delta) {
  Wire& w = wires_[wi];
  w.dead += delta;
  if (delta > 0 || w.dead > 0) return;
  std::vector<Event> held;
  held.swap(w.held);
  for (size_t i = 0; i < held.size(); ++i) Push(now_ + w.delay + i, held[i].kind, held[i].a, held[i].b, held[i].c);
  WireKick(wi);
}

void World::OnArrive(const Event& e) {
  Stream& s = streams_[e.a];
  if (s.reset) return;
  if (wires_[s.wire].dead > 0) return Hold(s.wire, e);
  if (!s.ctl && e.b > s.arrived) wire_bytes_ += e.b - s.arrived;
  s.arrived = std::max(s.arrived, e.b);
  if (s.fin && s.arrived == s.written) s.fin_arrived = true;
  Push(now_ + wires_[s.wire ^ 1].delay, detail::kAck, e.a, e.b, s.read);
  Wake(incs_[s.inc].comm, s.ctl ? 0 : 1, now_);
}

void World::OnAck(const Event& e) {
  Stream& s = streams_[e.a];
  if (s.reset) return;
  if (wires_[s.wire ^ 1].dead > 0) return Hold(s.wire ^ 1, e);
  s.acked = std::max(s.acked, e.b);
  if (e.c > s.known_read) {
    s.known_read = e.c;
    s.zw_abort_at = 0;  // the window opened
    ++s.zw_token;
    if (!s.in_ready && s.sent < s.written) s.in_ready = true, wires_[s.wire].ready.push_back(e.a);
    WireKick(s.wire);
  }
  Wake(incs_[s.inc].comm, s.ctl ? 1 : 0, now_);
}

void World::ResetInc(int i, bool peer_closed) {
  Inc& in = incs_[i];
  if (in.reset) return;
  in.reset = true;
  in.peer_closed = peer_closed;
  auto kill = [this](int sid) {
    Stream& s = streams_[sid];
    s.reset = true;
    s.frames.clear();  // the unread tail is lost
  };
  for (int sid : in.fwd) kill(sid);
  kill(in.rev);
  Wake(in.comm, 0, now_);
  Wake(in.comm, 1, now_);
}

// The sender drops its transport object: the notice (best effort), then the FIN of every stream.
// A socket closed with bytes still to send keeps sending them (no SO_LINGER), unless its peer has
// closed too: the peer's kernel answers with an RST, which ends the connection. Without that, a
// dropped incarnation's backlog would keep its share of the wire for good.
void World::CloseTx(int i, const net::Frame* notice) {
  Inc& in = incs_[i];
  in.tx_open = false;
  if (in.reset) return;
  if (notice != nullptr) Write(in.fwd[0], *notice);
  for (int sid : in.fwd) SetFin(sid);
  const detail::Wire& w = wires_[streams_[in.fwd[0]].wire];
  if (!in.rx_open) Push(now_ + 2 * w.delay + kUs, detail::kKill, i, 0);
}

void World::CloseRx(int i, const net::Frame* notice) {
  Inc& in = incs_[i];
  in.rx_open = false;
  if (in.reset) return;
  if (notice != nullptr) Write(in.rev, *notice);
  SetFin(in.rev);
  // Data reaching the closed socket draws an RST: the sender's next write fails (after the notice).
  const detail::Wire& w = wires_[streams_[in.rev].wire];
  Push(now_ + 2 * w.delay + 2 * wires_[streams_[in.rev].wire ^ 1].delay + kUs, detail::kKill, i, in.tx_open ? 1 : 0);
}

void World::Connect(int comm, int link, uint32_t epoch) {
  detail::Comm& c = *comms_[comm];
  detail::TxDrv& t = c.tx[link];
  if (t.inc >= 0) CloseTx(t.inc, nullptr), t.inc = -1;
  ++t.token;
  t.connecting = true;
  t.result = 0;
  t.epoch = epoch;
  t.syn = 0;
  int rail = (c.spec.primary + link) % static_cast<int>(sc_.rails.size());
  uint64_t rtt = wires_[WireOf(rail, 0)].delay + wires_[WireOf(rail, 1)].delay;
  uint64_t dt = host_rail_down_[c.spec.from][rail] > 0 ? 10 * kUs : rtt;
  Push(now_ + dt, detail::kConnectDone, comm, static_cast<uint64_t>(link) << 32 | t.token);
}

void World::ConnectDone(int comm, int link, uint64_t token) {
  detail::Comm& c = *comms_[comm];
  detail::TxDrv& t = c.tx[link];
  if (!t.connecting || token != t.token) return;
  int from = c.spec.from;
  int rail = (c.spec.primary + link) % static_cast<int>(sc_.rails.size());
  int fwd = WireOf(rail, from);
  if (host_rail_down_[from][rail] > 0) {
    t.result = 2, t.why = "connect: network is unreachable";
  } else if (host_dead_[1 - from]) {
    t.result = 2, t.why = "connect: connection refused";
  } else if (wires_[fwd].dead > 0 || wires_[fwd ^ 1].dead > 0) {
    if (++t.syn <= 6) {  // the SYN is lost: the kernel retries it after 1, 2, 4 ... s
      Push(now_ + (kSec << (t.syn - 1)), detail::kConnectDone, comm, static_cast<uint64_t>(link) << 32 | token);
      return;
    }
    t.result = 2, t.why = "connect: connection timed out";
  } else {
    t.result = 1;  // the hellos go when the sender's driver sees the connection (SendSetup)
    t.new_inc = NewInc(comm, link, t.epoch);
  }
  t.connecting = false;
  Wake(comm, 0, now_);
}

void World::RailEvent(int host, int rail, bool down) {
  int& n = host_rail_down_[host][rail];
  n += down ? 1 : -1;
  if (n != (down ? 1 : 0)) return;  // only transitions are events
  Trace("host %c rail %d: link %s event", 'A' + host, rail, down ? "down" : "up");
  for (auto& cp : comms_) {
    detail::Comm& c = *cp;
    int side = c.spec.from == host ? 0 : 1;
    c.rail_ev[side].emplace_back(rail, down);
    Wake(c.id, side, now_);
  }
}

void World::KillHost(int host) {
  host_dead_[host] = true;
  for (auto& c : comms_) c->dead[c->spec.from == host ? 0 : 1] = true;
  for (size_t i = 0; i < incs_.size(); ++i) ResetInc(static_cast<int>(i), true);  // every link touches it
}

void World::FaultStart(int fi) {
  const Fault& f = sc_.faults[fi];
  int nr = static_cast<int>(sc_.rails.size());
  Trace("fault %d starts: %s rail %d dirs %d hosts %d dur %.3f ms", fi, FaultName(f.kind), f.rail, f.dirs, f.hosts,
        static_cast<double>(f.dur) / 1e6);
  auto events = [&](int rail, bool down, uint64_t delay) {
    for (int h = 0; h < 2; ++h) {
      if (f.hosts & (1 << h)) Push(now_ + delay, detail::kRailEvent, h * 64 + rail, down ? 1 : 0);
    }
  };
  switch (f.kind) {
    case FaultKind::kHole:
      for (int d = 0; d < 2; ++d) {
        if (f.dirs & (1 << d)) Dead(WireOf(f.rail, d), 1);
      }
      fault_times_.push_back(now_);
      break;
    case FaultKind::kDown:
      Dead(WireOf(f.rail, 0), 1), Dead(WireOf(f.rail, 1), 1);
      events(f.rail, true, f.event_delay);
      fault_times_.push_back(now_);
      break;
    case FaultKind::kReset:
      for (size_t i = 0; i < incs_.size(); ++i) {
        if (incs_[i].rail == f.rail && (incs_[i].tx_open || incs_[i].rx_open)) ResetInc(static_cast<int>(i), false);
      }
      fault_times_.push_back(now_);
      break;
    case FaultKind::kRate:
      for (int d = 0; d < 2; ++d) {
        Wire& w = wires_[WireOf(f.rail, d)];
        SetRate(WireOf(f.rail, d), std::max<uint64_t>(w.base_bps / f.den * f.num, 100000));
      }
      fault_times_.push_back(now_);
      break;
    case FaultKind::kFlap:
      Push(now_, detail::kFlapToggle, fi, 0);
      break;
    case FaultKind::kPause: {
      detail::Comm& c = *comms_[f.comm];
      c.pause_until[f.side] = std::max(c.pause_until[f.side], now_ + f.dur);
      Wake(f.comm, f.side, now_ + f.dur);
      break;
    }
    case FaultKind::kRailEvent:
      events(f.rail, true, 0);
      fault_times_.push_back(now_);
      break;
    case FaultKind::kDeath:
      KillHost(f.host);
      break;
    case FaultKind::kAllDown:
      for (int r = 0; r < nr; ++r) Dead(WireOf(r, 0), 1), Dead(WireOf(r, 1), 1), events(r, true, f.event_delay);
      break;
  }
}

void World::FaultEnd(int fi) {
  const Fault& f = sc_.faults[fi];
  Trace("fault %d ends: %s rail %d", fi, FaultName(f.kind), f.rail);
  auto events = [&](int rail, bool down, uint64_t delay) {
    for (int h = 0; h < 2; ++h) {
      if (f.hosts & (1 << h)) Push(now_ + delay, detail::kRailEvent, h * 64 + rail, down ? 1 : 0);
    }
  };
  switch (f.kind) {
    case FaultKind::kHole:
      for (int d = 0; d < 2; ++d) {
        if (f.dirs & (1 << d)) Dead(WireOf(f.rail, d), -1);
      }
      fault_times_.push_back(now_);
      break;
    case FaultKind::kDown:
      Dead(WireOf(f.rail, 0), -1), Dead(WireOf(f.rail, 1), -1);
      events(f.rail, false, f.event_delay);
      fault_times_.push_back(now_);
      break;
    case FaultKind::kRate:
      for (int d = 0; d < 2; ++d) SetRate(WireOf(f.rail, d), wires_[WireOf(f.rail, d)].base_bps);
      fault_times_.push_back(now_);
      break;
    case FaultKind::kFlap:
      if (flap_prev_[fi] == 1) Dead(WireOf(f.rail, 0), -1), Dead(WireOf(f.rail, 1), -1), events(f.rail, false, 0);
      flap_prev_[fi] = 2;  // over
      fault_times_.push_back(now_);
      break;
    case FaultKind::kRailEvent:
      events(f.rail, false, 0);
      break;
    default:
      break;
  }
}

void World::FlapToggle(int fi, uint64_t n) {
  const Fault& f = sc_.faults[fi];
  if (flap_prev_[fi] == 2) return;
  bool down = n % 2 == 0;
  int d = down ? 1 : -1;
  Dead(WireOf(f.rail, 0), d), Dead(WireOf(f.rail, 1), d);
  for (int h = 0; h < 2; ++h) {
    if (f.hosts & (1 << h)) Push(now_ + f.event_delay, detail::kRailEvent, h * 64 + f.rail, down ? 1 : 0);
  }
  flap_prev_[fi] = down ? 1 : 0;
  if (down) fault_times_.push_back(now_);
  if (now_ + f.period < f.at + f.dur) Push(now_ + f.period, detail::kFlapToggle, fi, n + 1);
}

// Verbose runs end a violation with the state of every link incarnation and stream.
void World::Dump() {
  for (const auto& cp : comms_) {
    const detail::Comm& c = *cp;
    printf("comm %d: sends posted %zu tested %zu (core acked %" PRIu64 "/%" PRIu64 ", %s); receives posted %zu tested %zu (core %" PRIu64
           "/%" PRIu64 ", %s)\n", c.id, c.s_post, c.s_test, c.send->acked(), c.send->posted(), net::ConnStateName(c.send->state()),
           c.r_post, c.r_test, c.recv->completed(), c.recv->posted(), net::ConnStateName(c.recv->state()));
    for (size_t k = c.r_test; k < c.r_post && k < c.r_test + 2; ++k) {
      const detail::Msg& m = c.msgs[k];
      size_t handed = 0;
      for (uint8_t h : m.handed) handed += h > 0;
      printf("  msg %zu: %" PRIu64 " bytes, chunks placed %" PRIu64 " handed out %zu of %zu, eager %d\n", k, m.size,
             m.chunks_placed, handed, m.placed.size(), m.eager);
    }
  }
  for (size_t i = 0; i < incs_.size(); ++i) {
    const Inc& in = incs_[i];
    if (!in.tx_open && !in.rx_open) continue;
    const detail::Comm& c = *comms_[in.comm];
    printf("inc %zu: comm %d link %d rail %d epoch %u tx_open %d rx_open %d reset %d | send %s epoch %u | recv alive %d epoch %u\n",
           i, in.comm, in.link, in.rail, in.epoch, in.tx_open, in.rx_open, in.reset,
           net::LinkStateName(c.send->link_state(in.link)), c.send->epoch(in.link),
           in.link < c.recv->links() ? c.recv->alive(in.link) : -1, in.link < c.recv->links() ? c.recv->epoch(in.link) : 0);
    auto show = [&](int sid, const char* what) {
      const Stream& s = streams_[sid];
      printf("  %s %d: written %lu sent %lu arrived %lu acked %lu read %lu frames %zu head_open %d act %d win_blocked %d fin %d/%d",
             what, s.idx, (unsigned long)s.written, (unsigned long)s.sent, (unsigned long)s.arrived, (unsigned long)s.acked,
             (unsigned long)s.read, s.frames.size(), s.head_open, (int)s.act.kind, s.win_blocked, s.fin, s.fin_arrived);
      if (!s.frames.empty()) {
        const net::Frame& h = s.frames.front().hdr;
        printf(" | head type %d seq %lu off %lu len %u epoch %u", (int)net::TypeOf(h), (unsigned long)h.seq,
               (unsigned long)h.offset, h.len, h.epoch);
      }
      printf("\n");
    };
    for (int sid : in.fwd) show(sid, "data");
    show(in.rev, "ctl ");
  }
}

// Every rail dead (or the peer): a sender whose peer's window was closed has nothing in flight, and
// only its kernel's zero-window abort ends its links (then give-up runs): the run's bound moves out
// to the latest pending abort.
uint64_t World::ZeroWindowLimit() const {
  if (sc_.mode != Mode::kAllDead && sc_.mode != Mode::kDeath) return 0;
  uint64_t t = 0;
  for (const Stream& s : streams_) {
    if (!s.reset && s.zw_abort_at != 0) t = std::max(t, s.zw_abort_at + sc_.core.giveup_ns + Recover());
  }
  return t;
}

Result World::Go() {
  while (!q_.empty() && res_.ok) {
    Event e = q_.top();
    q_.pop();
    if (e.t < now_) {
      Violate("an event in the past");
      break;
    }
    now_ = e.t;
    if (now_ > limit_ && ZeroWindowLimit() > now_) limit_ = ZeroWindowLimit();
    if (now_ > limit_) {
      CheckBounds(true);
      Violate("liveness: requests still pending at the run's bound");
      break;
    }
    res_.trace_hash = Mix64(res_.trace_hash ^ (e.t * 31 + e.kind * 7 + static_cast<uint64_t>(e.a) * 131 + e.b));
    if (++res_.events > 200'000'000) {
      Violate("event budget exceeded (a livelock?)");
      break;
    }
    switch (e.kind) {
      case detail::kWireDone: WireDone(e.a, e.b); break;
      case detail::kArrive: OnArrive(e); break;
      case detail::kAck: OnAck(e); break;
      case detail::kFin: {
        Stream& s = streams_[e.a];
        if (s.reset) break;
        if (wires_[s.wire].dead > 0) {
          Hold(s.wire, e);
          break;
        }
        s.fin_arrived = true;
        Wake(incs_[s.inc].comm, s.ctl ? 0 : 1, now_);
        break;
      }
      case detail::kWindowKick: {
        Stream& s = streams_[e.a];
        if (s.reset) break;
        if (wires_[s.wire ^ 1].dead > 0) {
          Hold(s.wire ^ 1, e);
          break;
        }
        s.kick_pending = false;
        if (e.c > s.known_read) s.zw_abort_at = 0, ++s.zw_token;  // the window opened
        s.known_read = std::max(s.known_read, e.c);
        if (s.rwnd_since != 0 && s.known_read + sc_.rcvbuf > s.sent) s.rwnd_ns += now_ - s.rwnd_since, s.rwnd_since = 0;
        if (!s.in_ready && s.sent < s.written) s.in_ready = true, wires_[s.wire].ready.push_back(e.a);
        WireKick(s.wire);
        break;
      }
      case detail::kPump: Pump(e.a / 2, e.a % 2); break;
      case detail::kConnectDone: ConnectDone(e.a, static_cast<int>(e.b >> 32), e.b & 0xffffffffu); break;
      case detail::kHello: {
        Inc& in = incs_[e.a];
        detail::Comm& c = *comms_[in.comm];
        int fwd = WireOf(in.rail, c.spec.from);
        if (in.reset || !in.tx_open || host_dead_[1 - c.spec.from]) break;
        if (wires_[fwd].dead > 0) {
          Hold(fwd, e);
          break;
        }
        c.attach.push_back(e.a);
        Wake(in.comm, 1, now_);
        break;
      }
      case detail::kFaultStart: FaultStart(e.a); break;
      case detail::kFaultEnd: FaultEnd(e.a); break;
      case detail::kFlapToggle: FlapToggle(e.a, e.b); break;
      case detail::kRailEvent: RailEvent(e.a / 64, e.a % 64, e.b != 0); break;
      case detail::kHeal: OnHeal(); break;
      case detail::kZeroWindow: {
        Stream& s = streams_[e.a];
        if (s.reset || e.b != s.zw_token || s.zw_abort_at == 0) break;
        Trace("inc %d stream %d: window closed for TCP_USER_TIMEOUT (%.0f s): the sender's kernel aborts", s.inc, s.idx,
              static_cast<double>(user_timeout_ns_) / 1e9);
        ResetInc(s.inc, false);
        if (sc_.mode == Mode::kAllDead || sc_.mode == Mode::kDeath) {  // give-up runs from now
          limit_ = std::max(limit_, now_ + sc_.core.giveup_ns + Recover());
        }
        break;
      }
      case detail::kKill: {
        Inc& in = incs_[e.a];
        // An RST is a packet: a black hole swallows it (the connection then lives until the heal).
        if (wires_[streams_[in.rev].wire].dead > 0 || wires_[streams_[in.rev].wire ^ 1].dead > 0) {
          Hold(streams_[in.rev].wire, e);
          break;
        }
        if (!in.rx_open) ResetInc(e.a, e.b != 0);
        break;
      }
    }
    if (AllDone()) break;
  }
  if (res_.ok && !AllDone()) Violate("the event queue ran dry with requests pending");
  if (res_.ok) CheckBounds(true);
  if (!res_.ok && verbose_) Dump();
  res_.end_ns = now_;
  return res_;
}

}  // namespace rr::sim
