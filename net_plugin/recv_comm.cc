#include <cstring>

#include "conn.h"
#include "rerail/log.h"

namespace rr::net {

namespace {
constexpr size_t kScratchBytes = 1 << 16;
}

RecvComm::RecvComm(std::unique_ptr<Link> link)
    : Comm(kRecvCommMagic),
      link_(std::move(link)),
      tracker_(static_cast<uint32_t>(link_->identity().conn_id), link_->identity().chunk_size),
      rx_(link_->streams()) {
  conn_id_ = link_->identity().conn_id;
  peer_ = link_->Describe();
}

Status RecvComm::Fail(Code code, const std::string& why) {
  Transition(ConnState::kFailed, why);
  if (failure_.ok()) failure_ = Status(code, why);
  return failure_;
}

Status RecvComm::Irecv(void* data, size_t cap, Request** req) {
  *req = nullptr;
  if (state_ == ConnState::kFailed) return failure_;
  if (cap > 0 && data == nullptr) return Status::Internal("irecv of " + std::to_string(cap) + " bytes into NULL");
  Request* r = pool_.Get(false);
  if (r == nullptr) return Status::Ok();
  RxTracker::Slot* slot = tracker_.Post(data, cap, r);
  if (slot == nullptr) {  // window full until older messages complete: NCCL retries
    pool_.Put(r);
    return Progress();
  }
  r->seq = slot->seq;
  r->slot = slot;
  *req = r;
  return Progress();
}

// Classifies a complete header and sets up the payload phase. *stalled: its message is not posted yet.
Status RecvComm::OnHeader(RxStream& s, bool* stalled) {
  *stalled = false;
  std::string err;
  RxTracker::Slot* slot = nullptr;
  switch (tracker_.Classify(s.hdr, link_->identity().epoch, &slot, &err)) {
    case RxTracker::Verdict::kNotPosted:
      *stalled = true;  // the bytes wait in the socket: no copy, and TCP flow control pushes back
      return Status::Ok();
    case RxTracker::Verdict::kError:
      return Fail(Code::kRemoteError, "from " + link_->Describe() + ": " + err);
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
  if (tracker_.Placed(s.slot, s.hdr)) {
    auto* r = static_cast<Request*>(s.slot->owner);
    r->size = static_cast<size_t>(s.slot->total);
    r->state = ReqState::kDone;
  }
  s.slot = nullptr;
}

Status RecvComm::ReadStream(int i, bool* progressed) {
  RxStream& s = rx_[i];
  for (;;) {
    size_t n = 0;
    int err = 0;
    IoState st;
    if (s.phase == Phase::kHeader) {
      if (s.hdr_got < sizeof(Frame)) {
        st = link_->Read(i, reinterpret_cast<uint8_t*>(&s.hdr) + s.hdr_got, sizeof(Frame) - s.hdr_got, &n, &err);
        if (st == IoState::kOk) s.hdr_got += n;
      } else {
        st = IoState::kOk;  // header held back earlier: its message may be posted now
      }
      if (st == IoState::kOk && s.hdr_got == sizeof(Frame)) {
        bool stalled = false;
        RR_CHECK(OnHeader(s, &stalled));
        if (stalled) return Status::Ok();
        s.hdr_got = 0;
        *progressed = true;
        if (s.phase == Phase::kPayload && s.remaining == 0) OnPlaced(s), s.phase = Phase::kHeader;
        if (s.phase == Phase::kDiscard && s.remaining == 0) s.phase = Phase::kHeader;
        continue;
      }
    } else if (s.phase == Phase::kPayload) {
      st = link_->Read(i, s.dst, s.remaining, &n, &err);
      if (st == IoState::kOk) {
        s.dst += n;
        s.remaining -= n;
        if (s.remaining == 0) OnPlaced(s), s.phase = Phase::kHeader;
      }
    } else {
      if (scratch_.empty()) scratch_.resize(kScratchBytes);
      st = link_->Read(i, scratch_.data(), std::min(s.remaining, scratch_.size()), &n, &err);
      if (st == IoState::kOk && (s.remaining -= n) == 0) s.phase = Phase::kHeader;
    }
    if (st == IoState::kAgain) return Status::Ok();
    if (st == IoState::kClosed) {
      bool clean = s.phase == Phase::kHeader && s.hdr_got == 0 && tracker_.completed_prefix() == tracker_.posted();
      if (clean) {
        Transition(ConnState::kPeerClosed, "sender closed the connection");
        return Status::Ok();
      }
      return Fail(Code::kRemoteError, "peer " + link_->Describe() + " closed the connection mid-message");
    }
    if (st == IoState::kError) {
      return Fail(Code::kRemoteError, "receive on " + link_->Describe() + " stream " + std::to_string(i) +
                                          " failed: " + strerror(err));
    }
    *progressed = true;
  }
}

Status RecvComm::SendAck() {
  if (ack_out_done_ == sizeof(Frame)) {
    if (tracker_.completed_prefix() == ack_sent_) return Status::Ok();
    ack_out_ = Frame{};
    ack_out_.magic_type = FrameMagic(FrameType::kAck);
    ack_out_.conn = static_cast<uint32_t>(conn_id_);
    ack_out_.epoch = link_->identity().epoch;
    ack_out_.seq = ack_sent_ = tracker_.completed_prefix();
    ack_out_done_ = 0;
  }
  iovec iov{reinterpret_cast<uint8_t*>(&ack_out_) + ack_out_done_, sizeof(Frame) - ack_out_done_};
  size_t n = 0;
  int err = 0;
  IoState st = link_->Writev(0, &iov, 1, &n, &err);
  if (st == IoState::kOk) ack_out_done_ += n;
  if (st == IoState::kClosed || st == IoState::kError) {
    if (tracker_.completed_prefix() == tracker_.posted()) return Status::Ok();  // sender gone, nothing owed
    return Fail(Code::kRemoteError, "sending ack on " + link_->Describe() + ": " + strerror(err));
  }
  return Status::Ok();
}

Status RecvComm::Progress() {
  if (state_ == ConnState::kFailed) return failure_;
  if (state_ == ConnState::kPeerClosed) {
    if (tracker_.completed_prefix() == tracker_.posted()) return Status::Ok();
    // A receive posted after the sender left can never complete.
    return Fail(Code::kRemoteError, "receive posted but peer " + link_->Describe() + " has closed the connection");
  }
  for (int pass = 0; pass < 64; ++pass) {
    bool progressed = false;
    for (int i = 0; i < static_cast<int>(rx_.size()) && state_ == ConnState::kActive; ++i) {
      RR_CHECK(ReadStream(i, &progressed));
    }
    if (!progressed) break;
  }
  return SendAck();
}

Status RecvComm::Test(Request* r, int* done, int* size) {
  *done = 0;
  if (r->state != ReqState::kDone) {
    Status st = Progress();
    if (!st.ok()) return st;
  }
  if (r->state != ReqState::kDone) return Status::Ok();
  *done = 1;
  if (size != nullptr) *size = static_cast<int>(r->size);
  tracker_.Release(static_cast<RxTracker::Slot*>(r->slot));
  pool_.Put(r);
  return Status::Ok();
}

Status ListenComm::Accept(std::unique_ptr<RecvComm>* out) {
  std::unique_ptr<Link> link;
  RR_CHECK(listener_->Poll(&link));
  if (link) *out = std::make_unique<RecvComm>(std::move(link));
  return Status::Ok();
}

}  // namespace rr::net
