// The sending side of a resilient connection (core.h): messages -> chunks -> links, acks and credits,
// link failure and re-send, failback probing, give-up.
#include <algorithm>
#include <cstring>

#include "core.h"
#include "rerail/log.h"

namespace rr::net {

SendCore::SendCore(const CoreConfig& cfg, uint64_t conn_id, std::vector<LinkSpec> links, CoreObserver* obs,
                   uint64_t now)
    : CoreBase(conn_id, obs), cfg_(cfg), links_(links.size()) {
  setup_start_ns_ = now;
  std::vector<double> nominal;
  std::vector<int> rails;
  for (const auto& s : links) {
    nominal.push_back(s.nominal_bps);
    rails.push_back(s.rail);
  }
  sched_.Reset(rails, nominal, cfg_.loads);
  sched_.Publish(false);  // no request open yet
  eligible_.assign(links.size(), false);
  for (size_t i = 0; i < links.size(); ++i) {
    TxLink& l = links_[i];
    l.spec = std::move(links[i]);
    l.backoff_ns = cfg_.backoff_min_ns;
    char who[200];
    snprintf(who, sizeof(who), "conn %016lx link %zu (%s)", static_cast<unsigned long>(conn_id), i, l.spec.name.c_str());
    l.fsm.set_who(who);
    StartConnect(now, static_cast<int>(i));
  }
}

SendCore::~SendCore() { Ended(); }

void SendCore::Ended() {
  for (size_t i = 0; i < links_.size(); ++i) sched_.ClearQueued(static_cast<int>(i));  // the rails' shared load
  sched_.SetPending(0);
}

void SendCore::StartConnect(uint64_t now, int idx) {
  TxLink& l = links_[idx];
  l.has_transport = true;
  l.probe_since_ns = now;
  l.stall.Reset();
  l.acked_base = UINT64_MAX;
  cmds_.push_back(LinkCommand{LinkCommand::kConnect, idx, l.epoch, Frame{}});
}

bool SendCore::NextCommand(LinkCommand* out) {
  if (cmds_.empty()) return false;
  *out = cmds_.front();
  cmds_.pop_front();
  return true;
}

void SendCore::SetState(int idx, LinkState to, const std::string& why) {
  TxLink& l = links_[idx];
  LinkState from = l.fsm.state();
  if (!l.fsm.Transition(to, why)) return;
  if (from != LinkState::kConnecting) obs_->OnLinkState(idx, from, to, why);
  if (on_last_resort_ && to == LinkState::kHealthy && !l.spec.last_resort) NoteLastResort(idx, false);
  if (on_last_resort_ && to == LinkState::kFailed && l.spec.last_resort) on_last_resort_ = false;  // its WARN said it
}

bool SendCore::PreferredUsable() const {
  for (const TxLink& l : links_) {
    if (!l.spec.last_resort && l.fsm.usable()) return true;
  }
  return false;
}

void SendCore::NoteLastResort(int idx, bool carries) {
  on_last_resort_ = carries;
  if (carries) {
    last_resort_mark_ = last_resort_chunks_;
    RR_WARN("conn %016lx: no other link usable: link %d (%s) carries the traffic as the last resort",
            static_cast<unsigned long>(conn_id_), idx, links_[idx].spec.name.c_str());
    return;
  }
  RR_INFO(log::kFlagNet, "conn %016lx: link %d (%s) usable again: it takes the traffic back from the last resort, "
          "which carried %lu chunks meanwhile (%lu bytes since the connection started)",
          static_cast<unsigned long>(conn_id_), idx, links_[idx].spec.name.c_str(),
          static_cast<unsigned long>(last_resort_chunks_ - last_resort_mark_), static_cast<unsigned long>(last_resort_bytes_));
}

void SendCore::OnConnectFailed(uint64_t now, int idx, const std::string& why) {
  TxLink& l = links_[idx];
  l.has_transport = false;
  if (l.fsm.state() != LinkState::kFailed) SetState(idx, LinkState::kFailed, why);
  RR_INFO(log::kFlagNet, "link %d connect: %s", idx, why.c_str());
  ScheduleRetry(now, idx);
}

// An established link starts carrying data (first connect) or waits for the peer's answer on it (a
// failback probe, or a rail retried during setup).
void SendCore::OnLinkUp(uint64_t now, int idx) {
  TxLink& l = links_[idx];
  l.has_transport = true;
  l.last_heard_ns = now;
  l.probe_since_ns = now;  // the peer gets a full probe timeout to answer on the new link
  l.stall.Reset();
  l.acked_base = UINT64_MAX;
  if (l.fsm.state() == LinkState::kConnecting) SetState(idx, LinkState::kHealthy, "connected");
  else if (l.fsm.state() == LinkState::kFailed) SetState(idx, LinkState::kProbing, "connected after a setup retry");
}

Status SendCore::Ready(uint64_t now, bool* ready) {
  *ready = false;
  if (state_ == ConnState::kFailed) return failure_;
  bool primary_settled = links_[0].fsm.state() != LinkState::kConnecting;
  bool grace_over = now - setup_start_ns_ > cfg_.connect_grace_ns;
  if (LiveLinks() > 0 && (links_[0].fsm.usable() || primary_settled || grace_over)) {
    *ready = true;
    return Status::Ok();
  }
  bool all_failed = true;
  for (auto& l : links_) all_failed &= (l.fsm.state() == LinkState::kFailed && !l.has_transport);
  if (all_failed && now > setup_start_ns_ + cfg_.giveup_ns) {
    return Fail(Code::kRemoteError, "could not connect on any rail (" + links_[0].spec.name + ")");
  }
  // Rails that failed during setup are retried with back-off until the transport's connect timeout
  // or give-up.
  for (size_t i = 0; i < links_.size(); ++i) {
    TxLink& l = links_[i];
    if (l.fsm.state() == LinkState::kFailed && !l.has_transport && now >= l.retry_at_ns) StartConnect(now, static_cast<int>(i));
  }
  return Status::Ok();
}

// The next reconnect of a failed link, after its back-off (Poll's HastenRetries: sooner while no link works).
void SendCore::ScheduleRetry(uint64_t now, int idx) {
  TxLink& l = links_[idx];
  l.retry_at_ns = now + l.backoff_ns;
  l.backoff_ns = std::min(l.backoff_ns * 2, cfg_.backoff_max_ns);
}

// While no link works the give-up clock runs, and a long back-off could put the next try past the
// point where either side gives up although a rail healed long before (tests/sim seed 41366923: a
// probe lost in a black hole doubled a 309 ms back-off to 618 ms, due 6 ms after the receiver's 1 s
// give-up, the rail usable for the last 630 ms of it; or RERAIL_FAILBACK_MAX_MS above the give-up
// while the last link is kept stalled or on a downed rail). So then every failed link is tried again
// within giveup/8. A probe swallowed just before a heal is given up after ProbeTimeoutNs (2 x stall +
// heartbeat: 2.2 s against the default 30 s give-up) and the next try comes at most giveup/8 later: a
// rail that heals within half the give-up period is re-admitted with time to spare wherever the
// give-up is at least 10 x the stall time.
void SendCore::HastenRetries(uint64_t now) {
  for (auto& l : links_) {
    if (l.fsm.state() == LinkState::kFailed) l.retry_at_ns = std::min(l.retry_at_ns, now + cfg_.giveup_ns / 8);
  }
}

int SendCore::LiveLinks() const {
  int n = 0;
  for (const auto& l : links_) n += l.fsm.usable();
  return n;
}

Status SendCore::Isend(uint64_t /*now*/, const void* data, size_t size, void* owner, bool* posted, int tag) {
  *posted = false;
  if (state_ == ConnState::kFailed) return failure_;
  if (state_ == ConnState::kPeerClosed) return Fail(Code::kRemoteError, "isend after the receiver closed the connection");
  if (size > 0 && data == nullptr) return Status::Internal("isend of " + std::to_string(size) + " bytes from NULL");
  uint64_t seq = next_seq_;
  if (cfg_.grouped) {
    Status err;
    // No buffer yet: NCCL retries (net_ib's NULL request). Meanwhile the links carry heartbeats, so a
    // black hole that swallows the announcement is detected and, with no link left, given up on.
    awaits_element_ = !TakeElement(tag, size, &seq, &err);
    if (awaits_element_) return err;
  } else if (next_seq_ - acked_ >= static_cast<uint64_t>(RxTracker::kWindow)) {
    return Status::Ok();  // NCCL retries
  }
  TxMsg& m = msgs_[seq % RxTracker::kWindow];
  m.seq = seq;
  m.assigned = true;
  last_seq_ = seq;
  next_seq_ = std::max(next_seq_, seq + 1);
  sched_seq_ = std::min(sched_seq_, seq);  // a grouped send may fill a hole below the scheduler's cursor
  AddPending(static_cast<int64_t>(size));
  m.data = static_cast<const uint8_t*>(data);
  m.size = size;
  m.next_off = 0;
  m.scheduled = false;
  m.owner = owner;
  // Eager: the copy outlives NCCL's buffer, so the send may complete before the ack; a full pool
  // falls back to a normal send.
  m.eager = size <= cfg_.eager_max && cfg_.eager_max > 0 && eager_bytes_ + size <= cfg_.eager_pool;
  m.written = 0;
  if (m.eager) {
    if (m.copy.capacity() < cfg_.eager_max) m.copy.reserve(cfg_.eager_max);  // never moves: a re-send may read it
    m.copy.resize(size);
    Status st = Copy(m.copy.data(), m.data, size);   // NCCL's buffer may be GPU memory
    if (!st.ok()) {
      m.assigned = false;
      m.owner = nullptr;
      AddPending(-static_cast<int64_t>(size));
      return Fail(st.code(), "eager copy of a send failed: " + st.message());
    }
    m.data = m.copy.data();
    eager_bytes_ += size;
  }
  if (m.owner != nullptr && open_++ == 0) sched_.Publish(true);
  *posted = true;
  return Status::Ok();
}

// Grouped mode (core.h): the current group is the oldest announced one with an element no send took;
// a send is matched only once every element of it was announced (net_ib waits for the whole CTS slot).
bool SendCore::TakeElement(int tag, size_t size, uint64_t* seq, Status* err) {
  const uint64_t g = group_;
  const Elem& first = elems_[g % RxTracker::kWindow];
  if (first.seq != g) return false;  // not announced yet
  const int n = first.n;
  int pick = -1;
  for (int k = 0; k < n; ++k) {
    const Elem& e = elems_[(g + k) % RxTracker::kWindow];
    if (e.seq != g + k) return false;  // the rest of the group is on its way
    if (pick < 0 && !e.taken && e.tag == tag) pick = k;
  }
  if (pick < 0) return false;  // the tag is not free in this group: a later one (NCCL retries)
  Elem& e = elems_[(g + pick) % RxTracker::kWindow];
  if (size > e.cap) {
    *err = Status::InvalidUsage("isend of " + std::to_string(size) + " bytes with tag " + std::to_string(tag) +
                                " matches receive buffer " + std::to_string(pick) + " of " + std::to_string(n) +
                                " (message " + std::to_string(g + pick) + "), which holds only " + std::to_string(e.cap) +
                                " bytes");
    return false;
  }
  if (g + pick - acked_ >= static_cast<uint64_t>(RxTracker::kWindow)) return false;  // its TxMsg is still in use
  e.taken = true;
  *seq = g + pick;
  bool all = true;
  for (int k = 0; k < n && all; ++k) all = elems_[(g + k) % RxTracker::kWindow].taken;
  if (all) group_ = g + n;
  return true;
}

void SendCore::OnPosted(const Frame& f) {
  const int n = PostedN(f.total), k = PostedK(f.total);
  if (n < 1 || n > kMaxRecvs || k >= n || f.seq < static_cast<uint64_t>(k)) return;  // malformed: only a broken peer sends it
  if (f.seq < group_ || f.seq < acked_) return;                  // taken already (a repeated announcement)
  Elem& e = elems_[f.seq % RxTracker::kWindow];
  if (e.seq != UINT64_MAX && e.seq >= f.seq) return;             // known (duplicate), or older than the slot's
  e = Elem{f.seq, static_cast<size_t>(f.offset), PostedTag(f.total), n, k, false};
  // Receives are posted in seq order: this one's announcement is a credit for every seq up to it, so
  // its chunks need not wait for the ack that carries the credit (it may come later, on another link).
  credit_ = std::max(credit_, f.seq + 1);
}

bool SendCore::Eligible(const TxLink& l) const {
  if (!l.fsm.usable()) return false;
  if (l.spec.last_resort) return !PreferredUsable();
  if (cfg_.policy == Policy::kFailover && &l != &links_[0] && links_[0].fsm.usable() && !primary_degraded_) return false;
  return true;
}

// What an idle stream of `link` writes next: a notice for the peer, a chunk to re-send, or the next
// fresh chunk (oldest message first).
bool SendCore::NextTx(uint64_t now, int idx, TxFrame* out) {
  TxLink& l = links_[idx];
  if (state_ != ConnState::kActive || !l.has_transport || l.fsm.state() == LinkState::kFailed) return false;
  if (!notices_.empty()) {
    out->hdr = notices_.front();
    out->payload = nullptr;
    notices_.pop_front();
    return true;
  }
  if (l.hb_due) {  // bytes in flight, so the stall watchdog can judge this link while work waits
    l.hb_due = false;
    out->hdr = Frame{FrameMagic(FrameType::kHeartbeat), 0, static_cast<uint32_t>(conn_id_), l.epoch, next_seq_, acked_, 0};
    out->payload = nullptr;
    return true;
  }
  // Nothing to re-send and every message's chunks handed out: the common idle case, asked per stream
  // on every pass (what follows would find nothing either).
  if (requeue_.empty() && sched_seq_ >= next_seq_) return false;
  if (!Eligible(l)) return false;
  while (sched_seq_ < next_seq_) {  // the oldest taken message with chunks left (grouped mode: skip holes)
    const TxMsg& m = msgs_[sched_seq_ % RxTracker::kWindow];
    if (m.assigned && m.seq == sched_seq_ && !m.scheduled) break;
    ++sched_seq_;
  }
  // Fresh chunks only of messages the receiver has posted (the credit), or eager ones, which the
  // receiver always absorbs: see wire.h.
  bool fresh = sched_seq_ < next_seq_ && (sched_seq_ < credit_ || msgs_[sched_seq_ % RxTracker::kWindow].eager);
  if (!fresh && sched_seq_ < next_seq_ && want_credit_ <= sched_seq_) {
    // The oldest message with chunks left waits for its credit, which the receiver may be holding
    // back (it does while this side sends eager messages): ask once for it (wire.h kFrameWantCredit).
    want_credit_ = sched_seq_ + 1;
    out->hdr = Frame{FrameMagic(FrameType::kHeartbeat) | kFrameWantCredit, 0, static_cast<uint32_t>(conn_id_), l.epoch,
                     next_seq_, acked_, 0};
    out->payload = nullptr;
    return true;
  }
  if (requeue_.empty() && !fresh) return false;  // nothing to send (the common idle case)
  size_t chunk = FullChunk();
  auto refuse = [&] { refused_ = refused_ == 0 ? chunk : std::min<uint64_t>(refused_, chunk); };
  if (links_.size() > 1) {
    size_t n = 0;
    for (size_t i = 0; i < links_.size(); ++i) eligible_[i] = Eligible(links_[i]), n += eligible_[i];
    if (fresh) chunk = FreshChunk(msgs_[sched_seq_ % RxTracker::kWindow], n);
    if (sched_.BacklogStale()) {  // read the kernel's backlog first: SampleDue at once
      next_sample_ns_ = now;
      refuse();
      return false;
    }
    if (now != last_observe_ns_) sched_.Observe(now), last_observe_ns_ = now;
    if (!sched_.Admit(idx, eligible_, chunk, static_cast<size_t>(std::max<int64_t>(pending_bytes_, 0)))) {
      refuse();
      return false;  // another rail would finish it sooner, or this one holds enough
    }
  }
  ChunkRef c{};
  bool have = false;
  while (!requeue_.empty() && !have) {
    c = requeue_.front();
    requeue_.pop_front();
    AddPending(-static_cast<int64_t>(c.len));
    have = c.seq >= acked_;
  }
  if (have) ++resent_chunks_, resent_bytes_ += c.len, sched_.OnResent(idx);
  if (requeue_.empty() && resent_chunks_ > 0) {
    obs_->OnRetransmit(idx, resent_bytes_, resent_chunks_);
    resent_bytes_ = resent_chunks_ = 0;
  }
  if (!have) {
    if (!fresh) return false;  // the requeue held only acknowledged chunks
    TxMsg& m = msgs_[sched_seq_ % RxTracker::kWindow];
    c = ChunkRef{m.seq, m.next_off, static_cast<uint32_t>(std::min<size_t>(chunk, m.size - m.next_off))};
    m.next_off += c.len;
    AddPending(-static_cast<int64_t>(c.len));
    if (m.next_off >= m.size) m.scheduled = true, sched_seq_ += m.seq == sched_seq_;  // HasTx: nothing left
  }
  const TxMsg& m = msgs_[c.seq % RxTracker::kWindow];
  out->hdr = Frame{FrameMagic(FrameType::kData) | (m.eager ? kFrameEager : 0u), c.len, static_cast<uint32_t>(conn_id_),
                   l.epoch, c.seq, c.off, m.size};
  out->payload = m.data + c.off;
  l.inflight.push_back(c);
  sched_.OnQueued(idx, c.len);
  if (l.spec.last_resort) {
    ++last_resort_chunks_, last_resort_bytes_ += c.len;
    if (!on_last_resort_) NoteLastResort(idx, true);
  }
  return true;
}

size_t SendCore::FreshChunk(const TxMsg& m, size_t n) const {
  size_t granule = ChunkGranule(cfg_.chunk), full = FullChunk();
  if (n <= 1 || m.size >= n * full) return full;
  // A window of NCCL's 128 KiB p2p chunks, one chunk per message, put each message on one rail:
  // rerail-perf -C 1 sendrecv 0.97 of 4X on 4 x 1 Gbit/s in the simulator, and 0.91 of 3.25X on
  // X,X,X,X/4, where a whole message on the quarter-rate rail takes four fast messages' time, so the
  // window drained on the fast rails first and that rail was left idle. Cut into a chunk per link, every
  // message moves on every rail (0.98-0.99 on both, and 0.98-1.00 on the netns fabric: README).
  size_t per = (m.size / n + granule - 1) / granule * granule;
  return std::clamp(per, granule, full);
}

bool SendCore::HasTx() const {
  if (!notices_.empty() || !requeue_.empty() || sched_seq_ < next_seq_) return true;
  for (const auto& l : links_) {
    if (l.hb_due) return true;
  }
  return false;
}

void SendCore::AddPending(int64_t delta) {
  pending_bytes_ += delta;
  if (state_ == ConnState::kActive) sched_.SetPending(pending_bytes_);  // an ended comm left the shared load
}

void SendCore::OnWritten(int idx, size_t bytes) { sched_.OnWritten(idx, bytes); }

// An eager send completes once every chunk is in the transport; its copy stays until the ack.
void SendCore::OnTxDone(uint64_t /*now*/, int /*idx*/, const Frame& f) {
  if (!IsEager(f)) return;
  TxMsg& m = msgs_[f.seq % RxTracker::kWindow];
  if (m.seq != f.seq || !m.eager || m.owner == nullptr) return;
  m.written += f.len;
  if (m.written < m.size) return;
  Complete(m);
}

void SendCore::Complete(TxMsg& m) {
  if (m.owner == nullptr) return;
  done_.push_back(Completion{m.owner, m.size});
  m.owner = nullptr;
  if (--open_ == 0) sched_.Publish(false);  // Scheduler::Publish: NCCL may never drive it again
}

void SendCore::OnAck(uint64_t ack, uint64_t credit) {
  credit_ = std::max(credit_, credit);
  if (ack <= acked_ || ack > next_seq_) return;
  for (; acked_ < ack; ++acked_) {
    TxMsg& m = msgs_[acked_ % RxTracker::kWindow];
    if (!m.assigned || m.seq != acked_) continue;  // a hole acknowledged: only a broken peer does that
    m.assigned = false;
    if (!m.scheduled) {
      // Only a broken or hostile peer acknowledges chunks that were never sent; the buffer goes back
      // to NCCL now, so none of the rest may be handed out later (found by tests/fuzz/fuzz_send_core).
      AddPending(-static_cast<int64_t>(m.size - m.next_off));
      m.next_off = m.size;
      m.scheduled = true;
    }
    Complete(m);
    if (m.eager) eager_bytes_ -= m.size, m.eager = false;
  }
  for (size_t i = 0; i < links_.size(); ++i) {
    auto& q = links_[i].inflight;
    while (!q.empty() && q.front().seq < acked_) {
      sched_.OnQueued(static_cast<int>(i), -static_cast<int64_t>(q.front().len));
      q.pop_front();
    }
  }
}

void SendCore::OnControl(uint64_t now, int idx, const Frame& f) {
  TxLink& l = links_[idx];
  if (state_ == ConnState::kFailed || l.fsm.state() == LinkState::kFailed) return;
  if (!FrameValid(f) || f.conn != static_cast<uint32_t>(conn_id_) || f.len != 0) {
    FailLink(now, idx, "protocol error: bad control frame", false);
    return;
  }
  l.last_heard_ns = now;
  if (l.fsm.state() == LinkState::kProbing) {
    SetState(idx, LinkState::kHealthy, "peer answered the probe (failback)");
    l.failback_ns = now;  // the back-off restarts once it stays up for cfg_.probation_ns (FailLink)
    double before = sched_.BandwidthBps(idx);
    sched_.OnLinkBack(idx);
    RR_INFO(log::kFlagNet, "conn %016lx: link %d (%s) failed back: the rail's estimate restarts from %.0f Mb/s (was %.0f)",
            static_cast<unsigned long>(conn_id_), idx, l.spec.name.c_str(), sched_.BandwidthBps(idx) / 1e6, before / 1e6);
    obs_->OnFailback(idx);
  }
  switch (TypeOf(f)) {
    case FrameType::kAck:
    case FrameType::kHeartbeat:
      OnAck(f.seq, f.offset);
      break;
    case FrameType::kPosted:
      if (cfg_.grouped) OnPosted(f);
      else FailLink(now, idx, "protocol error: receive announcement to a sender not in grouped mode", false);
      break;
    case FrameType::kLinkDown:  // about another link, or this one (the receiver dropped it)
      if (f.seq < links_.size()) OnPeerDroppedLink(now, static_cast<int>(f.seq), f.epoch);
      break;
    default:
      FailLink(now, idx, "protocol error: unexpected frame type", false);
  }
}

void SendCore::OnPeerDroppedLink(uint64_t now, int idx, uint32_t epoch) {
  if (state_ == ConnState::kFailed || idx < 0 || static_cast<size_t>(idx) >= links_.size()) return;
  // An older incarnation than the link's current one (it reconnected since): stale.
  if (links_[idx].epoch < epoch) FailLink(now, idx, "peer reported the link down", false);
}

void SendCore::OnLinkError(uint64_t now, int idx, const std::string& why, bool peer_closed) {
  FailLink(now, idx, why, peer_closed);
}

void SendCore::FailLink(uint64_t now, int idx, const std::string& why, bool peer_closed) {
  TxLink& l = links_[idx];
  if (l.fsm.state() == LinkState::kFailed) return;
  size_t bytes = 0, chunks = 0;
  for (const ChunkRef& c : l.inflight) {
    if (c.seq < acked_) continue;
    requeue_.push_back(c);
    AddPending(c.len);
    bytes += c.len;
    ++chunks;
  }
  l.inflight.clear();
  sched_.ClearQueued(idx);
  want_credit_ = 0;  // a request for a credit may have been lost with the link: ask again on a survivor
  bool was_probing = l.fsm.state() == LinkState::kProbing;
  SetState(idx, LinkState::kFailed, why);
  l.has_transport = false;
  ++l.epoch;
  cmds_.push_back(LinkCommand{LinkCommand::kClose, idx, l.epoch - 1,
                              Frame{FrameMagic(FrameType::kLinkDown), 0, static_cast<uint32_t>(conn_id_), l.epoch,
                                    static_cast<uint64_t>(idx), 0, 0}});
  l.stall.Reset();
  // Probation: only a link that stayed up for probation_ns since its failback starts over from the
  // shortest back-off; one failing sooner keeps doubling it, so a link whose probes succeed but whose
  // data path does not (ack-only loss) is not re-admitted, and its chunks re-sent, every few hundred ms.
  if (l.failback_ns != 0 && now - l.failback_ns >= cfg_.probation_ns) {
    l.backoff_ns = cfg_.backoff_min_ns;
  } else if (l.failback_ns != 0) {
    RR_INFO(log::kFlagNet, "conn %016lx: link %d (%s) failed %lu ms after its failback (probation %lu ms): next probe in %lu ms",
            static_cast<unsigned long>(conn_id_), idx, l.spec.name.c_str(),
            static_cast<unsigned long>((now - l.failback_ns) / 1000000), static_cast<unsigned long>(cfg_.probation_ns / 1000000),
            static_cast<unsigned long>(l.backoff_ns / 1000000));
  }
  l.failback_ns = 0;
  ScheduleRetry(now, idx);
  // Counted once per link: a link reset by the peer again and again (its probes refused while a rail
  // flaps) is one link, not "every link" (tests/sim seed 131976568: link 0 reset twice, link 1
  // closed by this side's own link-down event, and the connection failed as if the peer had exited).
  l.peer_closed |= peer_closed;
  bool orderly = peer_closed && acked_ == next_seq_;
  if (orderly) return;
  int to = -1;
  for (size_t i = 0; i < links_.size() && to < 0; ++i) {
    if (links_[i].fsm.usable()) to = static_cast<int>(i);
  }
  if (!was_probing) {
    notices_.push_back(Frame{FrameMagic(FrameType::kLinkDown), 0, static_cast<uint32_t>(conn_id_), l.epoch,
                             static_cast<uint64_t>(idx), 0, 0});
    RR_WARN("%s failed (%s): re-sending %zu bytes (%zu chunks) on %d surviving link(s)", l.spec.name.c_str(),
            why.c_str(), bytes, chunks, LiveLinks());
  }
  uint64_t quiet = l.last_heard_ns != 0 && now > l.last_heard_ns ? now - l.last_heard_ns : 0;
  obs_->OnFailover(idx, why, bytes, chunks, to, quiet, was_probing);
}

void SendCore::OnRail(uint64_t now, int rail, bool down) {
  for (size_t i = 0; i < links_.size(); ++i) {
    TxLink& l = links_[i];
    if (l.spec.rail != rail) continue;
    l.rail_down = down;
    if (down) {
      // The last usable link is kept (its chunks wait in it; the give-up clock runs): closing it
      // would send the peer a FIN that arrives when the rails heal, and a peer that sees every link
      // closed takes it for this process's exit. Poll fails it once another link works.
      if (!l.fsm.usable() || LiveLinks() > 1) FailLink(now, static_cast<int>(i), "link-down event", false);
    } else if (l.fsm.state() == LinkState::kFailed) {  // probe at once
      l.retry_at_ns = now;
      l.backoff_ns = cfg_.backoff_min_ns;
    }
  }
}

void SendCore::OnSamples(uint64_t now, const std::vector<LinkSample>& samples) {
  next_sample_ns_ = now + (links_.size() > 1 ? Scheduler::kReportNs : StallCheckNs(cfg_));
  last_sample_ns_ = now;
  refused_ = 0;
  for (size_t i = 0; i < links_.size() && i < samples.size(); ++i) {
    TxLink& l = links_[i];
    if (!l.fsm.usable() || !samples[i].valid) {
      l.stall.Reset();
      continue;
    }
    l.stall.Sample(samples[i], now);
  }
  // Black hole: bytes in flight whose transport acknowledgement has not advanced for stall_ns. The
  // peer's kernel answers, not its application, so a peer that is busy, idle or not posting
  // receives never trips it, nor does a comm NCCL left unpolled. The last usable link is never
  // failed for a stall; it only starts the give-up clock.
  for (size_t i = 0; i < links_.size(); ++i) {
    TxLink& l = links_[i];
    if (l.fsm.usable() && Stalled(l) && LiveLinks() > 1) {
      FailLink(now, static_cast<int>(i), "stall: bytes unacknowledged for " + std::to_string(l.stall.age_ns / 1000000) + " ms", false);
    }
  }
  if (links_.size() > 1 && state_ == ConnState::kActive) ReportDelivered(now, samples);
  sched_.BacklogRead();
  fastest_ = 0;
  for (size_t i = 0; i < links_.size(); ++i) {
    if (links_[i].fsm.usable()) fastest_ = std::max(fastest_, sched_.BandwidthBps(static_cast<int>(i)) / 8e9);
  }
}

uint64_t SendCore::SampleAt() const {
  if (refused_ == 0) return next_sample_ns_;
  uint64_t pace = fastest_ > 0 ? std::min<uint64_t>(Scheduler::kReportNs, static_cast<uint64_t>(static_cast<double>(refused_) / fastest_))
                               : Scheduler::kReportNs;
  return std::min(next_sample_ns_, last_sample_ns_ + pace);
}

// Failover policy: a primary measurably slower than a survivor (a port negotiated down, a congested
// link) is degraded — the comm spreads over every healthy rail by completion time, the primary
// keeping its proportional share — until it is about as fast again.
void SendCore::CheckPrimarySpeed(uint64_t t) {
  // A last resort is no survivor to compare the primary with: it never takes the primary's share.
  for (size_t i = 0; i < links_.size(); ++i) eligible_[i] = links_[i].fsm.usable() && !links_[i].spec.last_resort;
  int faster = -1;
  bool now = sched_.PrimaryDegraded(eligible_, primary_degraded_, &faster);
  if (now == primary_degraded_) {
    degraded_since_ns_ = 0;
    return;
  }
  // Entering needs the verdict for kDegradeAfterNs in a row; leaving is at once.
  if (now && degraded_since_ns_ == 0) degraded_since_ns_ = t;
  if (now && t - degraded_since_ns_ < kDegradeAfterNs) return;
  degraded_since_ns_ = 0;
  primary_degraded_ = now;
  if (now && faster >= 0) {
    RR_INFO(log::kFlagNet, "conn %016lx: primary %s measured at %.0f Mb/s, below %.2fx of %s (%.0f Mb/s): "
            "RERAIL_POLICY=failover spreads over every healthy rail", static_cast<unsigned long>(conn_id_),
            links_[0].spec.name.c_str(), sched_.BandwidthBps(0) / 1e6, Scheduler::kDegradedSpeed,
            links_[faster].spec.name.c_str(), sched_.BandwidthBps(faster) / 1e6);
  } else {
    RR_INFO(log::kFlagNet, "conn %016lx: primary rail back to %.0f Mb/s: RERAIL_POLICY=failover keeps to it again",
            static_cast<unsigned long>(conn_id_), sched_.BandwidthBps(0) / 1e6);
  }
}

// Feeds the scheduler's bandwidth estimate with what the peer's transport acknowledged on each link.
void SendCore::ReportDelivered(uint64_t now, const std::vector<LinkSample>& samples) {
  for (size_t i = 0; i < links_.size(); ++i) {
    TxLink& l = links_[i];
    if (!l.fsm.usable() || i >= samples.size() || !samples[i].valid) {
      l.acked_base = UINT64_MAX;
      continue;
    }
    uint64_t acked = 0, notsent = 0, outq = 0, rtt = 0, rwnd = 0;
    bool peer_full = false;  // a stream's peer window is closed (unknown counts as closed)
    for (int s = 0; s < samples[i].streams; ++s) {
      acked += samples[i].s[s].acked_bytes;
      notsent += samples[i].s[s].notsent;
      outq += samples[i].s[s].outq;
      rtt = std::max(rtt, samples[i].s[s].min_rtt_ns);
      rwnd += samples[i].s[s].rwnd_limited_ns;
      peer_full |= samples[i].s[s].peer_window < kClosedWindow || samples[i].s[s].peer_window == UINT64_MAX;
    }
    sched_.OnRtt(static_cast<int>(i), rtt);
    // The kernel's count first: "the rail was the limit" (bytes waiting in the socket, or the rail
    // full by the scheduler's cap) must be judged on the current backlog — a stale one would count
    // a drained, idle rail as busy, measure it slower than it is, give it less work, and spiral.
    sched_.OnKernelQueue(static_cast<int>(i), outq);
    // An idle link (nothing acknowledged, nothing waiting) says nothing about its rail.
    if (l.acked_base != UINT64_MAX && acked >= l.acked_base && (acked > l.acked_base || notsent > 0)) {
      bool limited = notsent > 0 || sched_.RailFull(static_cast<int>(i), cfg_.chunk);
      // Bytes held back by the peer's closed receive window (its application not reading: NCCL
      // leaves a comm unpolled for seconds) measure the receiver, not the rail: a report over which
      // the streams' window-limited time (summed) grew by half the interval or more, with a peer
      // window closed now, is not "the rail was the limit". Counted, a receiver's pause became the
      // rail's first sample, ~0 bytes/s, and the cap it sets held the rail to one chunk per round
      // trip (tests/sim seed 13124969). A window that stays open while it limits is a window below
      // the path's bandwidth-delay product: that is the rail's rate for this connection, and a
      // sample (seed 100466320: 19 KB windows on a 7 ms rail and a 0.4 ms one; without samples the
      // long rail kept its nominal rate and every 512 KiB message on it took 27 round trips).
      if (peer_full && rwnd > l.rwnd_base && now > l.report_ns && 2 * (rwnd - l.rwnd_base) >= now - l.report_ns) limited = false;
      sched_.OnDelivered(static_cast<int>(i), acked - l.acked_base, limited, now);
    }
    l.acked_base = acked;
    l.rwnd_base = rwnd;
    l.report_ns = now;
  }
  if (cfg_.policy == Policy::kFailover) CheckPrimarySpeed(now);  // the estimates change only here
}

// Timers: failback probes, bandwidth reports, give-up, and the peer closing every link.
void SendCore::Poll(uint64_t now) {
  if (state_ != ConnState::kActive) return;
  for (size_t i = 0; i < links_.size(); ++i) {
    TxLink& l = links_[i];
    if (l.fsm.state() == LinkState::kFailed && !l.has_transport && now >= l.retry_at_ns && !l.rail_down) {
      SetState(static_cast<int>(i), LinkState::kProbing, "re-probing after back-off");
      StartConnect(now, static_cast<int>(i));
    } else if (l.fsm.state() == LinkState::kProbing && l.has_transport && now - l.probe_since_ns > ProbeTimeoutNs()) {
      // A probe connection that stays silent (a connect or a stream swallowed by a rail still dark,
      // whose transport may take minutes to give up) is replaced by a fresh one after back-off, so
      // a healed rail is re-admitted within back-off + connect + one round trip.
      FailLink(now, static_cast<int>(i), "probe unanswered for " + std::to_string((now - l.probe_since_ns) / 1000000) + " ms", false);
    }
  }
  // While a send waits, every usable link carries a heartbeat per period: with no chunk to write (the
  // receiver's credit, acks or announcements lost in a black hole) nothing would be in flight, the
  // watchdog could not see the link die, and a sender with every link black-holed would never give up.
  if (SendWaits()) {
    for (auto& l : links_) {
      if (l.fsm.usable() && now >= l.next_hb_ns) l.hb_due = true, l.next_hb_ns = now + cfg_.heartbeat_ns;
    }
  }
  if (now >= next_board_ns_) {  // publish the scheduler's bandwidth estimates
    next_board_ns_ = now + cfg_.heartbeat_ns;
    for (size_t i = 0; i < links_.size(); ++i) {
      if (links_[i].fsm.usable()) {
        obs_->OnBandwidth(static_cast<int>(i), static_cast<uint64_t>(sched_.BandwidthBps(static_cast<int>(i)) / 8));
      }
    }
  }
  for (size_t i = 0; i < links_.size(); ++i) {  // a link kept on a downed rail, now that another works
    if (links_[i].fsm.usable() && links_[i].rail_down && LiveLinks() > 1) {
      FailLink(now, static_cast<int>(i), "link-down event", false);
    }
  }
  int live = LiveLinks();
  int working = 0;
  for (const auto& l : links_) working += l.fsm.usable() && !Stalled(l) && !l.rail_down;
  bool give_up = GiveUpDue(next_seq_ > 0 || awaits_element_, working, now, cfg_.giveup_ns);
  if (working == 0) HastenRetries(now);  // the give-up clock runs (or would, with a request open)
  if (live > 0) {
    for (auto& f : links_) f.peer_closed = false;
    if (give_up) {
      (void)Fail(Code::kRemoteError, "no progress on any link (" + links_[0].spec.name + ") for RERAIL_GIVEUP_MS (" +
                                         std::to_string(cfg_.giveup_ns / 1000000) + " ms)");
    }
    return;
  }
  int closed = 0;
  for (const auto& f : links_) closed += f.peer_closed;
  if (closed == static_cast<int>(links_.size())) {
    if (acked_ == next_seq_) {  // everything delivered: an orderly close by the receiver
      Transition(ConnState::kPeerClosed, "receiver closed the connection");
      return;
    }
    (void)Fail(Code::kRemoteError, "peer closed every link (" + links_[0].spec.name + ")");
    return;
  }
  if (give_up) {
    (void)Fail(Code::kRemoteError, "no link (" + links_[0].spec.name + ") for RERAIL_GIVEUP_MS (" +
                                       std::to_string(cfg_.giveup_ns / 1000000) + " ms)");
  }
}

uint64_t SendCore::Deadline() const {
  if (state_ != ConnState::kActive) return UINT64_MAX;
  uint64_t d = std::min(SampleAt(), next_board_ns_);
  for (const auto& l : links_) {
    if (l.fsm.state() == LinkState::kFailed && !l.has_transport && !l.rail_down) d = std::min(d, l.retry_at_ns);
    if (l.fsm.state() == LinkState::kProbing && l.has_transport) d = std::min(d, l.probe_since_ns + ProbeTimeoutNs() + 1);
  }
  if (SendWaits()) {
    for (const auto& l : links_) {
      if (l.fsm.usable()) d = std::min(d, l.next_hb_ns);
    }
  }
  if (no_link_since_ns_ != 0) d = std::min(d, no_link_since_ns_ + cfg_.giveup_ns + 1);
  if (degraded_since_ns_ != 0) d = std::min(d, degraded_since_ns_ + kDegradeAfterNs);
  return d;
}

}  // namespace rr::net
