// The TCP driver of the sending core (conn.h, core/core.h).
#include <algorithm>
#include <cstdio>
#include <cstring>

#include "conn.h"
#include "frame_iov.h"
#include "idle_sends.h"
#include "rerail/clock.h"
#include "rerail/log.h"
#include "rerail/prof_net_event.h"
#include "rerail/rails/board.h"

namespace rr::net {

CoreConfig ConnConfig::core() const {
  CoreConfig c;
  c.chunk = chunk;
  c.eager_max = eager_max;
  c.eager_pool = eager_pool;
  c.policy = policy;
  c.stall_ns = stall_ns;
  c.heartbeat_ns = heartbeat_ns;
  c.giveup_ns = giveup_ns;
  c.connect_grace_ns = connect_grace_ns;
  c.backoff_min_ns = backoff_min_ms * 1000000ull;
  c.backoff_max_ns = backoff_max_ms * 1000000ull;
  c.probation_ns = probation_ms * 1000000ull;
  c.loads = loads;
  c.grouped = max_recvs > 1;
  return c;
}

void Comm::DrainCompletions(CoreBase& core) {
  Completion c;
  while (core.NextCompletion(&c)) {
    auto* r = static_cast<Request*>(c.owner);
    if (c.index >= 0 && c.index < kMaxRecvs) r->sizes[c.index] = c.size;
    if (++r->ndone < r->n) continue;  // a grouped receive completes with its last element
    r->size = r->sizes[0];
    r->state = ReqState::kDone;
  }
}

Status Comm::PostAfterEnd(bool is_send, size_t size, Request** req) {
  Request* r = pool_.Get(is_send);
  if (r == nullptr) return Status::Ok();  // every request in use: NCCL retries the post
  r->seq = kSeqPostedAfterEnd;
  r->size = size;
  *req = r;
  return Status::Ok();
}

Status Comm::EndedStatus(const CoreBase& core, const char* what) {
  if (core.state() == ConnState::kFailed) return core.status();
  return Status(Code::kRemoteError, what);
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

namespace {
constexpr uint64_t kEagerLingerMs = 1000;

std::vector<SendCore::LinkSpec> Specs(const ConnConfig& cfg, const std::vector<LinkPlan>& plan) {
  std::vector<SendCore::LinkSpec> out;
  for (const auto& p : plan) {
    SendCore::LinkSpec s;
    s.rail = p.local_dev;
    s.nominal_bps = cfg.transport->Device(p.local_dev).speed_mbps * 1e6;
    s.name = "rail " + cfg.transport->Device(p.local_dev).name + " to peer " + p.remote.ToString();
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace

SendComm::SendComm(const ConnConfig& cfg, const Nonce& nonce, uint64_t conn_id, std::vector<LinkPlan> plan)
    : Comm(kSendCommMagic),
      cfg_(cfg),
      nonce_(nonce),
      links_(plan.size()),
      core_(cfg.core(), conn_id, Specs(cfg, plan), this, NowNs()) {
  conn_id_ = conn_id;
  if (stager_) {   // the eager copy of a send may read a GPU buffer
    core_.SetCopier([this](void* dst, const void* src, size_t len) { return stager_->Place(dst, src, len); });
  }
  uint64_t now = NowNs();
  for (size_t i = 0; i < plan.size(); ++i) {
    links_[i].plan = plan[i];
    links_[i].rail_gen = RailGen(cfg_.rails, plan[i].local_dev);
  }
  samples_.resize(plan.size());
  if (cfg_.duplex) DuplexRegistry::Get().AddSend(this, conn_id, InstanceOfNonce(nonce_), &offer_);
  Commands(now);  // the first connects
}

SendComm::~SendComm() {
  closing_ = true;
  IdleSends::Get().Remove(this);
  LingerUntilAcked(core_, [this] { return Progress(); });
  if (cfg_.duplex) DuplexRegistry::Get().RemoveSend(this);
  DropPort();
}

namespace {
// An unpaired send comm looks for a partner after 10 ms, then at doubling intervals up to 640 ms (a
// ring of more than two processes has none).
constexpr uint64_t kDuplexMinWaitNs = 10'000'000;
constexpr uint64_t kDuplexMaxWaitNs = 640'000'000;
}  // namespace

void SendComm::DropPort() {
  if (!port_) return;
  {
    std::lock_guard<std::mutex> lk(port_->mu);
    if (OwnsPort()) {
      port_->link = nullptr;  // the adopter detaches at its next read
    } else if (port_->writer == 1) {
      port_->poisoned.store(true);  // a frame cut off there: the owner fails the socket
      port_->writer = 0;
    }
  }
  port_.reset();
  port_stream_ = -1;
  port_seq_ = 0;
  acks_ride_ = false;
  share_pending_ = false;
  duplex_wait_ns_ = 0;  // link 0's next socket may pair again soon
}

void SendComm::ResetLink0Sharing() {
  DropPort();
  own_leftover_.clear();
  own_skip_ = 0;
  handed_back_ = false;
}

void SendComm::DuplexPoll(uint64_t now) {
  TxLink& l = links_[0];
  if (offer_.load(std::memory_order_acquire)) {  // the reactor's end: a receive comm got our peer's kShare
    offer_.store(false, std::memory_order_relaxed);
    std::shared_ptr<DuplexPort> p = DuplexRegistry::Get().TakeOffer(conn_id_);
    if (p && !closing_ && !port_ && l.link && core_.usable(0)) {
      port_ = std::move(p);
      port_stream_ = static_cast<int>(l.tx.size());
      l.tx.emplace_back();
      acks_ride_ = port_->AllowHeld();  // the owner routes the initiator's receive comm's acks here
      RR_INFO(log::kFlagNet, "conn %016lx: link 0 also writes on conn %016lx's socket (RERAIL_TCP_DUPLEX)",
              static_cast<unsigned long>(conn_id_), static_cast<unsigned long>(port_->owner_conn));
    }
  }
  if (port_) {
    if (!OwnsPort() && port_->link.load(std::memory_order_acquire) == nullptr) {
      ReadMailbox(now, false);  // acks the owner read before the socket went
      // Chunks written there may be lost with it unless the receiver acknowledged their messages.
      const bool used = core_.acked() < port_seq_ ||
                        (port_stream_ < static_cast<int>(l.tx.size()) && l.tx[port_stream_].busy);
      char why[80];
      std::snprintf(why, sizeof(why), "the shared socket of conn %016lx closed", static_cast<unsigned long>(port_->owner_conn));
      if (port_stream_ < static_cast<int>(l.tx.size())) l.tx.erase(l.tx.begin() + port_stream_);
      DropPort();
      if (used) {  // the core re-sends link 0's
        core_.OnLinkError(now, 0, why, false);
        Commands(now);
      }
    }
    return;
  }
  if (closing_ || handed_back_ || now < duplex_next_ns_ || !l.link || !core_.usable(0) || core_.state() != ConnState::kActive) return;
  duplex_wait_ns_ = duplex_wait_ns_ == 0 ? kDuplexMinWaitNs : std::min(2 * duplex_wait_ns_, kDuplexMaxWaitNs);
  duplex_next_ns_ = now + duplex_wait_ns_;
  // The initiator's end: a receive comm from the process this comm sends to, on the same rail, whose
  // connection id is larger, adopts this comm's link 0 stream 0 as its reader.
  const uint32_t peer = InstanceOfNonce(nonce_);
  std::shared_ptr<DuplexPort> p;
  const bool adopted = DuplexRegistry::Get().ForEachRecv([&](const DuplexRegistry::RecvInfo& r) {
    if (InstanceOfConn(r.conn) != peer || r.conn <= conn_id_) return false;
    if (!p) {
      p = std::make_shared<DuplexPort>();
      p->link = l.link.get();
      p->owner_conn = conn_id_;
    }
    p->guest_conn = r.conn;
    p->leftover.assign(l.in.data() + l.in_pos, l.in.data() + l.in_end);  // a partial frame at most
    return r.comm->TryAdopt(p, l.plan.local_dev);
  });
  if (!adopted) return;
  l.in_pos = l.in_end = 0;
  port_ = std::move(p);
  share_pending_ = true;
  RR_INFO(log::kFlagNet, "conn %016lx: link 0's socket also carries conn %016lx (RERAIL_TCP_DUPLEX)",
          static_cast<unsigned long>(conn_id_), static_cast<unsigned long>(port_->guest_conn));
}

// Link 0's control frames that a receive comm of this process read on the shared socket: on the
// initiator's end (this comm owns the socket, its partner adopted it) every one, with the adopter's
// failure or handback; on the reactor's end (this comm borrows it) the initiator's acks that rode its
// frames. pump: nothing came while a send waits for an ack: drive that reader once, which NCCL may not
// be driving.
void SendComm::ReadMailbox(uint64_t now, bool pump) {
  const bool owner = OwnsPort();
  if (!owner && !acks_ride_) return;  // no ack of this connection comes there
  const uint64_t reader = owner ? port_->guest_conn : port_->owner_conn;
  std::deque<Frame> got;
  std::string failed;
  bool eof = false, handback = false;
  for (int round = 0; round < 2; ++round) {
    // The borrower takes the lock only when mail came; the owner also looks for the adopter's news.
    if (owner || port_->any_mail.load(std::memory_order_acquire)) {
      std::lock_guard<std::mutex> lk(port_->mu);
      got.swap(port_->mailbox);
      port_->Flags();
      failed = port_->failed;
      eof = port_->failed_eof;
      handback = port_->handback;
      if (handback) {
        own_leftover_ = std::move(port_->leftover);
        own_skip_ = port_->skip;
      }
    }
    if (handback) break;
    if (!got.empty() || !failed.empty() || !pump || round == 1 || !core_.SendWaits()) break;
    DuplexRegistry::Get().WithRecv(reader, [](RecvComm* r) { r->TryPump(); });
  }
  for (const Frame& f : got) {
    if (!links_[0].link || !port_) return;  // a frame before failed link 0: the rest belong to the old socket
    core_.OnControl(now, 0, f);
    Commands(now);
  }
  if (!failed.empty() && port_) {
    core_.OnLinkError(now, 0, failed, eof);
    Commands(now);
  } else if (handback && port_) {  // the adopter's connection ended in order: read the socket here again
    RR_INFO(log::kFlagNet, "conn %016lx: link 0's socket no longer carries conn %016lx (it ended)",
            static_cast<unsigned long>(conn_id_), static_cast<unsigned long>(port_->guest_conn));
    DropPort();
    handed_back_ = true;
    ReadControl(0, now);
  }
}

void Comm::ListIdle() {
  IdleSends::Get().Add(this);
  idle_listed_ = true;
}

uint64_t Comm::TryIdleProgress() {
  std::unique_lock<std::mutex> lk(drive_mu_, std::try_to_lock);
  if (!lk.owns_lock()) return IdleSends::kPeriodNs;   // its owner is driving it: look again next pass
  uint64_t next = IdleProgress();
  if (next == 0) idle_listed_ = false;
  return next;
}

uint64_t SendComm::IdleProgress() {
  return IdleProgressWith(core_, [this] { return Progress(); });
}

void Comm::LingerUntilAcked(const SendCore& core, const std::function<Status()>& progress) {
  if (pool_.in_use() != 0) return;  // an abort
  Deadline dl = Deadline::AfterMs(kEagerLingerMs);
  while (core.unacknowledged() && core.state() == ConnState::kActive && !dl.Expired()) {
    if (!progress().ok()) return;
  }
  if (core.unacknowledged() && core.state() == ConnState::kActive) {
    RR_INFO(log::kFlagNet, "conn %016lx closed with %lu message(s) (%zu eager bytes) unacknowledged",
            static_cast<unsigned long>(conn_id_), static_cast<unsigned long>(core.posted() - core.acked()),
            core.eager_bytes());
  }
}

void SendComm::Commands(uint64_t now) {
  LinkCommand c;
  while (core_.NextCommand(&c)) {
    TxLink& l = links_[c.link];
    if (c.kind == LinkCommand::kClose) {
      if (l.link) {  // tell the peer this is a dropped link, not a closed comm (best effort)
        for (int i = 0; i < static_cast<int>(l.tx.size()); ++i) {
          if (l.tx[i].busy && l.tx[i].done > 0) continue;  // mid-frame: the notice would corrupt it
          iovec iov{&c.notice, sizeof(Frame)};
          size_t n = 0;
          int err = 0;
          (void)l.link->Writev(i, &iov, 1, &n, &err);
          break;
        }
      }
      if (c.link == 0) ResetLink0Sharing();
      l.link.reset();
      l.connector.reset();
      l.tx.clear();
      l.in_pos = l.in_end = 0;
      continue;
    }
    LinkIdentity id;
    id.nonce = nonce_;
    id.conn_id = conn_id_;
    id.chunk_size = cfg_.chunk;
    id.rail = l.plan.remote_rail;
    id.link = c.link;
    id.nstreams = cfg_.streams;
    id.epoch = c.epoch;
    id.grouped = cfg_.max_recvs > 1;
    if (c.link == 0) ResetLink0Sharing();
    l.link.reset();
    l.tx.clear();
    Status st = cfg_.transport->Connect(l.plan.local_dev, l.plan.remote, id, &l.connector);
    if (!st.ok()) {
      l.connector.reset();
      core_.OnConnectFailed(now, c.link, st.message());
    }
  }
}

// Polls a link's connector; an established link starts carrying data (first connect) or waits for
// the peer's answer on it (failback probe): the core decides.
void SendComm::PollConnector(int idx, uint64_t now) {
  TxLink& l = links_[idx];
  if (!l.connector) return;
  std::unique_ptr<Link> link;
  Status st = l.connector->Poll(&link);
  if (!st.ok()) {
    l.connector.reset();
    core_.OnConnectFailed(now, idx, st.message());
    return;
  }
  if (!link) return;
  l.connector.reset();
  l.link = std::move(link);
  l.tx.assign(l.link->streams(), TxStream{});
  l.in_pos = l.in_end = 0;
  core_.OnLinkUp(now, idx);
}

Status SendComm::PollConnect(bool* ready) {
  uint64_t now = NowNs();
  for (size_t i = 0; i < links_.size(); ++i) PollConnector(static_cast<int>(i), now);
  Status st = core_.Ready(now, ready);
  Commands(now);
  return st;
}

Status SendComm::Isend(const void* data, size_t size, int tag, void* phandle, Request** req) {
  std::lock_guard<std::mutex> drive(drive_mu_);   // IdleSends may be driving this comm
  *req = nullptr;
  if (core_.state() == ConnState::kFailed || core_.state() == ConnState::kPeerClosed) return PostAfterEnd(true, size, req);
  Request* r = pool_.Get(true);
  if (r == nullptr) return Progress();  // NCCL retries
  bool posted = false;
  const uint64_t now = NowNs();
  Status st = core_.Isend(now, data, size, r, &posted, tag);
  if (!st.ok() || !posted) {
    pool_.Put(r);
    return st.ok() ? Progress(now) : st;  // window full (grouped: no announced receive): drive I/O, NCCL retries
  }
  r->seq = core_.last_seq();
  r->size = size;
  ProfStart(cfg_.prof, r, phandle, links_[0].plan.local_dev);
  *req = r;
  (void)Progress(now);  // a failure found here is reported by test() on this request
  return Status::Ok();
}

void SendComm::WriteStream(int idx, int i, uint64_t now, bool* progressed) {
  TxLink& l = links_[idx];
  const bool shared = idx == 0 && i == port_stream_;  // the borrowed stream: written through the port
  // The initiator's end writes its own stream 0 through the port too: the receive comm may finish an
  // ack there (duplex.h, "acks ride the replies").
  const bool via_port = shared || (idx == 0 && i == 0 && OwnsPort());
  for (;;) {
    TxStream& s = l.tx[i];
    if (!s.busy && idx == 0 && i == 0 && share_pending_) {  // the initiator's kShare, before any core frame
      share_pending_ = false;
      s.f = TxFrame{};
      s.f.hdr = Frame{FrameMagic(FrameType::kShare), 0, static_cast<uint32_t>(conn_id_), 0, port_->guest_conn, 0, 0};
      s.busy = s.inlined = s.driver = true;
      s.done = 0;
      std::memcpy(s.small.data(), &s.f.hdr, sizeof(Frame));
    }
    if (!s.busy) {
      if (!core_.NextTx(now, idx, &s.f)) return;
      s.driver = false;
      if (stager_) {   // GPU buffer or RERAIL_FORCE_STAGING: the frame leaves from a host slot
        s.f.payload = stager_->Pack(idx * 256 + i, s.f.payload, s.f.hdr.len);
        if (!stager_->error().ok()) {
          (void)core_.Abort(stager_->error().code(), "staging a chunk failed: " + stager_->error().message());
          return;
        }
      }
      s.busy = true;
      s.done = 0;
      s.inlined = sizeof(Frame) + s.f.hdr.len <= kInlineFrame;
      if (s.inlined) {
        std::memcpy(s.small.data(), &s.f.hdr, sizeof(Frame));
        if (s.f.hdr.len > 0) std::memcpy(s.small.data() + sizeof(Frame), s.f.payload, s.f.hdr.len);
      }
    }
    size_t len = s.f.hdr.len;
    iovec iov[2];
    const int cnt = s.inlined ? (iov[0] = {s.small.data() + s.done, sizeof(Frame) + len - s.done}, 1)
                              : FrameIov(s.f, s.done, iov);
    size_t n = 0;
    int err = 0;
    // A small frame's start takes the partner receive comm's parked acks into the same writev.
    IoState st = via_port ? port_->Write(1, iov, cnt, sizeof(Frame) + len - s.done, s.done == 0 && s.inlined, &n, &err)
                          : l.link->Writev(i, iov, cnt, &n, &err);
    if (st == IoState::kAgain) return;
    if (st != IoState::kOk) {
      // A borrowed socket's failure is link 0's too (what went out there is re-sent); never the
      // peer closing this connection.
      core_.OnLinkError(now, idx, std::string(shared ? "shared socket: " : "") + "send failed: " +
                                      (st == IoState::kClosed ? "closed" : strerror(err)),
                        !shared && (err == ECONNRESET || err == EPIPE));
      Commands(now);
      return;
    }
    *progressed = true;
    pass_bytes_ += n;
    if (shared && TypeOf(s.f.hdr) == FrameType::kData) port_seq_ = std::max(port_seq_, s.f.hdr.seq + 1);
    if (!s.driver) core_.OnWritten(idx, n);
    if (cfg_.board) cfg_.board->AddBytes(l.plan.local_dev, n, 0, now);
    s.done += n;
    if (s.done < sizeof(Frame) + len) return;  // socket buffer full
    s.busy = false;
    if (s.driver) continue;
    core_.OnTxDone(now, idx, s.f.hdr);
  }
}

// Reads the receiver's control frames (acks, heartbeats, notices): up to 16 per recv; a read that
// gets less than it asked for drains the socket, so no EAGAIN read follows it.
void SendComm::ReadControl(int idx, uint64_t now) {
  TxLink& l = links_[idx];
  if (idx == 0 && port_) {
    ReadMailbox(now, true);
    if (OwnsPort()) return;  // the partner receive comm reads the socket
    // The reactor's end: acks ride the peer's frames on the shared socket, so its own is cold.
    if (now - l.last_in_ns > kColdNs && now < l.next_cold_ns) return;
    l.next_cold_ns = now + kColdReadNs;
  }
  const bool sifting = idx == 0 && handed_back_;  // the ended connection's bytes may still come
  bool drained = false;
  while (l.link) {
    if (sifting && own_skip_ > 0 && l.in_end > l.in_pos) {  // the rest of its payload
      const size_t k = std::min(own_skip_, l.in_end - l.in_pos);
      l.in_pos += k;
      own_skip_ -= k;
      continue;
    }
    if (l.in_end - l.in_pos >= sizeof(Frame)) {
      Frame f;
      std::memcpy(&f, l.in.data() + l.in_pos, sizeof(Frame));
      l.in_pos += sizeof(Frame);
      if (sifting && f.conn != static_cast<uint32_t>(conn_id_) && FrameValid(f)) {  // its frame: dropped
        own_skip_ = f.len;
        continue;
      }
      core_.OnControl(now, idx, f);
      Commands(now);
      continue;
    }
    CompactReadAhead(l.in.data(), &l.in_pos, &l.in_end);
    if (sifting && !own_leftover_.empty()) {  // the adopter's unread bytes before the socket's
      const size_t k = std::min(own_leftover_.size(), l.in.size() - l.in_end);
      std::memcpy(l.in.data() + l.in_end, own_leftover_.data(), k);
      own_leftover_.erase(own_leftover_.begin(), own_leftover_.begin() + static_cast<long>(k));
      l.in_end += k;
      continue;
    }
    if (drained) return;
    size_t want = l.in.size() - l.in_end;
    size_t n = 0;
    int err = 0;
    IoState st = l.link->Read(0, l.in.data() + l.in_end, want, &n, &err);
    if (st == IoState::kAgain) return;
    if (st != IoState::kOk) {
      bool peer_closed = st == IoState::kClosed || err == ECONNRESET;
      core_.OnLinkError(now, idx, st == IoState::kClosed ? "peer closed the link" : std::string("receive failed: ") + strerror(err),
                        peer_closed);
      Commands(now);
      return;
    }
    l.in_end += n;
    l.last_in_ns = now;
    drained = n < want;
  }
}

void SendComm::PollRails(uint64_t now) {
  for (auto& l : links_) {
    switch (PollRail(cfg_.rails, l.plan.local_dev, &l.rail_gen)) {
      case RailChange::kDown: core_.OnRail(now, l.plan.local_dev, true); break;
      case RailChange::kUp: core_.OnRail(now, l.plan.local_dev, false); break;
      case RailChange::kNone: break;
    }
  }
  Commands(now);
}

void SendComm::Sample(uint64_t now) {
  for (size_t i = 0; i < links_.size(); ++i) {
    LinkSample& s = samples_[i];
    Link* link = links_[i].link.get();
    s.valid = link != nullptr && core_.usable(static_cast<int>(i));
    s.streams = s.valid ? std::min(link->streams(), kMaxStreams) : 0;
    for (int k = 0; k < s.streams && s.valid; ++k) s.valid = link->Sample(k, &s.s[k]);
    if (i == 0 && s.valid && port_stream_ >= 0 && s.streams < kMaxStreams) {  // the borrowed socket's bytes in flight
      std::lock_guard<std::mutex> lk(port_->mu);
      Link* shared = port_->link.load();
      if (shared != nullptr && shared->Sample(0, &s.s[s.streams])) ++s.streams;
    }
  }
  core_.OnSamples(now, samples_);
  Commands(now);
}

Status SendComm::Progress(uint64_t now) {
  MarkDriven(now);
  if (core_.state() != ConnState::kActive) return StatusOf(core_);  // Ok when the peer closed in order
  PollRails(now);
  if (cfg_.duplex) DuplexPoll(now);
  pass_bytes_ = 0;
  for (int pass = 0; pass < 64; ++pass) {
    bool progressed = false;
    for (size_t k = 0; k < links_.size(); ++k) {
      TxLink& l = links_[k];
      // A borrowed stream (the last of link 0) is offered the next frame first: small messages take
      // the connection their replies come on.
      const int first = k == 0 ? port_stream_ : -1;
      for (int j = 0; l.link && j < static_cast<int>(l.tx.size()); ++j) {
        const int i = first < 0 ? j : (j == 0 ? first : j - 1);
        WriteStream(static_cast<int>(k), i, now, &progressed);
      }
    }
    if (!progressed || !core_.HasTx()) break;  // a second pass is for streams that stopped on a full socket
  }
  for (size_t k = 0; k < links_.size(); ++k) {
    if (links_[k].link) ReadControl(static_cast<int>(k), now);
    else PollConnector(static_cast<int>(k), now);
  }
  if (pass_bytes_ >= cfg_.chunk) now = NowNs();  // writing whole chunks takes time: samples and timers see it
  if (core_.SampleDue(now)) Sample(now);
  core_.Poll(now);
  Commands(now);
  DrainCompletions(core_);
  return StatusOf(core_);
}

Status SendComm::Test(Request* r, int* done, int* size) {
  std::lock_guard<std::mutex> drive(drive_mu_);   // IdleSends may be driving this comm
  *done = 0;
  if (r->state == ReqState::kFree) return Status::Internal("test on a request already reported done");
  if (r->seq == kSeqPostedAfterEnd) return EndedStatus(core_, "isend after the receiver closed the connection");
  if (r->state != ReqState::kDone) {
    Status st = Progress();
    if (!st.ok() && r->state != ReqState::kDone) return st;  // completed before the failure: still done
  }
  if (r->state != ReqState::kDone) return Status::Ok();
  *done = 1;
  if (size != nullptr) *size = static_cast<int>(r->size);
  ProfStop(cfg_.prof, r);
  pool_.Put(r);
  MaybeListIdle(core_);
  return Status::Ok();
}

// ---- observer: the rail-health board and the profiler

void Comm::ReportFailover(const ConnConfig& cfg, int dev, int to_dev, const std::string& why, uint64_t bytes,
                          uint64_t chunks, uint64_t stall_ns, bool was_probing) {
  if (cfg.board) {
    cfg.board->AddRetransmit(dev, chunks, bytes);
    if (!was_probing) cfg.board->CountFailover(dev);
    FailCause cause = CauseOf(why);
    cfg.board->SetState(dev, rails::RailState::kFailed,
                        cause == FailCause::kStall      ? rails::RailEvent::kStall
                        : cause == FailCause::kLinkDown ? rails::RailEvent::kLinkDown
                                                        : rails::RailEvent::kError);
  }
  if (cfg.prof == nullptr || was_probing) return;
  auto ev = prof::MakeNetEvent(RR_PROF_NET_EV_FAILOVER, dev, ShortReason(why));
  if (to_dev >= 0) ev.toRail = to_dev;
  ev.connId = static_cast<uint32_t>(conn_id_);
  ev.bytes = bytes;
  ev.count = chunks;
  ev.stallNs = stall_ns;
  last_failed_rail_ = dev;
  cfg.prof->Post(ev);
}

void Comm::ReportRetransmit(const ConnConfig& cfg, int to_dev, uint64_t bytes, uint64_t chunks) {
  if (cfg.prof == nullptr) return;
  auto ev = prof::MakeNetEvent(RR_PROF_NET_EV_RETRANSMIT, last_failed_rail_, "requeued");
  ev.toRail = to_dev;
  ev.connId = static_cast<uint32_t>(conn_id_);
  ev.bytes = bytes;
  ev.count = chunks;
  cfg.prof->Post(ev);
}

namespace {
int ProfRailState(LinkState s) {
  switch (s) {
    case LinkState::kHealthy: return RR_PROF_RAIL_HEALTHY;
    case LinkState::kFailed: return RR_PROF_RAIL_FAILED;
    case LinkState::kConnecting:
    case LinkState::kProbing: return RR_PROF_RAIL_RECOVERING;
  }
  return RR_PROF_RAIL_FAILED;
}
}  // namespace

void Comm::ReportLinkState(const ConnConfig& cfg, int dev, LinkState from, LinkState to, const std::string& why) {
  if (cfg.prof == nullptr) return;
  auto ev = prof::MakeNetEvent(RR_PROF_NET_EV_RAIL_STATE, dev, why.c_str());
  ev.prevState = ProfRailState(from);
  ev.state = ProfRailState(to);
  cfg.prof->Post(ev);
}

void Comm::ReportRecvFailover(const ConnConfig& cfg, int dev, const std::string& why) {
  if (cfg.prof == nullptr) return;
  auto ev = prof::MakeNetEvent(RR_PROF_NET_EV_FAILOVER, dev, ShortReason(why));
  ev.connId = static_cast<uint32_t>(conn_id_);
  cfg.prof->Post(ev);
}

void Comm::ReportFailback(const ConnConfig& cfg, int dev) {
  if (cfg.prof) {
    auto ev = prof::MakeNetEvent(RR_PROF_NET_EV_FAILBACK, dev, "probe-ok");
    ev.connId = static_cast<uint32_t>(conn_id_);
    cfg.prof->Post(ev);
  }
  if (cfg.board) {
    cfg.board->CountFailback(dev);
    cfg.board->SetState(dev, rails::RailState::kHealthy, rails::RailEvent::kProbeOk);
  }
}

void SendComm::OnFailover(int link, const std::string& why, uint64_t bytes, uint64_t chunks, int to_link,
                          uint64_t stall_ns, bool was_probing) {
  ReportFailover(cfg_, links_[link].plan.local_dev, to_link >= 0 ? links_[to_link].plan.local_dev : -1, why, bytes,
                 chunks, stall_ns, was_probing);
}

void SendComm::OnRetransmit(int to_link, uint64_t bytes, uint64_t chunks) {
  ReportRetransmit(cfg_, links_[to_link].plan.local_dev, bytes, chunks);
}

void SendComm::OnFailback(int link) { ReportFailback(cfg_, links_[link].plan.local_dev); }

void SendComm::OnLinkState(int link, LinkState from, LinkState to, const std::string& why) {
  ReportLinkState(cfg_, links_[link].plan.local_dev, from, to, why);
}

void SendComm::OnBandwidth(int link, uint64_t bytes_per_s) {
  if (cfg_.board) cfg_.board->SetBandwidth(links_[link].plan.local_dev, bytes_per_s);
}

}  // namespace rr::net
