#include <algorithm>
#include <cstring>

#include "conn.h"
#include "rerail/clock.h"
#include "rerail/log.h"
#include "rerail/prof_net_event.h"
#include "rerail/rails/board.h"

namespace rr::net {

const char* ConnStateName(ConnState s) {
  switch (s) {
    case ConnState::kActive: return "active";
    case ConnState::kPeerClosed: return "peer-closed";
    case ConnState::kFailed: return "failed";
  }
  return "?";
}

void Comm::Transition(ConnState to, const std::string& why) {
  if (state_ == to || state_ == ConnState::kFailed) return;  // failure is final
  RR_INFO(log::kFlagNet, "conn %016lx: %s -> %s (%s)", static_cast<unsigned long>(conn_id_), ConnStateName(state_),
          ConnStateName(to), why.c_str());
  if (to == ConnState::kFailed) RR_WARN("connection %016lx failed: %s", static_cast<unsigned long>(conn_id_), why.c_str());
  state_ = to;
}

Status Comm::Fail(Code code, const std::string& why) {
  Transition(ConnState::kFailed, why);
  if (failure_.ok()) failure_ = Status(code, why);
  return failure_;
}

// A request posted once the connection has ended (peer closed, or failed): NCCL's socket transport
// accepts such a post and reports the error from test(), and so does rerail (net_plugin/README.md,
// "Peer compatibility"). The request is never queued; test() returns EndedStatus() every time.
Status Comm::PostAfterEnd(bool is_send, size_t size, Request** req) {
  Request* r = pool_.Get(is_send);
  if (r == nullptr) return Status::Ok();  // every request in use: NCCL retries the post
  r->seq = kSeqPostedAfterEnd;
  r->size = size;
  *req = r;
  return Status::Ok();
}

Status Comm::EndedStatus(const char* what) {
  if (state_ == ConnState::kFailed) return failure_;
  return Fail(Code::kRemoteError, what);
}

bool Comm::GiveUpDue(int working, uint64_t now, uint64_t giveup_ns) {
  if (working > 0) {
    no_link_since_ns_ = 0;
    return false;
  }
  if (no_link_since_ns_ == 0) no_link_since_ns_ = now;
  return now - no_link_since_ns_ > giveup_ns;
}

void Comm::ProfStart(prof::NetEventEmitter* e, Request* r, void* phandle, int rail) {
  if (e == nullptr || phandle == nullptr) return;
  r->io = prof::MakeNetEvent(RR_PROF_NET_EV_IO, rail);
  r->io.flags = r->is_send ? RR_PROF_NET_FLAG_SEND : 0;
  r->io.connId = static_cast<uint32_t>(conn_id_);
  r->io.bytes = r->is_send ? r->size : 0;
  r->prof = e->StartIo(phandle, &r->io);
}

void Comm::ProfStop(prof::NetEventEmitter* e, Request* r) {
  if (r->prof == nullptr) return;
  r->io.bytes = r->size;
  e->UpdateIo(r->prof, &r->io);
  e->StopIo(r->prof);
  r->prof = nullptr;
}

SendComm::SendComm(const ConnConfig& cfg, const Nonce& nonce, uint64_t conn_id, std::vector<LinkPlan> plan)
    : Comm(kSendCommMagic), cfg_(cfg), nonce_(nonce), links_(plan.size()) {
  conn_id_ = conn_id;
  setup_start_ns_ = NowNs();
  std::vector<double> nominal;
  std::vector<int> devs;
  for (const auto& p : plan) {
    nominal.push_back(cfg_.transport->Device(p.local_dev).speed_mbps * 1e6);
    devs.push_back(p.local_dev);
  }
  sched_.Reset(devs, nominal, cfg_.loads);
  eligible_.assign(plan.size(), false);
  for (size_t i = 0; i < plan.size(); ++i) {
    TxLink& l = links_[i];
    l.plan = plan[i];
    l.backoff_ms = cfg_.backoff_min_ms;
    char who[160];
    snprintf(who, sizeof(who), "conn %016lx link %zu (rail %s -> %s)", static_cast<unsigned long>(conn_id),
             i, cfg_.transport->Device(l.plan.local_dev).name.c_str(), l.plan.remote.ToString().c_str());
    l.fsm.set_who(who);
    l.fsm.set_prof(cfg_.prof, l.plan.local_dev);
    l.rail_gen = RailGen(cfg_.rails, l.plan.local_dev);
    StartConnect(l);
  }
}

namespace {
constexpr uint64_t kEagerLingerMs = 1000;
}  // namespace

SendComm::~SendComm() {
  Deadline dl = Deadline::AfterMs(kEagerLingerMs);
  while (eager_bytes_ > 0 && state_ == ConnState::kActive && LiveLinks() > 0 && !dl.Expired()) {
    if (!Progress().ok()) break;
  }
  if (eager_bytes_ > 0) {
    RR_INFO(log::kFlagNet, "conn %016lx closed with %zu eager bytes unacknowledged", static_cast<unsigned long>(conn_id_),
            eager_bytes_);
  }
  for (size_t i = 0; i < links_.size(); ++i) sched_.ClearQueued(static_cast<int>(i));  // the rails' shared load
}

void SendComm::StartConnect(TxLink& l) {
  LinkIdentity id;
  id.nonce = nonce_;
  id.conn_id = conn_id_;
  id.chunk_size = cfg_.chunk;
  id.rail = l.plan.remote_rail;
  id.link = static_cast<int>(&l - links_.data());
  id.nstreams = cfg_.streams;
  id.epoch = l.epoch;
  Status st = cfg_.transport->Connect(l.plan.local_dev, l.plan.remote, id, &l.connector);
  if (!st.ok()) {
    l.connector.reset();
    l.retry_at_ns = NowNs() + l.backoff_ms * 1000000ull;
    RR_INFO(log::kFlagNet, "link %d connect: %s", id.link, st.ToString().c_str());
  }
}

// Polls a link's connector; an established link starts carrying data (first connect) or waits for
// the peer's answer on it (failback probe).
Status SendComm::PollConnector(TxLink& l) {
  if (!l.connector) return Status::Ok();
  std::unique_ptr<Link> link;
  Status st = l.connector->Poll(&link);
  if (!st.ok()) {
    l.connector.reset();
    if (l.fsm.state() != LinkState::kFailed) l.fsm.Transition(LinkState::kFailed, st.message());
    l.retry_at_ns = NowNs() + l.backoff_ms * 1000000ull;
    l.backoff_ms = std::min(l.backoff_ms * 2, cfg_.backoff_max_ms);
    return Status::Ok();
  }
  if (!link) return Status::Ok();
  l.connector.reset();
  l.link = std::move(link);
  l.tx.assign(l.link->streams(), TxStream{});
  l.in_got = 0;
  l.last_heard_ns = NowNs();
  if (l.fsm.state() == LinkState::kConnecting) l.fsm.Transition(LinkState::kHealthy, "connected");
  return Status::Ok();
}

Status SendComm::PollConnect(bool* ready) {
  *ready = false;
  for (auto& l : links_) RR_CHECK(PollConnector(l));
  bool primary_settled = links_[0].fsm.state() != LinkState::kConnecting;
  bool grace_over = NowNs() - setup_start_ns_ > cfg_.connect_grace_ns;
  int live = LiveLinks();
  if (live > 0 && (links_[0].fsm.usable() || primary_settled || grace_over)) {
    *ready = true;
    return Status::Ok();
  }
  bool all_failed = true;
  for (auto& l : links_) all_failed &= (l.fsm.state() == LinkState::kFailed && !l.connector);
  if (all_failed && NowNs() > setup_start_ns_ + cfg_.giveup_ns) {
    return Status::Remote("could not connect on any rail to " + links_[0].plan.remote.ToString());
  }
  // Rails that failed during setup are retried with back-off until the connect timeout (the
  // connector's own deadline) or give-up.
  for (auto& l : links_) {
    if (l.fsm.state() == LinkState::kFailed && !l.connector && NowNs() >= l.retry_at_ns) StartConnect(l);
  }
  return Status::Ok();
}

int SendComm::LiveLinks() const {
  int n = 0;
  for (const auto& l : links_) n += l.fsm.usable();
  return n;
}

Status SendComm::Isend(const void* data, size_t size, void* phandle, Request** req) {
  *req = nullptr;
  if (state_ == ConnState::kFailed || state_ == ConnState::kPeerClosed) return PostAfterEnd(true, size, req);
  if (size > 0 && data == nullptr) return Status::Internal("isend of " + std::to_string(size) + " bytes from NULL");
  if (next_seq_ - acked_ >= static_cast<uint64_t>(RxTracker::kWindow)) return Progress();  // NCCL retries
  Request* r = pool_.Get(true);
  if (r == nullptr) return Status::Ok();
  TxMsg& m = msgs_[next_seq_ % RxTracker::kWindow];
  m.seq = next_seq_++;
  pending_bytes_ += static_cast<int64_t>(size);
  m.data = static_cast<const uint8_t*>(data);
  m.size = size;
  m.next_off = 0;
  m.scheduled = false;
  m.req = r;
  // Eager: the copy outlives NCCL's buffer, so the send may complete before the ack; a full pool
  // falls back to a normal send.
  m.eager = size <= cfg_.eager_max && cfg_.eager_max > 0 && eager_bytes_ + size <= cfg_.eager_pool;
  m.written = 0;
  if (m.eager) {
    if (m.copy.capacity() < cfg_.eager_max) m.copy.reserve(cfg_.eager_max);  // never moves: a re-send may read it
    m.copy.assign(m.data, m.data + size);
    m.data = m.copy.data();
    eager_bytes_ += size;
  }
  r->seq = m.seq;
  r->size = size;
  ProfStart(cfg_.prof, r, phandle, links_[0].plan.local_dev);
  *req = r;
  (void)Progress();  // a failure found here is reported by test() on this request
  return Status::Ok();
}

bool SendComm::Eligible(const TxLink& l) const {
  if (!l.fsm.usable()) return false;
  if (cfg_.policy == Policy::kFailover && &l != &links_[0] && links_[0].fsm.usable() && !primary_degraded_) return false;
  return true;
}

// Picks what an idle stream of `l` writes next: a notice for the peer, a chunk to re-send, or the
// next fresh chunk (oldest message first).
bool SendComm::NextItem(TxLink& l, TxStream* s) {
  s->payload = nullptr;
  s->len = 0;
  s->done = 0;
  if (!notices_.empty()) {
    s->hdr = notices_.front();
    notices_.pop_front();
    s->busy = true;
    return true;
  }
  if (!Eligible(l)) return false;
  while (sched_seq_ < next_seq_ && msgs_[sched_seq_ % RxTracker::kWindow].scheduled) ++sched_seq_;
  // Fresh chunks only of messages the receiver has posted (the credit), or eager ones, which the
  // receiver always absorbs: see wire.h.
  bool fresh = sched_seq_ < next_seq_ && (sched_seq_ < credit_ || msgs_[sched_seq_ % RxTracker::kWindow].eager);
  if (requeue_.empty() && !fresh) return false;  // nothing to send (the common idle case)
  int idx = static_cast<int>(&l - links_.data());
  if (links_.size() > 1) {
    for (size_t i = 0; i < links_.size(); ++i) eligible_[i] = Eligible(links_[i]);
    if (!sched_.Admit(idx, eligible_, cfg_.chunk, static_cast<size_t>(std::max<int64_t>(pending_bytes_, 0)))) {
      return false;  // another rail would finish it sooner, or this one holds enough
    }
  }
  ChunkRef c{};
  bool have = false;
  while (!requeue_.empty() && !have) {
    c = requeue_.front();
    requeue_.pop_front();
    pending_bytes_ -= c.len;
    have = c.seq >= acked_;
  }
  if (have) ++resent_chunks_, resent_bytes_ += c.len;
  if (requeue_.empty() && resent_chunks_ > 0) PostRetransmit(idx);
  if (!have) {
    if (!fresh) return false;  // the requeue held only acknowledged chunks
    TxMsg& m = msgs_[sched_seq_ % RxTracker::kWindow];
    c = ChunkRef{m.seq, m.next_off, static_cast<uint32_t>(std::min<size_t>(cfg_.chunk, m.size - m.next_off))};
    m.next_off += c.len;
    pending_bytes_ -= c.len;
    if (m.next_off >= m.size) m.scheduled = true;
  }
  const TxMsg& m = msgs_[c.seq % RxTracker::kWindow];
  s->hdr = Frame{FrameMagic(FrameType::kData) | (m.eager ? kFrameEager : 0u), c.len, static_cast<uint32_t>(conn_id_), l.epoch, c.seq, c.off, m.size};
  s->payload = m.data + c.off;
  s->len = c.len;
  s->busy = true;
  l.inflight.push_back(c);
  sched_.OnQueued(idx, c.len);
  return true;
}

Status SendComm::WriteStream(TxLink& l, int i, bool* progressed) {
  TxStream& s = l.tx[i];
  for (;;) {
    if (!s.busy && !NextItem(l, &s)) return Status::Ok();
    iovec iov[2];
    int cnt = 0;
    if (s.done < sizeof(Frame)) {
      iov[cnt++] = {reinterpret_cast<uint8_t*>(&s.hdr) + s.done, sizeof(Frame) - s.done};
      if (s.len > 0) iov[cnt++] = {const_cast<uint8_t*>(s.payload), s.len};
    } else {
      size_t off = s.done - sizeof(Frame);
      iov[cnt++] = {const_cast<uint8_t*>(s.payload) + off, s.len - off};
    }
    size_t n = 0;
    int err = 0;
    IoState st = l.link->Writev(i, iov, cnt, &n, &err);
    if (st == IoState::kAgain) return Status::Ok();
    if (st != IoState::kOk) {
      FailLink(l, std::string("send failed: ") + (st == IoState::kClosed ? "closed" : strerror(err)),
               err == ECONNRESET || err == EPIPE);
      return Status::Ok();
    }
    *progressed = true;
    sched_.OnWritten(static_cast<int>(&l - links_.data()), n);
    if (cfg_.board) cfg_.board->AddBytes(l.plan.local_dev, n, 0);
    l.bytes += n;
    s.done += n;
    if (s.done < sizeof(Frame) + s.len) return Status::Ok();  // socket buffer full
    s.busy = false;
    if (IsEager(s.hdr)) OnChunkWritten(s.hdr);
  }
}

// An eager send completes once every chunk is in the kernel; its copy stays until the ack.
void SendComm::OnChunkWritten(const Frame& f) {
  TxMsg& m = msgs_[f.seq % RxTracker::kWindow];
  if (m.seq != f.seq || !m.eager || m.req == nullptr) return;
  m.written += f.len;
  if (m.written < m.size) return;
  m.req->state = ReqState::kDone;
  m.req = nullptr;
  ForgetBacklogIfIdle();
}

// With no request of this comm open, NCCL may never call it again: its share of the rails' kernel
// backlog (eager bytes not yet acknowledged) must not linger and hold other comms off those rails.
void SendComm::ForgetBacklogIfIdle() {
  for (uint64_t s = acked_; s < next_seq_; ++s) {
    if (msgs_[s % RxTracker::kWindow].req != nullptr) return;
  }
  for (size_t i = 0; i < links_.size(); ++i) sched_.OnKernelQueue(static_cast<int>(i), 0);
}

void SendComm::OnAck(uint64_t ack, uint64_t credit) {
  credit_ = std::max(credit_, credit);
  if (ack <= acked_ || ack > next_seq_) return;
  for (; acked_ < ack; ++acked_) {
    TxMsg& m = msgs_[acked_ % RxTracker::kWindow];
    if (m.req != nullptr) m.req->state = ReqState::kDone;
    m.req = nullptr;
    if (m.eager) eager_bytes_ -= m.size, m.eager = false;
  }
  for (size_t i = 0; i < links_.size(); ++i) {
    auto& q = links_[i].inflight;
    while (!q.empty() && q.front().seq < acked_) {
      sched_.OnQueued(static_cast<int>(i), -static_cast<int64_t>(q.front().len));
      q.pop_front();
    }
  }
  ForgetBacklogIfIdle();
}

Status SendComm::ReadControl(TxLink& l) {
  for (;;) {
    size_t n = 0;
    int err = 0;
    IoState st = l.link->Read(0, reinterpret_cast<uint8_t*>(&l.in) + l.in_got, sizeof(Frame) - l.in_got, &n, &err);
    if (st == IoState::kAgain) return Status::Ok();
    if (st != IoState::kOk) {
      bool peer_closed = st == IoState::kClosed || err == ECONNRESET;
      FailLink(l, st == IoState::kClosed ? "peer closed the link" : std::string("receive failed: ") + strerror(err),
               peer_closed);
      return Status::Ok();
    }
    l.in_got += n;
    if (l.in_got < sizeof(Frame)) continue;
    l.in_got = 0;
    const Frame& f = l.in;
    if (!FrameValid(f) || f.conn != static_cast<uint32_t>(conn_id_) || f.len != 0) {
      FailLink(l, "protocol error: bad control frame", false);
      return Status::Ok();
    }
    l.last_heard_ns = NowNs();
    if (l.fsm.state() == LinkState::kProbing) {
      l.fsm.Transition(LinkState::kHealthy, "peer answered the probe (failback)");
      l.backoff_ms = cfg_.backoff_min_ms;
      if (cfg_.prof) {
        auto ev = prof::MakeNetEvent(RR_PROF_NET_EV_FAILBACK, l.plan.local_dev, "probe-ok");
        ev.connId = static_cast<uint32_t>(conn_id_);
        cfg_.prof->Post(ev);
      }
      if (cfg_.board) {
        cfg_.board->CountFailback(l.plan.local_dev);
        cfg_.board->SetState(l.plan.local_dev, rails::RailState::kHealthy, rails::RailEvent::kProbeOk);
      }
    }
    switch (TypeOf(f)) {
      case FrameType::kAck:
      case FrameType::kHeartbeat:
        OnAck(f.seq, f.offset);
        break;
      case FrameType::kLinkDown:
        if (f.seq < links_.size() && &links_[f.seq] != &l) FailLink(links_[f.seq], "peer reported the link down", false);
        break;
      default:
        FailLink(l, "protocol error: unexpected frame type", false);
        return Status::Ok();
    }
  }
}

void SendComm::FailLink(TxLink& l, const std::string& why, bool peer_closed) {
  if (l.fsm.state() == LinkState::kFailed) return;
  int idx = static_cast<int>(&l - links_.data());
  size_t bytes = 0, chunks = 0;
  for (const ChunkRef& c : l.inflight) {
    if (c.seq < acked_) continue;
    requeue_.push_back(c);
    pending_bytes_ += c.len;
    bytes += c.len;
    ++chunks;
  }
  l.inflight.clear();
  sched_.ClearQueued(idx);
  bool was_probing = l.fsm.state() == LinkState::kProbing;
  l.fsm.Transition(LinkState::kFailed, why);
  l.link.reset();
  l.connector.reset();
  l.tx.clear();
  ++l.epoch;
  uint64_t now = NowNs();
  l.retry_at_ns = now + l.backoff_ms * 1000000ull;
  l.backoff_ms = std::min(l.backoff_ms * 2, cfg_.backoff_max_ms);
  if (peer_closed) ++peer_closed_links_;
  int live = LiveLinks();
  bool orderly = peer_closed && acked_ == next_seq_;
  if (cfg_.board && !orderly) {
    cfg_.board->AddRetransmit(l.plan.local_dev, chunks, bytes);
    if (!was_probing) cfg_.board->CountFailover(l.plan.local_dev);
    FailCause cause = CauseOf(why);
    cfg_.board->SetState(l.plan.local_dev, rails::RailState::kFailed,
                         cause == FailCause::kStall      ? rails::RailEvent::kStall
                         : cause == FailCause::kLinkDown ? rails::RailEvent::kLinkDown
                                                         : rails::RailEvent::kError);
  }
  if (!was_probing && !orderly) {
    notices_.push_back(Frame{FrameMagic(FrameType::kLinkDown), 0, static_cast<uint32_t>(conn_id_), l.epoch,
                             static_cast<uint64_t>(idx), 0, 0});
    RR_WARN("rail %s to peer %s failed (%s): re-sending %zu bytes (%zu chunks) on %d surviving link(s)",
            cfg_.transport->Device(l.plan.local_dev).name.c_str(), l.plan.remote.ToString().c_str(), why.c_str(),
            bytes, chunks, live);
    if (cfg_.prof) PostFailover(l, why, bytes, chunks, now);
  }
}

void SendComm::PostFailover(const TxLink& l, const std::string& why, size_t bytes, size_t chunks, uint64_t now) {
  auto ev = prof::MakeNetEvent(RR_PROF_NET_EV_FAILOVER, l.plan.local_dev, ShortReason(why));
  for (const auto& o : links_) {
    if (o.fsm.usable()) {
      ev.toRail = o.plan.local_dev;
      break;
    }
  }
  ev.connId = static_cast<uint32_t>(conn_id_);
  ev.bytes = bytes;
  ev.count = chunks;
  ev.stallNs = l.last_heard_ns != 0 && now > l.last_heard_ns ? now - l.last_heard_ns : 0;
  last_failed_rail_ = l.plan.local_dev;
  cfg_.prof->Post(ev);
}

void SendComm::PostRetransmit(int to_link) {
  if (cfg_.prof) {
    auto ev = prof::MakeNetEvent(RR_PROF_NET_EV_RETRANSMIT, last_failed_rail_, "requeued");
    ev.toRail = links_[to_link].plan.local_dev;
    ev.connId = static_cast<uint32_t>(conn_id_);
    ev.bytes = resent_bytes_;
    ev.count = resent_chunks_;
    cfg_.prof->Post(ev);
  }
  resent_bytes_ = resent_chunks_ = 0;
}

Status SendComm::Watchdog(uint64_t now) {
  for (size_t i = 0; i < links_.size(); ++i) {
    TxLink& l = links_[i];
    switch (PollRail(cfg_.rails, l.plan.local_dev, &l.rail_gen)) {
      case RailChange::kDown: FailLink(l, "link-down event", false); break;
      case RailChange::kUp:  // probe at once
        if (l.fsm.state() == LinkState::kFailed) l.retry_at_ns = now, l.backoff_ms = cfg_.backoff_min_ms;
        break;
      case RailChange::kNone: break;
    }
    // Black hole: bytes in flight whose TCP acknowledgement has not advanced for RERAIL_STALL_MS. The
    // peer's kernel answers, not its application, so a peer that is busy, idle or not posting
    // receives (zero window: nothing in flight) never trips it, nor does a comm NCCL left unpolled.
    // The last usable link is never failed for a stall; it only starts the give-up clock.
    if (!l.fsm.usable() || !l.link) {
      l.stall.ms = 0;
    } else if (l.stall.Sample(*l.link, now, cfg_) && l.stall.stalled(cfg_) && LiveLinks() > 1) {
      FailLink(l, "stall: bytes unacknowledged for " + std::to_string(l.stall.ms) + " ms", false);
    }
    if (l.fsm.state() == LinkState::kFailed && !l.connector && now >= l.retry_at_ns &&
        !(cfg_.rails && cfg_.rails->down[l.plan.local_dev].load(std::memory_order_relaxed))) {
      l.fsm.Transition(LinkState::kProbing, "re-probing after back-off");
      StartConnect(l);
      if (!l.connector) l.fsm.Transition(LinkState::kFailed, "probe could not start");
    }
  }
  if (cfg_.board && now >= next_board_ns_) {  // publish the scheduler's bandwidth estimates
    next_board_ns_ = now + cfg_.heartbeat_ns;
    for (size_t i = 0; i < links_.size(); ++i) {
      if (links_[i].fsm.usable()) {
        cfg_.board->SetBandwidth(links_[i].plan.local_dev, static_cast<uint64_t>(sched_.BandwidthBps(static_cast<int>(i)) / 8));
      }
    }
  }
  int live = LiveLinks();
  int working = 0;
  for (const auto& l : links_) working += l.fsm.usable() && !l.stall.stalled(cfg_);
  bool give_up = GiveUpDue(working, now, cfg_.giveup_ns);
  if (live > 0) {
    peer_closed_links_ = 0;
    if (give_up) {
      return Fail(Code::kRemoteError, "no progress on any link to " + links_[0].plan.remote.ToString() +
                                          " for RERAIL_GIVEUP_MS (" + std::to_string(cfg_.giveup_ns / 1000000) + " ms)");
    }
    return Status::Ok();
  }
  if (peer_closed_links_ >= static_cast<int>(links_.size()) || (links_.size() == 1 && peer_closed_links_ > 0)) {
    if (acked_ == next_seq_) {  // everything delivered: an orderly close by the receiver
      Transition(ConnState::kPeerClosed, "receiver closed the connection");
      return Status::Ok();
    }
    return Fail(Code::kRemoteError, "peer " + links_[0].plan.remote.ToString() + " closed every link");
  }
  if (give_up) {
    return Fail(Code::kRemoteError, "no link to " + links_[0].plan.remote.ToString() + " for RERAIL_GIVEUP_MS (" +
                                        std::to_string(cfg_.giveup_ns / 1000000) + " ms)");
  }
  return Status::Ok();
}

// Failover policy: a primary measurably slower than a survivor (a port negotiated down, a congested
// link) is degraded — the comm spreads over every healthy rail by completion time, the primary
// keeping its proportional share — until it is about as fast again.
void SendComm::CheckPrimarySpeed(uint64_t t) {
  for (size_t i = 0; i < links_.size(); ++i) eligible_[i] = links_[i].fsm.usable();
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
            links_[0].link ? links_[0].link->Describe().c_str() : "?", sched_.BandwidthBps(0) / 1e6, Scheduler::kDegradedSpeed,
            links_[faster].link ? links_[faster].link->Describe().c_str() : "?", sched_.BandwidthBps(faster) / 1e6);
  } else {
    RR_INFO(log::kFlagNet, "conn %016lx: primary rail back to %.0f Mb/s: RERAIL_POLICY=failover keeps to it again",
            static_cast<unsigned long>(conn_id_), sched_.BandwidthBps(0) / 1e6);
  }
}

// Feeds the scheduler's bandwidth estimate with what the peer's TCP acknowledged on each live link.
void SendComm::ReportDelivered(uint64_t now) {
  if (now < next_report_ns_) return;
  next_report_ns_ = now + Scheduler::kReportNs;
  for (size_t i = 0; i < links_.size(); ++i) {
    TxLink& l = links_[i];
    uint64_t acked = 0, notsent = 0, outq = 0;
    if (!l.fsm.usable() || !l.link || !l.link->TxCounters(&acked, &notsent, &outq)) {
      l.acked_base = UINT64_MAX;
      continue;
    }
    // The kernel's count first: "the rail was the limit" (bytes waiting in the socket, or the rail
    // full by the scheduler's cap) must be judged on the current backlog — a stale one would count
    // a drained, idle rail as busy, measure it slower than it is, give it less work, and spiral.
    sched_.OnKernelQueue(static_cast<int>(i), outq);
    // An idle link (nothing acknowledged, nothing waiting) says nothing about its rail.
    if (l.acked_base != UINT64_MAX && acked >= l.acked_base && (acked > l.acked_base || notsent > 0)) {
      bool limited = notsent > 0 || sched_.RailFull(static_cast<int>(i), cfg_.chunk);
      sched_.OnDelivered(static_cast<int>(i), acked - l.acked_base, limited, now);
    }
    l.acked_base = acked;
  }
  if (cfg_.policy == Policy::kFailover) CheckPrimarySpeed(now);  // the estimates change only here
}

Status SendComm::Progress() {
  if (state_ == ConnState::kFailed) return failure_;
  if (state_ == ConnState::kPeerClosed) return Status::Ok();  // nothing outstanding by construction
  if (links_.size() > 1) sched_.Observe(NowNs());
  for (int pass = 0; pass < 64; ++pass) {
    bool progressed = false;
    for (auto& l : links_) {
      if (!l.link) continue;
      for (int i = 0; i < static_cast<int>(l.tx.size()) && l.link; ++i) RR_CHECK(WriteStream(l, i, &progressed));
    }
    if (!progressed) break;
  }
  for (auto& l : links_) {
    if (l.link) RR_CHECK(ReadControl(l));
    else RR_CHECK(PollConnector(l));
  }
  uint64_t now = NowNs();
  if (links_.size() > 1) ReportDelivered(now);
  return Watchdog(now);
}

Status SendComm::Test(Request* r, int* done, int* size) {
  *done = 0;
  if (r->seq == kSeqPostedAfterEnd) return EndedStatus("isend after the receiver closed the connection");
  if (r->state != ReqState::kDone) {
    Status st = Progress();
    if (!st.ok() && r->state != ReqState::kDone) return st;  // completed before the failure: still done
  }
  if (r->state != ReqState::kDone) return Status::Ok();
  *done = 1;
  if (size != nullptr) *size = static_cast<int>(r->size);
  ProfStop(cfg_.prof, r);
  pool_.Put(r);
  return Status::Ok();
}

}  // namespace rr::net
