// The TCP driver of the receiving core (conn.h, core/core.h).
#include <algorithm>
#include <cstdio>
#include <cstring>

#include "conn.h"
#include "idle_sends.h"
#include "rerail/clock.h"
#include "rerail/log.h"
#include "rerail/prof_net_event.h"
#include "rerail/rails/board.h"

namespace rr::net {

namespace {
constexpr size_t kScratchBytes = 1 << 16;
// Per stream: a header and a small payload come in one recv (the 8-byte ping-pong's one recv).
constexpr size_t kReadAheadBytes = 8192;
constexpr uint64_t kListenPollNs = 2'000'000;  // how often a comm looks for re-connected rails
// The receiver's grouped mode is the sender's (its hello), not this process' RERAIL_MAX_RECVS.
CoreConfig RecvCoreConfig(const ConnConfig& cfg, const LinkIdentity& id) {
  CoreConfig c = cfg.core();
  c.grouped = id.grouped;
  return c;
}
}  // namespace

RecvComm::RecvComm(const ConnConfig& cfg, std::unique_ptr<Listener> listener, std::unique_ptr<Link> first)
    : Comm(kRecvCommMagic),
      cfg_(cfg),
      core_(RecvCoreConfig(cfg, first->identity()), first->identity().conn_id, first->identity().chunk_size, this),
      listener_(std::move(listener)) {
  conn_id_ = first->identity().conn_id;
  if (stager_) {   // eager chunks stashed in host memory may land in a GPU buffer
    core_.SetCopier([this](void* dst, const void* src, size_t len) { return stager_->Place(dst, src, len); });
  }
  Attach(std::move(first), NowNs());
  if (cfg_.duplex) DuplexRegistry::Get().AddRecv(this, conn_id_);  // whole before a send comm may call in
}

RecvComm::~RecvComm() {
  IdleSends::Get().Remove(this);
  if (cfg_.duplex) DuplexRegistry::Get().RemoveRecv(this);  // no send comm calls in after this
  if (core_.state() == ConnState::kActive) {
    const uint64_t now = NowNs();
    core_.FlushHeld(now);
    // Best effort and silent, so not FlushControl: the sender may be gone already, and a write error
    // here is no failure of a connection that is being closed (FlushControl would fail it, "closed the
    // connection with a receive pending": NetFaults.UnpolledPeersCauseNoFalseFailover). A link with a
    // frame half written takes no other (nor does a shared socket a send comm holds mid-frame).
    if (!links_.empty() && links_[0].port) Unpark(now);
    for (size_t idx = 0; idx < links_.size(); ++idx) {
      RxLink& l = links_[idx];
      Frame f;
      bool fresh = false;
      while (l.link && !l.out_busy && NextOut(l, static_cast<int>(idx), now, &f, &fresh)) {
        iovec iov{&f, sizeof(Frame)};
        size_t n = 0;
        int err = 0;
        if (WriteControl(l, &iov, sizeof(Frame), &n, &err) != IoState::kOk || n != sizeof(Frame)) break;
      }
    }
  }
  // An owned shared socket dies with this comm (its borrower re-sends what it may have lost); an
  // adopted one goes back to its owner.
  for (RxLink& l : links_) ReleasePort(l);
}

void RecvComm::Attach(std::unique_ptr<Link> link, uint64_t now) {
  const LinkIdentity& id = link->identity();
  // RERAIL_TCP_DUPLEX: link 0 has one stream more, for a shared socket a send comm may hand over.
  const int slots = link->streams() + (cfg_.duplex && id.link == 0 && link->streams() < kMaxStreams ? 1 : 0);
  if (id.conn_id != conn_id_ ||
      !core_.OnLinkUp(now, id.link, id.epoch, id.rail, slots, link->Describe())) {
    RR_WARN("conn %016lx: refused a link (%s, conn %016lx link %d epoch %u)", static_cast<unsigned long>(conn_id_),
            link->Describe().c_str(), static_cast<unsigned long>(id.conn_id), id.link, id.epoch);
    return;
  }
  if (links_.size() <= static_cast<size_t>(id.link)) links_.resize(id.link + 1);
  RxLink& l = links_[id.link];
  ReleasePort(l);  // a replacement: the old socket's sharing ends with it
  l.rail = id.rail;
  l.rail_gen = RailGen(cfg_.rails, id.rail);
  l.link = std::move(link);
  l.rx.assign(slots, RxStream{});
  l.reserved = slots > l.link->streams() ? l.link->streams() : -1;
  l.out_busy = false;
  l.out_done = 0;
  l.backlog.clear();  // the old incarnation's acks: the core acks on the new one
}

void RecvComm::Sync() {
  if (core_.drops() == synced_drops_) return;  // no link dropped since the last pass (the data path)
  synced_drops_ = core_.drops();
  for (size_t i = 0; i < links_.size(); ++i) {
    RxLink& l = links_[i];
    if (l.link && !core_.alive(static_cast<int>(i))) {
      if (!l.out_busy || l.out_done == 0) {  // tell the sender this is a dropped link (best effort)
        Frame notice = core_.DropNotice(static_cast<int>(i));
        iovec iov{&notice, sizeof(Frame)};
        size_t n = 0;
        int err = 0;
        (void)WriteControl(l, &iov, sizeof(Frame), &n, &err);
      }
      // The socket this comm adopted is sound (its own faults detach it first): its owner reads it
      // again, and gets the acks its peer wrote there (NetFaults.LinkDownMidStreamLosesNothing: the
      // peer closed its send comm, its unread socket reset this link, and the owner's link 0, failed
      // with it, waited for acks on a socket nobody read until RERAIL_GIVEUP_MS).
      ReleasePort(l);
      l.link.reset();
      l.rx.clear();
      l.out_busy = false;
      l.out_done = 0;
      l.backlog.clear();
    }
  }
}

// NCCL holds none of the comm's receives while the sender may still wait for an ack (the ack went
// out on a link that then died, or not at all yet): IdleSends drives it, so the sender's probes are
// accepted and the ack is written again on the link they bring.
uint64_t RecvComm::IdleProgress() {
  return IdleProgressWith(core_, [this] { return Progress(true); });
}

Status RecvComm::Irecv(int n, void* const* data, const size_t* caps, const int* tags, void* phandle, Request** req) {
  std::lock_guard<std::mutex> drive(drive_mu_);   // IdleSends may be driving this comm
  *req = nullptr;
  if (core_.state() == ConnState::kFailed) {
    size_t total = 0;
    for (int k = 0; k < n; ++k) total += caps[k];
    return PostAfterEnd(false, total, req);
  }
  Request* r = pool_.Get(false);
  if (r == nullptr) return Status::Ok();
  bool posted = false;
  Status st = core_.IrecvGroup(NowNs(), n, data, caps, tags, r, &posted, r->slots);
  if (!st.ok() || !posted) {  // window full until older messages complete: NCCL retries
    pool_.Put(r);
    return st.ok() ? Progress(false) : st;
  }
  r->seq = core_.posted() - 1;  // the last element: test() reads until it is complete
  r->n = n;
  ProfStart(cfg_.prof, r, phandle, cfg_.dev);
  *req = r;
  // The I/O waits for test(), unless the message came before this receive was posted: a header
  // parked for it, or its bytes stashed (the core placed them as it posted): place it now, from what
  // was read with it, and complete it, so that test() reports it without a read pass. (No read here:
  // on a ping-pong's critical path a read costs a recv per stream that finds nothing, as the read
  // that brought the message drained its socket.) A failure found here is reported by test() on
  // this request.
  bool parked = false;
  for (const RxLink& l : links_) {
    for (const RxStream& s : l.rx) parked |= s.have_hdr;
  }
  if (parked || core_.completed() > r->seq) PlaceParked();
  else if (core_.grouped()) FlushControl(NowNs());  // the sender takes no seq before this announcement
  return Status::Ok();
}

void RecvComm::PlaceParked() {
  const uint64_t now = NowNs();
  for (size_t k = 0; k < links_.size() && core_.state() == ConnState::kActive; ++k) {
    for (int i = 0; links_[k].link && i < static_cast<int>(links_[k].rx.size()); ++i) {
      if (links_[k].rx[i].have_hdr) ReadStream(static_cast<int>(k), i, now, /*read=*/false);
    }
  }
  core_.Poll(now, false);
  if (core_.state() == ConnState::kActive) FlushControl(now);
  DrainCompletions(core_);
}

// Reads more of stream i: `want` bytes into dst (a payload's destination, or the scratch sink), then
// whatever fits of what follows into the stream's read-ahead buffer, in one call.
bool RecvComm::Fill(int idx, int i, uint64_t now, uint8_t* dst, size_t want, size_t* placed, bool* drained) {
  RxLink& l = links_[idx];
  RxStream& s = l.rx[i];
  if (s.buf.empty()) s.buf.resize(kReadAheadBytes);
  CompactReadAhead(s.buf.data(), &s.pos, &s.end);
  // Behind a large payload only the next header is read ahead: the payload after it goes straight to
  // its own destination (no copy). Behind a small one (or none) the whole buffer: small frames come
  // in one call.
  size_t tail = want >= s.buf.size() ? sizeof(Frame) : s.buf.size() - s.end;
  if (s.end + tail > s.buf.size()) tail = s.buf.size() - s.end;
  iovec iov[2];
  int cnt = 0;
  if (want > 0) iov[cnt++] = {dst, want};
  if (tail > 0) iov[cnt++] = {s.buf.data() + s.end, tail};
  size_t n = 0;
  int err = 0;
  const bool shared = i == l.port_stream;
  IoState st;
  if (shared) {  // the adopted socket: its owner may have let it go
    std::lock_guard<std::mutex> lk(l.port->mu);
    Link* adopted = l.port->link.load();
    st = adopted != nullptr ? adopted->Readv(0, iov, cnt, &n, &err) : IoState::kClosed;
    if (adopted == nullptr) err = -1;  // not the peer's EOF
  } else {
    st = l.link->Readv(i, iov, cnt, &n, &err);
  }
  *placed = 0;
  if (st == IoState::kAgain) return false;
  if (st != IoState::kOk && shared) {
    const bool eof = st == IoState::kClosed && err != -1;
    DetachPort(idx, now, err == -1 ? "its owner let it go" : eof ? "closed by the peer" : std::string("receive failed: ") + strerror(err),
               err != -1, eof);
    return false;
  }
  if (st != IoState::kOk) {
    bool peer_closed = st == IoState::kClosed || err == ECONNRESET;
    core_.OnLinkError(now, idx, st == IoState::kClosed ? "closed by the sender" : std::string("receive failed: ") + strerror(err),
                      peer_closed);
    Sync();
    return false;
  }
  ++rx_events_;
  s.last_data_ns = now;
  *placed = std::min(n, want);
  s.end += n - *placed;
  *drained = n < want + tail;
  return true;
}

// Reads what one stream has: frames out of its read-ahead buffer, each header, then its payload where
// the core says (the posted buffer, a stash copy, or the scratch sink). A header whose receive is not
// posted yet stays parked until the next call. Returns once the stream is drained: a read that got
// less than it asked for ends the pass, so a stream costs no extra EAGAIN read after its data.
void RecvComm::ReadStream(int idx, int i, uint64_t now, bool read) {
  RxLink& l = links_[idx];
  bool drained = !read;  // nothing more to read: only the read-ahead buffer's bytes
  while (l.link) {
    RxStream& s = l.rx[i];
    if (s.phase == Phase::kHeader) {
      if (!s.have_hdr) {
        if (s.end - s.pos < sizeof(Frame)) {
          size_t placed = 0;
          if (drained || !Fill(idx, i, now, nullptr, 0, &placed, &drained)) return;
          continue;
        }
        std::memcpy(&s.hdr, s.buf.data() + s.pos, sizeof(Frame));
        s.pos += sizeof(Frame);
        s.have_hdr = true;
      }
      if (TypeOf(s.hdr) == FrameType::kShare && FrameValid(s.hdr) && s.hdr.len == 0) {  // driver's, not the core's
        s.have_hdr = false;
        OnShare(idx, i, s.hdr);
        continue;
      }
      // Another connection's frame on the shared socket (duplex.h): on the initiator's end the owning
      // send comm's control, on the reactor's end the initiator's receive comm's acks (they rode its
      // frames); control frames only, for the partner send comm's mailbox.
      if (l.port && s.hdr.conn != static_cast<uint32_t>(conn_id_) &&
          (i == l.port_stream || (l.OwnsPort() && i == 0 && s.hdr.conn == static_cast<uint32_t>(l.port->guest_conn)))) {
        if (!FrameValid(s.hdr) || s.hdr.len != 0) {
          s.have_hdr = false;
          if (l.OwnsPort()) {  // this connection's own socket
            core_.OnLinkError(now, idx, "a frame of the sharing connection with a payload", false);
            Sync();
          } else {
            DetachPort(idx, now, "a frame of another connection with a payload", true, false);
          }
          return;
        }
        {
          std::lock_guard<std::mutex> lk(l.port->mu);
          l.port->mailbox.push_back(s.hdr);
          l.port->Flags();
        }
        s.have_hdr = false;
        ++rx_events_;
        continue;
      }
      if (i == l.port_stream && !l.port_heard) {  // the peer's send comm borrowed the socket: its receive
        (void)l.port->AllowHeld();                 // comm routes this comm's acks there
        l.port_heard = true;
      }
      RxAction a = core_.OnFrame(now, idx, i, s.hdr);
      Sync();
      if (a.kind == RxAction::kWait || a.kind == RxAction::kFail || !l.link) return;
      s.have_hdr = false;
      ++rx_events_;
      if (a.kind == RxAction::kNone) continue;
      s.phase = Phase::kPayload;
      s.dst = a.kind == RxAction::kDiscard ? nullptr : a.dst;
      if (stager_) {   // issue 13: read into a slot
        uint8_t* slot = stager_->Divert(idx * 256 + i, s.dst, a.len);
        if (slot == nullptr && s.dst != nullptr) {
          (void)core_.Abort(stager_->error().code(), "staging a chunk failed: " + stager_->error().message());
          Sync();
          return;
        }
        s.dst = slot;
      }
      s.remaining = a.len;
      continue;
    }
    if (s.remaining > 0) {
      size_t placed = 0;
      if (s.end > s.pos) {  // read ahead with the header
        placed = std::min(s.end - s.pos, s.remaining);
        if (s.dst != nullptr) std::memcpy(s.dst, s.buf.data() + s.pos, placed);
        s.pos += placed;
      } else {
        if (drained) return;
        if (s.dst == nullptr && scratch_.empty()) scratch_.resize(kScratchBytes);
        uint8_t* to = s.dst != nullptr ? s.dst : scratch_.data();
        size_t want = s.dst != nullptr ? s.remaining : std::min(s.remaining, scratch_.size());
        if (!Fill(idx, i, now, to, want, &placed, &drained)) return;
      }
      if (s.dst != nullptr) {
        if (cfg_.board) cfg_.board->AddBytes(l.rail, 0, placed, now);
        s.dst += placed;
      }
      s.remaining -= placed;
      if (s.remaining > 0) continue;
    }
    s.phase = Phase::kHeader;
    if (stager_ && !stager_->Land(idx * 256 + i)) {   // unpack the slot into the posted buffer first
      (void)core_.Abort(stager_->error().code(), "landing a staged chunk failed: " + stager_->error().message());
      Sync();
      return;
    }
    core_.OnPayload(now, idx, i);
    Sync();
  }
}

// Writes the control frames the core queued (acks, heartbeats, notices) on each live link's stream 0.
void RecvComm::FlushControl(uint64_t now) {
  for (size_t idx = 0; idx < links_.size(); ++idx) {
    RxLink& l = links_[idx];
    while (l.link) {
      if (!l.out_busy) {
        bool fresh = false;
        if (!NextOut(l, static_cast<int>(idx), now, &l.out, &fresh)) break;
        if (fresh && Park(l, static_cast<int>(idx), l.out)) continue;
        l.out_busy = true;
        l.out_done = 0;
      }
      iovec iov{reinterpret_cast<uint8_t*>(&l.out) + l.out_done, sizeof(Frame) - l.out_done};
      size_t n = 0;
      int err = 0;
      IoState st = WriteControl(l, &iov, sizeof(Frame) - l.out_done, &n, &err);
      if (st == IoState::kAgain) break;
      if (st != IoState::kOk) {
        core_.OnLinkError(now, static_cast<int>(idx), std::string("sending control failed: ") + strerror(err),
                          err == ECONNRESET || err == EPIPE);
        Sync();
        break;
      }
      l.out_done += n;
      if (l.out_done == sizeof(Frame)) l.out_busy = false;
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
    Attach(std::move(link), now);
  }
}

void RecvComm::PollRails(uint64_t now) {
  for (auto& l : links_) {
    if (!l.link) continue;
    switch (PollRail(cfg_.rails, l.rail, &l.rail_gen)) {
      case RailChange::kDown: core_.OnRail(now, l.rail, true); break;
      case RailChange::kUp: core_.OnRail(now, l.rail, false); break;
      case RailChange::kNone: break;
    }
  }
  Sync();
}

void RecvComm::Sample(uint64_t now) {
  samples_.resize(links_.size());
  for (size_t i = 0; i < links_.size(); ++i) {
    LinkSample& s = samples_[i];
    Link* link = links_[i].link.get();
    s.valid = link != nullptr;
    s.streams = s.valid ? std::min(link->streams(), kMaxStreams) : 0;
    for (int k = 0; k < s.streams && s.valid; ++k) s.valid = link->Sample(k, &s.s[k]);
    // A control frame handed out by the core but not fully written is not sent either (the core's
    // ack confirmation, RecvCore::OwesIdleProgress, must not count it as delivered).
    // So are acks handed back from a port (backlog) or parked on it (duplex.h).
    const RxLink& l = links_[i];
    if (s.valid && s.streams > 0) {
      if (l.out_busy) s.s[0].notsent += sizeof(Frame) - l.out_done;
      s.s[0].notsent += l.backlog.size() * sizeof(Frame);
      if (l.port) {
        std::lock_guard<std::mutex> lk(l.port->mu);
        s.s[0].notsent += l.port->HeldBytes();
      }
    }
  }
  core_.OnSamples(now, samples_);
  Sync();
}

// ---- RERAIL_TCP_DUPLEX (duplex.h)

IoState RecvComm::WriteControl(RxLink& l, const iovec* iov, size_t frame_left, size_t* n, int* err) {
  if (l.OwnsPort()) return l.port->Write(2, iov, 1, frame_left, true, n, err);  // parked acks go first
  return l.link->Writev(0, iov, 1, n, err);
}

bool RecvComm::NextOut(RxLink& l, int idx, uint64_t now, Frame* f, bool* fresh) {
  *fresh = l.backlog.empty();
  if (*fresh) return core_.NextControl(now, idx, f);
  *f = l.backlog.front();
  l.backlog.erase(l.backlog.begin());
  return true;
}

bool RecvComm::Park(RxLink& l, int idx, const Frame& f) {
  // Only while NCCL holds a receive of this comm (a reply may follow): an idle pass (IdleSends) writes.
  if (idx != 0 || !l.port || TypeOf(f) != FrameType::kAck || !l.backlog.empty() || pool_.in_use() == 0) return false;
  return l.port->Hold(f);
}

void RecvComm::Unpark(uint64_t now) {
  RxLink& l = links_[0];
  if (!l.port->any_held.load(std::memory_order_acquire)) return;  // every pass: no lock
  // The adopter writes them whole on its own socket, where no bulk data queues; the owner's, and a
  // cut one, are finished on the port.
  if (!l.OwnsPort() && l.port->TakeHeld(&l.backlog, false)) return;
  size_t n = 0;
  int err = 0;
  IoState st = l.port->Write(2, nullptr, 0, 0, true, &n, &err);
  if (st == IoState::kOk || st == IoState::kAgain) return;  // the rest goes with the next write there
  if (l.OwnsPort()) {  // its own socket failed
    core_.OnLinkError(now, 0, std::string("sending control failed: ") + strerror(err), err == ECONNRESET || err == EPIPE);
    Sync();
  }  // an adopted one that failed: DetachPort moves what is left to the backlog at the next read
}

void RecvComm::ReleasePort(RxLink& l) {
  if (!l.port) return;
  {
    std::lock_guard<std::mutex> lk(l.port->mu);
    // The adopted stream, unless it sits in a header that is no frame's (no boundary to skip to).
    const RxStream* at = l.port_stream >= 0 && l.port_stream < static_cast<int>(l.rx.size()) ? &l.rx[l.port_stream] : nullptr;
    if (at != nullptr && at->have_hdr && !FrameValid(at->hdr)) at = nullptr;
    if (l.OwnsPort()) {
      l.port->link = nullptr;
    } else if (at != nullptr) {
      const RxStream& s = *at;
      if (!s.buf.empty()) {
        l.port->leftover.assign(s.buf.begin() + static_cast<long>(s.pos), s.buf.begin() + static_cast<long>(s.end));
      }
      l.port->skip = s.phase == Phase::kPayload ? s.remaining : s.have_hdr ? s.hdr.len : 0;
      l.port->handback = true;
    } else if (l.port->failed.empty()) {
      l.port->failed = "the receive comm reading its shared socket dropped its link 0 inside a header that is no frame's";
    }
  }
  l.port.reset();
  l.port_stream = -1;
}

// A kShare from this connection's sender (the initiator's end of a pair): the send comm of conn
// hdr.seq in this process may write its link-0 frames on this socket (the reactor's end).
void RecvComm::OnShare(int idx, int i, const Frame& hdr) {
  RxLink& l = links_[idx];
  if (!cfg_.duplex || idx != 0 || i != 0 || l.port || InstanceOfConn(hdr.seq) != ProcessInstance()) {
    RR_INFO(log::kFlagNet, "conn %016lx: ignored a kShare for conn %016lx on link %d stream %d",
            static_cast<unsigned long>(conn_id_), static_cast<unsigned long>(hdr.seq), idx, i);
    return;
  }
  auto p = std::make_shared<DuplexPort>();
  p->link = l.link.get();
  p->owner_conn = conn_id_;
  p->guest_conn = hdr.seq;
  if (!DuplexRegistry::Get().Offer(hdr.seq, InstanceOfConn(conn_id_), p)) {
    RR_INFO(log::kFlagNet, "conn %016lx: no send comm of conn %016lx to this connection's sender: kShare ignored",
            static_cast<unsigned long>(conn_id_), static_cast<unsigned long>(hdr.seq));
    return;
  }
  l.port = std::move(p);
}

void RecvComm::DetachPort(int idx, uint64_t now, const std::string& why, bool tell_owner, bool eof) {
  RxLink& l = links_[idx];
  const int i = l.port_stream;
  RxStream& s = l.rx[i];
  const bool mid_frame = s.phase == Phase::kPayload || s.have_hdr || s.end > s.pos;
  if (tell_owner) {
    std::lock_guard<std::mutex> lk(l.port->mu);
    if (l.port->failed.empty()) {
      char by[64];
      std::snprintf(by, sizeof(by), "shared socket read by conn %016lx: ", static_cast<unsigned long>(conn_id_));
      l.port->failed = by + why;
      l.port->failed_eof = eof;
    }
  }
  RR_INFO(log::kFlagNet, "conn %016lx: the shared socket of link 0 ended (%s)%s", static_cast<unsigned long>(conn_id_),
          why.c_str(), mid_frame ? " mid-frame: link 0 fails" : "");
  (void)l.port->TakeHeld(&l.backlog, true);  // parked acks go on this link's own socket, whole
  l.port.reset();
  l.port_stream = -1;
  s = RxStream{};
  if (mid_frame) {  // the core's stream state is mid-frame: only a new incarnation of link 0 resets it
    core_.OnLinkError(now, idx, "its shared socket ended mid-frame (" + why + ")", false);
    Sync();
  }
}

bool RecvComm::TryAdopt(const std::shared_ptr<DuplexPort>& p, int local_dev) {
  std::unique_lock<std::mutex> lk(drive_mu_, std::try_to_lock);
  if (!lk.owns_lock() || !cfg_.duplex || core_.state() != ConnState::kActive || links_.empty()) return false;
  RxLink& l = links_[0];
  if (!l.link || l.port || l.rail != local_dev || !core_.alive(0)) return false;
  const int slot = l.reserved;
  if (slot < 0) return false;  // no reserved slot (RERAIL_TCP_STREAMS = 16)
  RxStream& s = l.rx[slot];
  s = RxStream{};
  s.buf.resize(kReadAheadBytes);
  if (!p->leftover.empty()) std::memcpy(s.buf.data(), p->leftover.data(), p->leftover.size());
  s.end = p->leftover.size();
  s.last_data_ns = NowNs();
  l.port = p;
  l.port_stream = slot;
  l.port_heard = false;
  RR_INFO(log::kFlagNet, "conn %016lx: link 0 also reads conn %016lx's socket (RERAIL_TCP_DUPLEX)",
          static_cast<unsigned long>(conn_id_), static_cast<unsigned long>(p->owner_conn));
  return true;
}

void RecvComm::TryPump() {
  std::unique_lock<std::mutex> lk(drive_mu_, std::try_to_lock);
  if (lk.owns_lock()) (void)Progress(false);
}

// Acks and credits the core held back go out in a test() call that read nothing: the comm is waiting,
// so they cost no latency on the path of the caller's next message (an irecv never flushes them).
Status RecvComm::Progress(bool idle_acks, uint64_t want_seq) {
  if (core_.state() == ConnState::kFailed) return core_.status();
  const uint64_t now = NowNs();
  MarkDriven(now);
  RR_CHECK(PollListener(now));
  if (!links_.empty() && links_[0].port) Unpark(now);  // acks parked by the last pass that no reply took
  // Each stream is read until it is drained (ReadStream), so one pass over them is enough. The pass
  // ends early once the receive being tested is complete: the caller gets it without a read of the
  // other streams (on a ping-pong's critical path, an EAGAIN each); they are read in the next call.
  // Not while a completion is deferred: the tested receive may be complete in the core's prefix and
  // still wait for a dead link to be dropped, whose notice comes on some other stream (a pass that
  // ended after the first stream never read it, and only the stall watchdog ended the wait:
  // RecvCommTest.ACompletionWaitingForADeadLinksNoticeReadsTheNotice).
  const uint64_t events_before = rx_events_;
  const bool read_cold = now >= cold_read_ns_;
  if (read_cold) cold_read_ns_ = now + kColdReadNs;
  for (size_t k = 0; k < links_.size() && core_.state() == ConnState::kActive; ++k) {
    if (links_[k].OwnsPort() && links_[k].port->poisoned.load()) {  // a frame cut off on the shared socket
      core_.OnLinkError(now, static_cast<int>(k), "a send comm left the shared socket mid-frame", false);
      Sync();
      continue;
    }
    for (int i = 0; links_[k].link && i < static_cast<int>(links_[k].rx.size()); ++i) {
      if (i == links_[k].reserved && i != links_[k].port_stream) continue;  // a reserved slot, unused
      const RxStream& s = links_[k].rx[i];
      if (!read_cold && s.end == s.pos && !s.have_hdr && now - s.last_data_ns > kColdNs) continue;
      ReadStream(static_cast<int>(k), i, now, /*read=*/true);
      if (want_seq != kNoSeq && core_.completed() > want_seq && !core_.deferring()) {
        k = links_.size();
        break;
      }
    }
  }
  core_.Poll(now, idle_acks && rx_events_ == events_before);
  if (core_.state() == ConnState::kActive) {
    FlushControl(now);
    PollRails(now);
    if (core_.SampleDue(now)) Sample(now);
  }
  DrainCompletions(core_);
  return StatusOf(core_);
}

Status RecvComm::Test(Request* r, int* done, int* size) {
  std::lock_guard<std::mutex> drive(drive_mu_);   // IdleSends or a partner send comm may be driving it
  *done = 0;
  if (r->state == ReqState::kFree) return Status::Internal("test on a request already reported done");
  if (r->seq == kSeqPostedAfterEnd) return EndedStatus(core_, "irecv after the connection ended");
  if (r->state != ReqState::kDone) {
    Status st = Progress(true, r->seq);
    if (!st.ok() && r->state != ReqState::kDone) return st;  // completed before the failure: still done
  }
  if (r->state != ReqState::kDone) return Status::Ok();
  *done = 1;
  for (int k = 0; k < r->n; ++k) {
    if (size != nullptr) size[k] = static_cast<int>(r->sizes[k]);
    core_.Release(r->slots[k]);
  }
  ProfStop(cfg_.prof, r);
  pool_.Put(r);
  MaybeListIdle(core_);
  return Status::Ok();
}

void RecvComm::OnFailover(int link, const std::string& why, uint64_t /*bytes*/, uint64_t /*chunks*/, int /*to_link*/,
                          uint64_t /*stall_ns*/, bool /*was_probing*/) {
  if (static_cast<size_t>(link) >= links_.size()) return;
  // The receiver re-sends nothing (bytes 0) and does not pick the survivor (toRail -1).
  ReportRecvFailover(cfg_, links_[link].rail, why);
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
