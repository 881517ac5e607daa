#include "ib_tcp_fallback.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "conn.h"
#include "frame_iov.h"

namespace rr::net {

namespace {
constexpr size_t kSinkBytes = 1 << 16;
constexpr int kWritePasses = 64;
}  // namespace

// ---- IbTcpSendLink

void IbTcpSendLink::Connect(uint64_t now, uint32_t epoch) {
  tcp_.reset();
  connector_.reset();
  tx_.clear();
  in_pos_ = in_end_ = 0;
  epoch_ = epoch;
  dial_due_ = true;
  Dial(now);
}

// The first dial waits until the receiver's comm exists (ib_tcp_fallback.h); later ones never do.
void IbTcpSendLink::Dial(uint64_t now) {
  if (!dial_due_ || (plan_.may_dial && !plan_.may_dial())) return;
  dial_due_ = false;
  LinkIdentity id;
  id.nonce = plan_.nonce;
  id.conn_id = core_->conn_id();
  id.chunk_size = plan_.chunk;
  id.rail = plan_.remote_rail;
  id.link = link_;
  id.nstreams = plan_.streams;
  id.epoch = epoch_;
  id.grouped = plan_.grouped;
  Status st = plan_.transport->Connect(plan_.dev, plan_.remote, id, &connector_);
  if (!st.ok()) {
    connector_.reset();
    core_->OnConnectFailed(now, link_, st.message());
  }
}

void IbTcpSendLink::Close(const Frame& notice) {
  if (tcp_) {  // tell the peer this is a dropped link, not a closed comm (best effort, as SendComm)
    for (int i = 0; i < static_cast<int>(tx_.size()); ++i) {
      if (tx_[i].busy && tx_[i].done > 0) continue;  // mid-frame: the notice would corrupt it
      iovec iov{const_cast<Frame*>(&notice), sizeof(Frame)};
      size_t n = 0;
      int err = 0;
      (void)tcp_->Writev(i, &iov, 1, &n, &err);
      break;
    }
  }
  tcp_.reset();
  connector_.reset();
  dial_due_ = false;
  tx_.clear();
  in_pos_ = in_end_ = 0;
}

void IbTcpSendLink::Fence(const Frame& notice) {
  for (Stream& s : tx_) s.fences.push_back(notice);
}

void IbTcpSendLink::PollConnector(uint64_t now) {
  Dial(now);
  if (!connector_) return;
  std::unique_ptr<Link> link;
  Status st = connector_->Poll(&link);
  if (!st.ok()) {
    connector_.reset();
    core_->OnConnectFailed(now, link_, st.message());
    return;
  }
  if (!link) return;
  connector_.reset();
  tcp_ = std::move(link);
  tx_.assign(static_cast<size_t>(tcp_->streams()), Stream{});
  in_pos_ = in_end_ = 0;
  for (const Frame& n : ib::FailedLinkNotices(*core_, link_)) Fence(n);  // before any chunk (fences)
  core_->OnLinkUp(now, link_);
  host_->DrainCommands(now);
}

void IbTcpSendLink::Error(uint64_t now, const std::string& why, bool peer_closed) {
  core_->OnLinkError(now, link_, why, peer_closed);
  host_->DrainCommands(now);  // the core's kClose calls Close
  tcp_.reset();               // also when the core had failed it already (no kClose then)
  tx_.clear();
}

// One stream: fence notices first, then what the core hands out, each frame header + payload in one
// writev, continued after a short write.
void IbTcpSendLink::Write(int i, uint64_t now, bool* progressed) {
  for (;;) {
    Stream& s = tx_[static_cast<size_t>(i)];
    if (!s.busy) {
      if (!s.fences.empty()) {
        s.f = TxFrame{s.fences.front(), nullptr};
        s.fences.pop_front();
        s.fenced = true;
      } else if (host_->NextTx(now, link_, &s.f)) {
        s.fenced = false;
      } else {
        return;
      }
      s.busy = true;
      s.done = 0;
    }
    const size_t len = s.f.hdr.len;
    iovec iov[2];
    const int cnt = FrameIov(s.f, s.done, iov);
    size_t n = 0;
    int err = 0;
    IoState st = tcp_->Writev(i, iov, cnt, &n, &err);
    if (st == IoState::kAgain) return;
    if (st != IoState::kOk) {
      return Error(now, std::string("send failed: ") + (st == IoState::kClosed ? "closed" : strerror(err)),
                   err == ECONNRESET || err == EPIPE);
    }
    *progressed = true;
    if (!s.fenced) core_->OnWritten(link_, n);
    s.done += n;
    if (s.done < sizeof(Frame) + len) return;  // socket buffer full
    s.busy = false;
    if (!s.fenced) core_->OnTxDone(now, link_, s.f.hdr);
  }
}

// The receiver's control frames (acks, heartbeats, notices, announcements), up to 16 per read.
void IbTcpSendLink::ReadControl(uint64_t now) {
  bool drained = false;
  while (tcp_) {
    if (in_end_ - in_pos_ >= sizeof(Frame)) {
      Frame f;
      std::memcpy(&f, in_.data() + in_pos_, sizeof(Frame));
      in_pos_ += sizeof(Frame);
      core_->OnControl(now, link_, f);
      host_->DrainCommands(now);
      continue;
    }
    if (drained) return;
    CompactReadAhead(in_.data(), &in_pos_, &in_end_);
    size_t want = in_.size() - in_end_;
    size_t n = 0;
    int err = 0;
    IoState st = tcp_->Read(0, in_.data() + in_end_, want, &n, &err);
    if (st == IoState::kAgain) return;
    if (st != IoState::kOk) {
      return Error(now, st == IoState::kClosed ? "peer closed the link" : std::string("receive failed: ") + strerror(err),
                   st == IoState::kClosed || err == ECONNRESET);
    }
    in_end_ += n;
    drained = n < want;
  }
}

void IbTcpSendLink::Pass(uint64_t now) {
  if (!tcp_) {
    PollConnector(now);
    if (!tcp_) return;
  }
  for (int pass = 0; pass < kWritePasses && tcp_; ++pass) {
    bool progressed = false;
    for (int i = 0; tcp_ && i < static_cast<int>(tx_.size()); ++i) Write(i, now, &progressed);
    if (!progressed) break;
  }
  ReadControl(now);
}

LinkSample IbTcpSendLink::Sample() {
  LinkSample s;
  s.valid = tcp_ != nullptr && core_->usable(link_);
  s.streams = s.valid ? std::min(tcp_->streams(), kMaxStreams) : 0;
  for (int k = 0; k < s.streams && s.valid; ++k) s.valid = tcp_->Sample(k, &s.s[k]);
  return s;
}

// ---- IbTcpRecvLink

bool IbTcpRecvLink::Attach(std::unique_ptr<Link> tcp, uint64_t now) {
  const LinkIdentity& id = tcp->identity();
  if (!core_->OnLinkUp(now, idx_, id.epoch, IbTcpRail(id.rail), tcp->streams(), "tcp fallback " + tcp->Describe())) {
    return false;
  }
  tcp_ = std::move(tcp);
  rx_.assign(static_cast<size_t>(tcp_->streams()), Stream{});
  out_busy_ = false;
  out_done_ = 0;
  return true;
}

void IbTcpRecvLink::Sync() {
  if (!tcp_ || core_->alive(idx_)) return;
  if (!out_busy_ || out_done_ == 0) {  // tell the sender this is a dropped link (best effort, as RecvComm)
    Frame notice = core_->DropNotice(idx_);
    iovec iov{&notice, sizeof(Frame)};
    size_t n = 0;
    int err = 0;
    (void)tcp_->Writev(0, &iov, 1, &n, &err);
  }
  tcp_.reset();
  rx_.clear();
  out_busy_ = false;
  out_done_ = 0;
}

void IbTcpRecvLink::ReadFailed(uint64_t now, IoState st, int err) {
  Error(now, st == IoState::kClosed ? "closed by the sender" : std::string("receive failed: ") + strerror(err),
        st == IoState::kClosed || err == ECONNRESET);
}

void IbTcpRecvLink::Error(uint64_t now, const std::string& why, bool peer_closed) {
  core_->OnLinkError(now, idx_, why, peer_closed);
  Sync();
}

bool IbTcpRecvLink::Read(uint64_t now) {
  bool moved = false;
  for (int i = 0; tcp_ && i < static_cast<int>(rx_.size()); ++i) moved |= ReadStream(i, now);
  return moved;
}

// A stream's frames: the header (a parked one first: its receive may be posted now), then the payload
// straight where the core says (the posted buffer, a stash copy, or the sink). True when a byte moved.
bool IbTcpRecvLink::ReadStream(int i, uint64_t now) {
  bool moved = false;
  while (tcp_) {
    Stream& s = rx_[static_cast<size_t>(i)];
    size_t n = 0;
    int err = 0;
    if (!s.payload) {
      if (!s.have_hdr) {
        IoState st = tcp_->Read(i, reinterpret_cast<uint8_t*>(&s.hdr) + s.hdr_got, sizeof(Frame) - s.hdr_got, &n, &err);
        if (st == IoState::kAgain) return moved;
        if (st != IoState::kOk) {
          ReadFailed(now, st, err);
          return moved;
        }
        moved = true;
        s.hdr_got += n;
        if (s.hdr_got < sizeof(Frame)) continue;
        s.hdr_got = 0;
        s.have_hdr = true;
      }
      RxAction a = core_->OnFrame(now, idx_, i, s.hdr);
      if (!core_->alive(idx_)) {  // a protocol error, or the sender's notice that it dropped this link
        Sync();
        return moved;
      }
      if (a.kind == RxAction::kWait || a.kind == RxAction::kFail) return moved;
      s.have_hdr = false;
      moved = true;
      if (a.kind == RxAction::kNone) continue;
      s.payload = true;
      s.dst = a.kind == RxAction::kDiscard ? nullptr : a.dst;
      s.remaining = a.len;
    }
    while (s.remaining > 0) {
      if (s.dst == nullptr && sink_.empty()) sink_.resize(kSinkBytes);
      uint8_t* to = s.dst != nullptr ? s.dst : sink_.data();
      size_t want = s.dst != nullptr ? s.remaining : std::min(s.remaining, sink_.size());
      IoState st = tcp_->Read(i, to, want, &n, &err);
      if (st == IoState::kAgain) return moved;
      if (st != IoState::kOk) {
        ReadFailed(now, st, err);
        return moved;
      }
      moved = true;
      s.remaining -= n;
      if (s.dst != nullptr) s.dst += n;
    }
    s.payload = false;
    core_->OnPayload(now, idx_, i);
    if (!core_->alive(idx_)) {
      Sync();
      return moved;
    }
  }
  return moved;
}

void IbTcpRecvLink::Flush(uint64_t now) {
  while (tcp_) {
    if (!out_busy_) {
      if (!core_->NextControl(now, idx_, &out_)) return;
      out_busy_ = true;
      out_done_ = 0;
    }
    iovec iov{reinterpret_cast<uint8_t*>(&out_) + out_done_, sizeof(Frame) - out_done_};
    size_t n = 0;
    int err = 0;
    IoState st = tcp_->Writev(0, &iov, 1, &n, &err);
    if (st == IoState::kAgain) return;
    if (st != IoState::kOk) {
      return Error(now, std::string("sending control failed: ") + (st == IoState::kClosed ? "closed" : strerror(err)),
                   err == ECONNRESET || err == EPIPE);
    }
    out_done_ += n;
    if (out_done_ == sizeof(Frame)) out_busy_ = false;
  }
}

LinkSample IbTcpRecvLink::Sample() {
  LinkSample s;
  s.valid = tcp_ != nullptr && core_->alive(idx_);
  s.streams = s.valid ? std::min(tcp_->streams(), kMaxStreams) : 0;
  for (int k = 0; k < s.streams && s.valid; ++k) s.valid = tcp_->Sample(k, &s.s[k]);
  return s;
}

}  // namespace rr::net
