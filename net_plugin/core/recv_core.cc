// The receiving side of a resilient connection (core.h): placement, eager stash, acks and credits,
// heartbeats, link drops and notices, give-up.
#include <algorithm>
#include <cstring>

#include "core.h"
#include "rerail/log.h"

namespace rr::net {

namespace {
constexpr size_t kMaxLinks = 16;
// Eager chunks held for receives not posted yet. The sender keeps at most RERAIL_EAGER_POOL eager bytes
// unacknowledged (plus re-sent copies after a failover); past this a chunk waits in its stream.
constexpr size_t kMaxStashBytes = 64u << 20;
}  // namespace

RecvCore::RecvCore(const CoreConfig& cfg, uint64_t conn_id, uint32_t chunk_size, CoreObserver* obs)
    : CoreBase(conn_id, obs), cfg_(cfg), tracker_(static_cast<uint32_t>(conn_id), chunk_size) {}

int RecvCore::LiveLinks() const {
  int n = 0;
  for (const auto& l : links_) n += l.alive;
  return n;
}

void RecvCore::ForgetStash(int idx) {
  for (size_t i = 0; i < stash_.size();) {  // copies its streams were filling are cut short
    if (stash_[i]->link == idx) {
      stash_bytes_ -= stash_[i]->bytes.size();
      stash_.erase(stash_.begin() + static_cast<long>(i));
    } else {
      ++i;
    }
  }
}

bool RecvCore::OnLinkUp(uint64_t /*now*/, int idx, uint32_t epoch, int rail, int streams, const std::string& name) {
  if (idx < 0 || static_cast<size_t>(idx) >= kMaxLinks || streams < 1 || streams > kMaxStreams) {
    RR_WARN("conn %016lx: rejected link %d of another connection (%s)", static_cast<unsigned long>(conn_id_), idx,
            name.c_str());
    return false;
  }
  if (links_.size() <= static_cast<size_t>(idx)) links_.resize(idx + 1);
  RxLink& l = links_[idx];
  if (l.alive && epoch < l.epoch) {
    RR_WARN("conn %016lx: ignored stale link %d epoch %u (current %u)", static_cast<unsigned long>(conn_id_), idx,
            epoch, l.epoch);
    return false;
  }
  RR_INFO(log::kFlagNet, "conn %016lx: link %d up (%s, epoch %u)", static_cast<unsigned long>(conn_id_), idx,
          name.c_str(), epoch);
  if (l.alive) ForgetStash(idx);  // a replacement: the old streams' partial copies are gone
  l.rx.clear();
  if (!deferred_.empty()) ReleaseDeferred();
  l.alive = true;
  l.epoch = epoch;
  l.rail = rail;
  l.name = name;
  l.rx.assign(static_cast<size_t>(streams), RxStream{});
  l.out.clear();
  l.hb_now = true;  // answer at once: the sender re-admits the rail on the first frame it hears
  l.rail_down = false;
  l.peer_ended = false;
  l.stall.Reset();
  // Every link this side dropped is announced again on the new one: the first notice went out on
  // links alive then, and when they all failed too (every rail's transmissions lost at once) it was
  // lost with them. A sender that had nothing in flight on a dropped link (waiting for the credit this
  // side could no longer send) cannot see it die by itself: it kept it as its healthy primary and
  // waited forever (ib_fake_faults txlossall). A notice the sender already knows is stale by epoch.
  for (size_t i = 0; i < links_.size(); ++i) {
    if (i != static_cast<size_t>(idx) && !links_[i].alive && links_[i].epoch > 0) l.out.push_back(DropNotice(static_cast<int>(i)));
  }
  // Every pending element again: its announcements may have been lost with the links alive when it
  // was posted (the sender takes a seq only for an announced element). Duplicates are harmless.
  if (cfg_.grouped) {
    for (uint64_t seq = tracker_.completed_prefix(); seq < tracker_.posted(); ++seq) {
      if (const RxTracker::Slot* p = tracker_.Pending(seq)) l.out.push_back(PostedFrame(*p, epoch));
    }
  }
  return true;
}

void RecvCore::OnRail(uint64_t now, int rail, bool down) {
  // A link-down event for the local rail of a link: drop it at once and tell the sender over a
  // survivor, so it re-sends within milliseconds instead of waiting for its stall watchdog (the
  // sender's host saw no event: the fault is on this side). The last live link is kept (the
  // give-up clock runs): closing it would send a FIN that, arriving after the heal, makes a sender
  // that saw every link closed take it for this process's exit. Poll drops it once another works.
  for (size_t idx = 0; idx < links_.size(); ++idx) {
    RxLink& l = links_[idx];
    if (!l.alive || l.rail != rail) continue;
    l.rail_down = down;
    if (down && LiveLinks() > 1) DropLink(now, static_cast<int>(idx), "link-down event", false);
  }
}

void RecvCore::OnLinkError(uint64_t now, int idx, const std::string& why, bool peer_closed) {
  DropLink(now, idx, why, peer_closed);
}

Frame RecvCore::DropNotice(int idx) const {
  return Frame{FrameMagic(FrameType::kLinkDown), 0, static_cast<uint32_t>(conn_id_), links_[idx].epoch,
               static_cast<uint64_t>(idx), 0, 0};
}

void RecvCore::DropLink(uint64_t /*now*/, int idx, const std::string& why, bool peer_closed, bool peer_dropped) {
  if (idx < 0 || static_cast<size_t>(idx) >= links_.size()) return;
  RxLink& l = links_[idx];
  if (!l.alive) return;
  RR_INFO(log::kFlagNet, "conn %016lx: link %d (%s) down: %s", static_cast<unsigned long>(conn_id_), idx,
          l.name.c_str(), why.c_str());
  l.alive = false;
  l.carries_ack = false;
  l.peer_ended = peer_closed || peer_dropped;
  ++drops_;
  l.rx.clear();
  l.out.clear();
  l.stall.Reset();
  ++l.epoch;
  ForgetStash(idx);
  if (!deferred_.empty()) ReleaseDeferred();
  ack_sent_ = 0;  // the dropped link may have carried the last ack or credit: announce both again
  credit_sent_ = 0;
  ack_urgent_ = true;
  ack_unconfirmed_ = tracker_.completed_prefix() > 0;
  int live = LiveLinks();
  if (peer_dropped) return;  // the sender knows, and re-sends on its own
  if (live == 0) {
    // The peer's process closed the connection or died only if its side ended EVERY link. A link this
    // side dropped on its own (a rail event, its stall watchdog) is one a live sender may not know
    // about and reconnect, after it failed and closed the last one (no room for its notice in a full
    // socket; the FIN came after a heal): then the give-up clock decides.
    bool all = true;
    for (const auto& o : links_) all = all && (o.rail < 0 || o.peer_ended);  // rail < 0: never up
    if (peer_closed && all) {
      // Every link closed by the peer: its process closed the connection or died.
      if (tracker_.completed_prefix() == tracker_.posted()) {
        Transition(ConnState::kPeerClosed, "sender closed the connection");
      } else {
        (void)Fail(Code::kRemoteError, "peer " + l.name + " closed the connection with a receive pending");
      }
    }
    return;
  }
  if (!peer_closed) {
    RR_WARN("conn %016lx: link %d (%s) failed (%s); %d link(s) left, the sender re-sends its chunks",
            static_cast<unsigned long>(conn_id_), idx, l.name.c_str(), why.c_str(), live);
    obs_->OnFailover(idx, why, 0, 0, -1, 0, false);  // the receiver re-sends nothing and picks no survivor
  }
  // Tell the sender over EVERY survivor, not one: a survivor may be dead too and not yet known so
  // here (its notice is then lost), and the sender may be unable to see this link die by itself —
  // a black hole that began while this side's window was closed leaves its bytes unsent, nothing in
  // flight for its stall watchdog, and the link's chunks were never re-sent (found by tests/sim,
  // swarm seed 1070612). Duplicates are harmless: the epoch makes a second notice stale.
  for (auto& o : links_) {
    if (o.alive) {
      o.out.push_back(Frame{FrameMagic(FrameType::kLinkDown), 0, static_cast<uint32_t>(conn_id_), l.epoch,
                            static_cast<uint64_t>(idx), 0, 0});
    }
  }
}

Status RecvCore::Irecv(uint64_t now, void* buf, size_t cap, void* owner, bool* posted, void** slot_out, int tag) {
  void* slot = nullptr;
  Status st = IrecvGroup(now, 1, &buf, &cap, &tag, owner, posted, &slot);
  if (*posted && slot_out != nullptr) *slot_out = slot;
  return st;
}

Status RecvCore::IrecvGroup(uint64_t /*now*/, int n, void* const* bufs, const size_t* caps, const int* tags, void* owner,
                            bool* posted, void** slots) {
  *posted = false;
  if (state_ == ConnState::kFailed) return failure_;
  if (n < 1 || n > kMaxRecvs) return Status::Internal("irecv of " + std::to_string(n) + " buffers (1.." + std::to_string(kMaxRecvs) + ")");
  for (int k = 0; k < n; ++k) {
    if (caps[k] > 0 && bufs[k] == nullptr) return Status::Internal("irecv of " + std::to_string(caps[k]) + " bytes into NULL");
  }
  if (n > 1 && !cfg_.grouped) {
    return Status::InvalidUsage("grouped irecv of " + std::to_string(n) + " buffers, but the sender does not match tags (its "
                                "RERAIL_MAX_RECVS is 1, or it runs an older rerail): set the same RERAIL_MAX_RECVS everywhere");
  }
  if (!tracker_.CanPost(n)) return Status::Ok();  // window full until older messages complete: NCCL retries
  for (int k = 0; k < n; ++k) {
    RxTracker::Slot* slot = tracker_.Post(bufs[k], caps[k], owner);
    slot->tag = tags[k];
    slot->gn = static_cast<uint8_t>(n);
    slot->gk = static_cast<uint8_t>(k);
    slots[k] = slot;
    if (!cfg_.grouped) continue;
    for (auto& l : links_) {  // before the credit (QueueControl): the sender takes the seq on this
      if (l.alive) l.out.push_back(PostedFrame(*slot, l.epoch));
    }
  }
  *posted = true;
  if (!stash_.empty()) DrainStash();
  return Status::Ok();
}

Frame RecvCore::PostedFrame(const RxTracker::Slot& s, uint32_t epoch) const {
  return Frame{FrameMagic(FrameType::kPosted), 0, static_cast<uint32_t>(conn_id_), epoch, s.seq, s.cap,
               PostedInfo(s.tag, s.gn, s.gk)};
}

void RecvCore::Release(void* slot) { tracker_.Release(static_cast<RxTracker::Slot*>(slot)); }

RxAction RecvCore::OnFrame(uint64_t /*now*/, int idx, int stream, const Frame& hdr) {
  RxAction a;
  if (state_ == ConnState::kFailed) return a.kind = RxAction::kFail, a;
  if (idx < 0 || static_cast<size_t>(idx) >= links_.size() || !links_[idx].alive || stream < 0 ||
      static_cast<size_t>(stream) >= links_[idx].rx.size()) {
    a.kind = hdr.len > 0 ? RxAction::kDiscard : RxAction::kNone;  // a frame of a link already dropped
    a.len = hdr.len;
    return a;
  }
  RxLink& l = links_[idx];
  RxStream& s = l.rx[stream];
  s.kind = RxAction::kNone;
  s.hdr = hdr;
  if (TypeOf(hdr) == FrameType::kLinkDown && FrameValid(hdr) && hdr.len == 0) {
    // About another link, or this one (the sender dropped it and closes it next): either way the
    // sender's core decided, not its process' exit.
    // hdr.epoch is the dropped incarnation's successor: a notice queued before the link came back
    // (it may even travel on the new incarnation) must not drop it again.
    if (hdr.seq < links_.size() && links_[hdr.seq].epoch < hdr.epoch) {
      DropLink(0, static_cast<int>(hdr.seq), "sender reported it down", false, true);
    }
    return a;
  }
  if (TypeOf(hdr) == FrameType::kHeartbeat && FrameValid(hdr) && hdr.len == 0) {  // the sender's liveness probe
    if ((hdr.magic_type & kFrameWantCredit) != 0) want_credit_ = std::max(want_credit_, hdr.seq);
    return a;
  }
  peer_eager_ = IsEager(hdr);
  std::string err;
  RxTracker::Slot* slot = nullptr;
  switch (tracker_.Classify(hdr, l.epoch, &slot, &err)) {
    case RxTracker::Verdict::kNotPosted:
      if (IsEager(hdr) && stash_bytes_ + hdr.len <= kMaxStashBytes) {
        stash_.push_back(std::make_unique<Stashed>());
        s.stash = stash_.back().get();
        s.stash->hdr = hdr;
        s.stash->bytes.resize(hdr.len);
        s.stash->link = idx;
        stash_bytes_ += hdr.len;
        if (hdr.len == 0) {
          s.stash->link = -1, s.stash = nullptr;
          DrainStash();
          return a;
        }
        s.kind = RxAction::kStash;
        a.kind = RxAction::kStash;
        a.dst = s.stash->bytes.data();
        a.len = hdr.len;
        return a;
      }
      a.kind = RxAction::kWait;  // credited chunks only (wire.h): its receive is being posted; no copy meanwhile
      return a;
    case RxTracker::Verdict::kError:
      (void)Fail(Code::kRemoteError, "from " + l.name + ": " + err);
      a.kind = RxAction::kFail;
      return a;
    case RxTracker::Verdict::kDrop:
      if (hdr.len == 0) return a;
      s.kind = a.kind = RxAction::kDiscard;
      a.len = hdr.len;
      return a;
    case RxTracker::Verdict::kPlace:
      if (hdr.len == 0) {
        Complete(slot, hdr);
        return a;
      }
      s.kind = a.kind = RxAction::kPlace;
      s.slot = slot;
      a.dst = static_cast<uint8_t*>(slot->buf) + hdr.offset;
      a.len = hdr.len;
      return a;
  }
  return a;
}

void RecvCore::OnPayload(uint64_t /*now*/, int idx, int stream) {
  if (idx < 0 || static_cast<size_t>(idx) >= links_.size() || stream < 0 ||
      static_cast<size_t>(stream) >= links_[idx].rx.size()) {
    return;  // the link was dropped meanwhile
  }
  RxStream& s = links_[idx].rx[stream];
  RxAction::Kind kind = s.kind;
  s.kind = RxAction::kNone;  // before Complete: this stream no longer writes into the buffer
  switch (kind) {
    case RxAction::kPlace:
      Complete(s.slot, s.hdr);
      s.slot = nullptr;
      ReleaseDeferred();
      break;
    case RxAction::kStash:  // complete: its receive may have been posted meanwhile
      s.stash->link = -1;
      s.stash = nullptr;
      DrainStash();
      break;
    default:
      break;
  }
}

// True while some stream is still reading a payload into `slot`'s buffer: a chunk re-sent after a
// failover can complete the message on one link while its first copy is still arriving on another.
bool RecvCore::Placing(const RxTracker::Slot* slot) const {
  for (const auto& l : links_) {
    for (const auto& s : l.rx) {
      if (s.kind == RxAction::kPlace && s.slot == slot) return true;
    }
  }
  return false;
}

void RecvCore::Complete(RxTracker::Slot* slot, const Frame& f) {
  if (!tracker_.Placed(slot, f)) return;
  // A 0-byte message (an end-of-stream marker) is acknowledged at once although eager: its sender is
  // about to close, and a closing send comm lingers until the ack (up to 1 s) — this receiver may not
  // be called again to flush a deferred one.
  ack_unconfirmed_ = true;
  if (IsEager(f) && slot->total > 0) ++eager_unacked_, eager_unacked_bytes_ += static_cast<size_t>(slot->total);
  else waited_upto_ = std::max(waited_upto_, f.seq + 1);  // the sender's request waits for this ack
  // The ack may go (every byte is in place); NCCL gets the buffer back only once no late duplicate
  // is still writing into it (identical bytes, but NCCL may reuse the buffer at once).
  if (Placing(slot)) deferred_.push_back(slot);
  else Done(slot);
}

void RecvCore::Done(const RxTracker::Slot* slot) {
  done_.push_back(Completion{slot->owner, static_cast<size_t>(slot->total), slot->gk});
}

void RecvCore::ReleaseDeferred() {
  for (size_t i = 0; i < deferred_.size();) {
    if (Placing(deferred_[i])) {
      ++i;
      continue;
    }
    Done(deferred_[i]);
    deferred_.erase(deferred_.begin() + static_cast<long>(i));
  }
}

// Places the stashed eager chunks whose receive is posted now; drops those no longer needed.
void RecvCore::DrainStash() {
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
      uint8_t* dst = static_cast<uint8_t*>(slot->buf) + c.hdr.offset;
      Status st = Copy(dst, c.bytes.data(), c.hdr.len);
      if (!st.ok()) {
        (void)Fail(st.code(), "placing a stashed chunk failed: " + st.message());
        return;
      }
      Complete(slot, c.hdr);
    }
    stash_bytes_ -= c.bytes.size();
    stash_.erase(stash_.begin() + static_cast<long>(i));
  }
}

bool RecvCore::NextControl(uint64_t /*now*/, int idx, Frame* out) {
  if (idx < 0 || static_cast<size_t>(idx) >= links_.size()) return false;
  RxLink& l = links_[idx];
  if (!l.alive || l.out.empty()) return false;
  *out = l.out.front();
  l.out.pop_front();
  return true;
}

// Queues acks and heartbeats. An ack or credit nobody waits for is held back (core.h, "Acks and
// credits") and goes out in a pass that read nothing (`idle`) once it waited kHoldControlNs.
void RecvCore::QueueControl(uint64_t now, bool idle, bool flush_held) {
  uint64_t prefix = tracker_.completed_prefix();
  uint64_t credit = tracker_.posted();
  const bool new_ack = prefix != ack_sent_, new_credit = credit != credit_sent_;
  // A message whose sender waits for its ack may complete before older eager ones: every ack is
  // urgent until one covers it (deferring the ack that finally does would leave that send waiting for
  // the receiver's next call, which may never come: tests/sim seed 103173). A new credit goes out at
  // once when the sender may be holding a message for it: it sends normal messages (an eager one
  // needs no credit), or it said so.
  bool ack_due = (new_ack && (ack_urgent_ || waited_upto_ > ack_sent_ || eager_unacked_ >= kEagerAckEvery ||
                              eager_unacked_bytes_ >= cfg_.eager_pool / 2)) ||
                 (new_credit && (!peer_eager_ || credit_sent_ < want_credit_));
  if (!new_ack && !new_credit) held_since_ns_ = 0;
  else if (held_since_ns_ == 0) held_since_ns_ = now;
  ack_due |= held_since_ns_ != 0 && (flush_held || (idle && now - held_since_ns_ >= kHoldControlNs));
  // The first two live links carry the ack: an ack lost with a failing link would otherwise wait
  // for this comm's next call, which may never come (the receiver has nothing left to receive). A
  // failed write drops its link, and DropLink asks for the ack again.
  int copies = 0;
  if (ack_due && LiveLinks() > 0) {
    copies = 2;
    for (auto& l : links_) l.carries_ack = false;  // their copies are older
    ack_sent_ = prefix;
    credit_sent_ = credit;
    ack_urgent_ = false;
    eager_unacked_ = 0;
    eager_unacked_bytes_ = 0;
    held_since_ns_ = 0;
  }
  for (auto& l : links_) {
    if (!l.alive) continue;
    if (copies > 0) {
      l.out.push_back(Frame{FrameMagic(FrameType::kAck), 0, static_cast<uint32_t>(conn_id_), l.epoch, prefix, credit, 0});
      l.carries_ack = true;
      --copies;
    }
    if ((l.hb_now || now - l.last_hb_ns >= cfg_.heartbeat_ns) && l.out.size() < 4) {
      l.out.push_back(Frame{FrameMagic(FrameType::kHeartbeat), 0, static_cast<uint32_t>(conn_id_), l.epoch, prefix, credit, 0});
      l.carries_ack |= prefix == ack_sent_;  // a heartbeat carries the ack too
      l.last_hb_ns = now;
      l.hb_now = false;
    }
  }
}

void RecvCore::FlushHeld(uint64_t now) {
  if (state_ == ConnState::kActive) QueueControl(now, false, true);
}

// The receiver's heartbeats are bytes in flight on every live link: if the peer's kernel stops
// acknowledging them, the link is a black hole. The last live link is never dropped for a stall; it
// only starts the give-up clock (Poll).
void RecvCore::OnSamples(uint64_t now, const std::vector<LinkSample>& samples) {
  next_sample_ns_ = now + StallCheckNs(cfg_);
  for (size_t idx = 0; idx < links_.size(); ++idx) {
    RxLink& l = links_[idx];
    if (!l.alive || idx >= samples.size() || !samples[idx].valid) {
      l.stall.Reset();
      continue;
    }
    l.stall.Sample(samples[idx], now);
    // The latest ack was handed out on this link and its control stream holds no byte the sender's
    // kernel has not acknowledged (the driver counts a frame it has not finished writing as notsent).
    const StreamSample& ctl = samples[idx].s[0];
    if (l.carries_ack && l.out.empty() && samples[idx].streams > 0 && ctl.outq == 0 && ctl.notsent == 0 &&
        ack_sent_ == tracker_.completed_prefix() && ack_unconfirmed_) {
      ack_unconfirmed_ = false;
      owe_until_ns_ = now + cfg_.giveup_ns;
    }
    if (Stalled(l) && LiveLinks() > 1) {
      DropLink(now, static_cast<int>(idx), "stall: bytes unacknowledged for " + std::to_string(l.stall.age_ns / 1000000) + " ms", false);
    }
  }
}

void RecvCore::Poll(uint64_t now, bool idle) {
  if (state_ == ConnState::kFailed) return;
  if (state_ == ConnState::kPeerClosed) {
    if (tracker_.completed_prefix() != tracker_.posted()) {
      (void)Fail(Code::kRemoteError, "receive posted but the peer has closed the connection");
    }
    return;
  }
  for (size_t idx = 0; idx < links_.size(); ++idx) {  // a link kept on a downed rail, now that another works
    if (links_[idx].alive && links_[idx].rail_down && LiveLinks() > 1) {
      DropLink(now, static_cast<int>(idx), "link-down event", false);
    }
  }
  if (owe_until_ns_ != 0 && now >= owe_until_ns_) owe_until_ns_ = 0;  // OwesIdleProgress: the duty ended
  QueueControl(now, idle);
  int working = 0;
  for (const auto& l : links_) working += l.alive && !Stalled(l) && !l.rail_down;
  if (GiveUpDue(tracker_.posted() > 0, working, now, cfg_.giveup_ns)) {
    if (tracker_.completed_prefix() != tracker_.posted()) {
      (void)Fail(Code::kRemoteError, "no link from the peer for RERAIL_GIVEUP_MS (" +
                                         std::to_string(cfg_.giveup_ns / 1000000) + " ms)");
    } else {
      ack_unconfirmed_ = false;  // the sender, waiting for it, has given up by now
      owe_until_ns_ = 0;
    }
  }
}

uint64_t RecvCore::Deadline() const {
  if (state_ != ConnState::kActive) return UINT64_MAX;
  uint64_t d = next_sample_ns_;
  for (const auto& l : links_) {
    if (!l.alive) continue;
    d = std::min(d, l.hb_now ? 0 : l.last_hb_ns + cfg_.heartbeat_ns);
  }
  // The give-up time matters only with a receive pending (Poll fails nothing otherwise): once it has
  // passed, an idle comm would return a deadline in the past forever and a driver that sleeps until
  // Deadline() would spin (found by tests/sim, seed 185). An Irecv is an input: Poll runs after it.
  if (no_link_since_ns_ != 0 && tracker_.completed_prefix() != tracker_.posted()) {
    d = std::min(d, no_link_since_ns_ + cfg_.giveup_ns + 1);
  }
  if (held_since_ns_ != 0 && LiveLinks() > 0) d = std::min(d, held_since_ns_ + kHoldControlNs);  // an idle Poll sends it
  return d;
}

}  // namespace rr::net
