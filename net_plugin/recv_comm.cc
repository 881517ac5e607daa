#include <cstring>

#include "conn.h"
#include "rerail/clock.h"
#include "rerail/log.h"
#include "rerail/prof_net_event.h"
#include "rerail/rails/board.h"

namespace rr::net {

namespace {
constexpr size_t kScratchBytes = 1 << 16;
constexpr uint64_t kListenPollNs = 2'000'000;  // how often a comm looks for re-connected rails
constexpr size_t kMaxLinks = 16;
constexpr uint32_t kEagerAckEvery = 16;  // eager completions that force an ack without waiting a call
// Eager chunks held for receives not posted yet. The sender keeps at most RERAIL_EAGER_POOL eager bytes
// unacknowledged (plus re-sent copies after a failover); past this a chunk waits in its socket.
constexpr size_t kMaxStashBytes = 64u << 20;
}  // namespace

RecvComm::RecvComm(const ConnConfig& cfg, std::unique_ptr<Listener> listener, std::unique_ptr<Link> first)
    : Comm(kRecvCommMagic),
      cfg_(cfg),
      listener_(std::move(listener)),
      tracker_(static_cast<uint32_t>(first->identity().conn_id), first->identity().chunk_size) {
  conn_id_ = first->identity().conn_id;
  peer_ = first->Describe();
  Attach(std::move(first));
}

void RecvComm::Attach(std::unique_ptr<Link> link) {
  const LinkIdentity& id = link->identity();
  if (id.conn_id != conn_id_ || static_cast<size_t>(id.link) >= kMaxLinks ||
      id.chunk_size != link->identity().chunk_size) {
    RR_WARN("conn %016lx: rejected a link of another connection (%s)", static_cast<unsigned long>(conn_id_),
            link->Describe().c_str());
    return;
  }
  if (links_.size() <= static_cast<size_t>(id.link)) links_.resize(id.link + 1);
  RxLink& l = links_[id.link];
  if (l.link && id.epoch < l.epoch) {
    RR_WARN("conn %016lx: ignored stale link %d epoch %u (current %u)", static_cast<unsigned long>(conn_id_),
            id.link, id.epoch, l.epoch);
    return;
  }
  RR_INFO(log::kFlagNet, "conn %016lx: link %d up (%s, epoch %u)", static_cast<unsigned long>(conn_id_), id.link,
          link->Describe().c_str(), id.epoch);
  l.link = std::move(link);
  l.epoch = id.epoch;
  l.rx.assign(l.link->streams(), RxStream{});
  l.out.clear();
  l.out_done = 0;
  l.last_hb_ns = 0;  // answer at once: the sender re-admits the rail on the first frame it hears
  l.rail_gen = RailGen(cfg_.rails, id.rail);
}

// A link-down event for the local rail of a link: drop it at once and tell the sender over a
// survivor, so it re-sends within milliseconds instead of waiting for its stall watchdog (the
// sender's host saw no event: the fault is on this side).
void RecvComm::CheckRailEvents() {
  for (size_t idx = 0; idx < links_.size(); ++idx) {
    RxLink& l = links_[idx];
    if (l.link && PollRail(cfg_.rails, l.link->identity().rail, &l.rail_gen) == RailChange::kDown) {
      DropLink(static_cast<int>(idx), "link-down event", false);
    }
  }
}

int RecvComm::LiveLinks() const {
  int n = 0;
  for (const auto& l : links_) n += l.link != nullptr;
  return n;
}

void RecvComm::DropLink(int idx, const std::string& why, bool peer_closed) {
  RxLink& l = links_[idx];
  if (!l.link) return;
  int rail = l.link->identity().rail;
  std::string desc = l.link->Describe();
  RR_INFO(log::kFlagNet, "conn %016lx: link %d (%s) down: %s", static_cast<unsigned long>(conn_id_), idx, desc.c_str(),
          why.c_str());
  l.link.reset();
  l.rx.clear();
  l.out.clear();
  ++l.epoch;
  for (size_t i = 0; i < stash_.size();) {  // copies its streams were filling are cut short
    if (stash_[i]->link == idx) {
      stash_bytes_ -= stash_[i]->bytes.size();
      stash_.erase(stash_.begin() + static_cast<long>(i));
    } else {
      ++i;
    }
  }
  ack_sent_ = 0;  // the dropped link may have carried the last ack or credit: announce both again
  credit_sent_ = 0;
  ack_urgent_ = true;
  int live = LiveLinks();
  if (live == 0) {
    if (peer_closed) {
      // Every link closed by the peer: its process closed the connection or died.
      if (tracker_.completed_prefix() == tracker_.posted()) {
        Transition(ConnState::kPeerClosed, "sender closed the connection");
      } else {
        (void)Fail(Code::kRemoteError, "peer " + peer_ + " closed the connection with a receive pending");
      }
    }
    return;
  }
  if (!peer_closed) {
    RR_WARN("conn %016lx: link %d (%s) failed (%s); %d link(s) left, the sender re-sends its chunks",
            static_cast<unsigned long>(conn_id_), idx, desc.c_str(), why.c_str(), live);
    if (cfg_.prof) {
      // The receiver re-sends nothing (bytes 0) and does not pick the survivor (toRail -1).
      auto ev = prof::MakeNetEvent(RR_PROF_NET_EV_FAILOVER, rail, ShortReason(why));
      ev.connId = static_cast<uint32_t>(conn_id_);
      cfg_.prof->Post(ev);
    }
  }
  for (auto& o : links_) {  // tell the sender over a survivor
    if (o.link) {
      o.out.push_back(Frame{FrameMagic(FrameType::kLinkDown), 0, static_cast<uint32_t>(conn_id_), l.epoch,
                            static_cast<uint64_t>(idx), 0, 0});
      break;
    }
  }
}

Status RecvComm::Irecv(void* data, size_t cap, void* phandle, Request** req) {
  *req = nullptr;
  if (state_ == ConnState::kFailed) return PostAfterEnd(false, cap, req);
  if (cap > 0 && data == nullptr) return Status::Internal("irecv of " + std::to_string(cap) + " bytes into NULL");
  Request* r = pool_.Get(false);
  if (r == nullptr) return Status::Ok();
  RxTracker::Slot* slot = tracker_.Post(data, cap, r);
  if (slot == nullptr) {  // window full until older messages complete: NCCL retries
    pool_.Put(r);
    return Progress(false);
  }
  r->seq = slot->seq;
  r->slot = slot;
  ProfStart(cfg_.prof, r, phandle, cfg_.dev);
  *req = r;
  if (!stash_.empty()) DrainStash();
  (void)Progress(false);  // a failure found here is reported by test() on this request
  return Status::Ok();
}

Status RecvComm::OnHeader(RxLink& l, RxStream& s, bool* stalled) {
  *stalled = false;
  if (TypeOf(s.hdr) == FrameType::kLinkDown && FrameValid(s.hdr) && s.hdr.len == 0) {
    if (s.hdr.seq < links_.size() && &links_[s.hdr.seq] != &l) {
      DropLink(static_cast<int>(s.hdr.seq), "sender reported it down", true);
    }
    s.phase = Phase::kDiscard;
    s.remaining = 0;
    return Status::Ok();
  }
  std::string err;
  RxTracker::Slot* slot = nullptr;
  switch (tracker_.Classify(s.hdr, l.epoch, &slot, &err)) {
    case RxTracker::Verdict::kNotPosted:
      if (IsEager(s.hdr) && stash_bytes_ + s.hdr.len <= kMaxStashBytes) {
        stash_.push_back(std::make_unique<Stashed>());
        s.stash = stash_.back().get();
        s.stash->hdr = s.hdr;
        s.stash->bytes.resize(s.hdr.len);
        s.stash->link = static_cast<int>(&l - links_.data());
        stash_bytes_ += s.hdr.len;
        s.phase = Phase::kStash;
        s.dst = s.stash->bytes.data();
        s.remaining = s.hdr.len;
        return Status::Ok();
      }
      *stalled = true;  // credited chunks only (wire.h): its receive is being posted; no copy meanwhile
      return Status::Ok();
    case RxTracker::Verdict::kError:
      return Fail(Code::kRemoteError, "from " + l.link->Describe() + ": " + err);
    case RxTracker::Verdict::kDrop:
      s.phase = Phase::kDiscard;
      s.remaining = s.hdr.len;
      return Status::Ok();
    case RxTracker::Verdict::kPlace:
      s.phase = Phase::kPayload;
      s.slot = slot;
      s.dst = static_cast<uint8_t*>(slot->buf) + s.hdr.offset;
      s.remaining = s.hdr.len;
      return Status::Ok();
  }
  return Status::Internal("unreachable");
}

void RecvComm::OnPlaced(RxStream& s) {
  Complete(s.slot, s.hdr);
  s.slot = nullptr;
}

void RecvComm::Complete(RxTracker::Slot* slot, const Frame& f) {
  if (!tracker_.Placed(slot, f)) return;
  auto* r = static_cast<Request*>(slot->owner);
  r->size = static_cast<size_t>(slot->total);
  r->state = ReqState::kDone;
  if (IsEager(f)) ++eager_unacked_, eager_unacked_bytes_ += r->size;
  else ack_urgent_ = true;  // the sender's request waits for this ack
}

// Places the stashed eager chunks whose receive is posted now; drops those no longer needed.
void RecvComm::DrainStash() {
  for (size_t i = 0; i < stash_.size();) {
    Stashed& c = *stash_[i];
    RxTracker::Slot* slot = nullptr;
    std::string err;
    RxTracker::Verdict v = c.link >= 0 ? RxTracker::Verdict::kNotPosted  // still being filled
                                       : tracker_.Classify(c.hdr, 0, &slot, &err);
    if (v == RxTracker::Verdict::kNotPosted) {
      ++i;
      continue;
    }
    if (v == RxTracker::Verdict::kPlace) {
      if (c.hdr.len > 0) memcpy(static_cast<uint8_t*>(slot->buf) + c.hdr.offset, c.bytes.data(), c.hdr.len);
      Complete(slot, c.hdr);
    }
    stash_bytes_ -= c.bytes.size();
    stash_.erase(stash_.begin() + static_cast<long>(i));
  }
}

Status RecvComm::ReadStream(RxLink& l, int i, bool* progressed) {
  RxStream& s = l.rx[i];
  for (;;) {
    size_t n = 0;
    int err = 0;
    IoState st;
    if (s.phase == Phase::kHeader) {
      st = IoState::kOk;  // a complete header held back earlier: its message may be posted now
      if (s.hdr_got < sizeof(Frame)) {
        st = l.link->Read(i, reinterpret_cast<uint8_t*>(&s.hdr) + s.hdr_got, sizeof(Frame) - s.hdr_got, &n, &err);
        if (st == IoState::kOk) s.hdr_got += n;
      }
      if (st == IoState::kOk && s.hdr_got == sizeof(Frame)) {
        bool stalled = false;
        RR_CHECK(OnHeader(l, s, &stalled));
        if (stalled || !l.link) return Status::Ok();
        s.hdr_got = 0;
        *progressed = true;
        if (s.phase == Phase::kPayload && s.remaining == 0) OnPlaced(s), s.phase = Phase::kHeader;
        if (s.phase == Phase::kDiscard && s.remaining == 0) s.phase = Phase::kHeader;
        continue;
      }
    } else if (s.phase == Phase::kPayload) {
      st = l.link->Read(i, s.dst, s.remaining, &n, &err);
      if (st == IoState::kOk) {
        if (cfg_.board) cfg_.board->AddBytes(l.link->identity().rail, 0, n);
        s.dst += n;
        s.remaining -= n;
        if (s.remaining == 0) OnPlaced(s), s.phase = Phase::kHeader;
      }
    } else if (s.phase == Phase::kStash) {
      st = IoState::kOk;
      if (s.remaining > 0) st = l.link->Read(i, s.dst, s.remaining, &n, &err);
      if (st == IoState::kOk) {
        s.dst += n;
        s.remaining -= n;
        if (s.remaining == 0) {  // complete: its receive may have been posted meanwhile
          s.stash->link = -1, s.stash = nullptr, s.phase = Phase::kHeader;
          DrainStash();
        }
      }
    } else {
      if (scratch_.empty()) scratch_.resize(kScratchBytes);
      st = l.link->Read(i, scratch_.data(), std::min(s.remaining, scratch_.size()), &n, &err);
      if (st == IoState::kOk && (s.remaining -= n) == 0) s.phase = Phase::kHeader;
    }
    if (st == IoState::kAgain) return Status::Ok();
    if (st != IoState::kOk) {
      bool peer_closed = st == IoState::kClosed || err == ECONNRESET;
      DropLink(static_cast<int>(&l - links_.data()),
               st == IoState::kClosed ? "closed by the sender" : std::string("receive failed: ") + strerror(err),
               peer_closed);
      return state_ == ConnState::kFailed ? failure_ : Status::Ok();
    }
    *progressed = true;
  }
}

// Queues acks/heartbeats and writes pending control frames on each live link. Acks of eager messages
// alone wait for `flush_acks` (the next call) unless enough of them piled up.
Status RecvComm::FlushControl(uint64_t now, bool flush_acks) {
  uint64_t prefix = tracker_.completed_prefix();
  uint64_t credit = tracker_.posted();
  // A new credit goes out at once: the sender may be holding a message for it.
  bool ack_due = (prefix != ack_sent_ && (flush_acks || ack_urgent_ || eager_unacked_ >= kEagerAckEvery ||
                                          eager_unacked_bytes_ >= cfg_.eager_pool / 2)) ||
                 credit != credit_sent_;
  // The first two live links carry the ack: an ack lost with a failing link would otherwise wait
  // for this comm's next call, which may never come (the receiver has nothing left to receive). A
  // failed write below drops its link, and DropLink asks for the ack again.
  int copies = 0;
  if (ack_due && LiveLinks() > 0) {
    copies = 2;
    ack_sent_ = prefix;
    credit_sent_ = credit;
    ack_urgent_ = false;
    eager_unacked_ = 0;
    eager_unacked_bytes_ = 0;
  }
  for (size_t idx = 0; idx < links_.size(); ++idx) {
    RxLink& l = links_[idx];
    if (!l.link) continue;
    if (copies > 0) {
      l.out.push_back(Frame{FrameMagic(FrameType::kAck), 0, static_cast<uint32_t>(conn_id_), l.epoch, prefix, credit, 0});
      --copies;
    }
    if (now - l.last_hb_ns >= cfg_.heartbeat_ns && l.out.size() < 4) {
      l.out.push_back(Frame{FrameMagic(FrameType::kHeartbeat), 0, static_cast<uint32_t>(conn_id_), l.epoch, prefix, credit, 0});
      l.last_hb_ns = now;
    }
    while (!l.out.empty()) {
      iovec iov{reinterpret_cast<uint8_t*>(&l.out.front()) + l.out_done, sizeof(Frame) - l.out_done};
      size_t n = 0;
      int err = 0;
      IoState st = l.link->Writev(0, &iov, 1, &n, &err);
      if (st == IoState::kAgain) break;
      if (st != IoState::kOk) {
        DropLink(static_cast<int>(idx), std::string("sending control failed: ") + strerror(err),
                 err == ECONNRESET || err == EPIPE);
        if (state_ == ConnState::kFailed) return failure_;
        break;
      }
      l.out_done += n;
      if (l.out_done == sizeof(Frame)) l.out.pop_front(), l.out_done = 0;
    }
  }
  return Status::Ok();
}

// The receiver's heartbeats are bytes in flight on every live link: if the peer's kernel stops
// acknowledging them, the link is a black hole. The last live link is never dropped for a stall; it
// only starts the give-up clock (Progress).
void RecvComm::CheckStalls(uint64_t now) {
  for (size_t idx = 0; idx < links_.size(); ++idx) {
    RxLink& l = links_[idx];
    if (!l.link) {
      l.stall.ms = 0;
    } else if (l.stall.Sample(*l.link, now, cfg_) && l.stall.stalled(cfg_) && LiveLinks() > 1) {
      DropLink(static_cast<int>(idx), "stall: bytes unacknowledged for " + std::to_string(l.stall.ms) + " ms", false);
    }
  }
}

Status RecvComm::PollListener(uint64_t now) {
  if (now < next_listen_poll_ns_ || !listener_) return Status::Ok();
  next_listen_poll_ns_ = now + kListenPollNs;
  std::unique_ptr<Link> link;
  for (;;) {
    RR_CHECK(listener_->Poll(&link));
    if (!link) return Status::Ok();
    Attach(std::move(link));
  }
}

// Deferred eager acks go out in a test() call that read nothing: the comm is waiting, so the ack
// costs no latency on the path of the caller's next message (an irecv never flushes them).
Status RecvComm::Progress(bool idle_acks) {
  if (state_ == ConnState::kFailed) return failure_;
  uint64_t now = NowNs();
  RR_CHECK(PollListener(now));
  if (state_ == ConnState::kPeerClosed) {
    if (tracker_.completed_prefix() == tracker_.posted()) return Status::Ok();
    return Fail(Code::kRemoteError, "receive posted but peer " + peer_ + " has closed the connection");
  }
  bool read_any = false;
  for (int pass = 0; pass < 64; ++pass) {
    bool progressed = false;
    for (auto& l : links_) {
      for (int i = 0; l.link && i < static_cast<int>(l.rx.size()); ++i) RR_CHECK(ReadStream(l, i, &progressed));
    }
    read_any |= progressed;
    if (!progressed || state_ != ConnState::kActive) break;
  }
  if (state_ != ConnState::kActive) return state_ == ConnState::kFailed ? failure_ : Status::Ok();
  RR_CHECK(FlushControl(now, idle_acks && !read_any));
  CheckRailEvents();
  CheckStalls(now);
  int working = 0;
  for (const auto& l : links_) working += l.link && !l.stall.stalled(cfg_);
  if (GiveUpDue(working, now, cfg_.giveup_ns) && tracker_.completed_prefix() != tracker_.posted()) {
    return Fail(Code::kRemoteError, "no link from " + peer_ + " for RERAIL_GIVEUP_MS (" +
                                        std::to_string(cfg_.giveup_ns / 1000000) + " ms)");
  }
  return Status::Ok();
}

Status RecvComm::Test(Request* r, int* done, int* size) {
  *done = 0;
  if (r->seq == kSeqPostedAfterEnd) return EndedStatus("irecv after the connection ended");
  if (r->state != ReqState::kDone) {
    Status st = Progress(true);
    if (!st.ok() && r->state != ReqState::kDone) return st;  // completed before the failure: still done
  }
  if (r->state != ReqState::kDone) return Status::Ok();
  *done = 1;
  if (size != nullptr) *size = static_cast<int>(r->size);
  ProfStop(cfg_.prof, r);
  tracker_.Release(static_cast<RxTracker::Slot*>(r->slot));
  pool_.Put(r);
  return Status::Ok();
}

Status ListenComm::Accept(std::unique_ptr<RecvComm>* out) {
  std::unique_ptr<Link> link;
  RR_CHECK(hub_->PollNew(&link));
  if (!link) return Status::Ok();
  const uint64_t conn = link->identity().conn_id;
  *out = std::make_unique<RecvComm>(cfg_, std::make_unique<HubListener>(hub_, conn), std::move(link));
  return Status::Ok();
}

}  // namespace rr::net
