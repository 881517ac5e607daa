#include <cstring>

#include "conn.h"
#include "rerail/log.h"

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
  RR_INFO(log::kFlagNet, "conn %016lx with %s: %s -> %s (%s)", static_cast<unsigned long>(conn_id_),
          peer_.c_str(), ConnStateName(state_), ConnStateName(to), why.c_str());
  if (to == ConnState::kFailed) {
    RR_WARN("connection %016lx with %s failed: %s", static_cast<unsigned long>(conn_id_), peer_.c_str(),
            why.c_str());
  }
  state_ = to;
}

SendComm::SendComm(std::unique_ptr<Link> link, uint64_t conn_id, uint32_t chunk)
    : Comm(kSendCommMagic), link_(std::move(link)), chunk_(chunk), tx_(link_->streams()) {
  conn_id_ = conn_id;
  peer_ = link_->Describe();
}

Status SendComm::Fail(Code code, const std::string& why) {
  Transition(ConnState::kFailed, why);
  if (failure_.ok()) failure_ = Status(code, why);
  return failure_;
}

Status SendComm::Isend(const void* data, size_t size, Request** req) {
  *req = nullptr;
  if (state_ == ConnState::kFailed) return failure_;
  if (size > 0 && data == nullptr) return Status::Internal("isend of " + std::to_string(size) + " bytes from NULL");
  if (next_seq_ - acked_ >= static_cast<uint64_t>(RxTracker::kWindow)) {
    RR_CHECK(Progress());
    return Status::Ok();  // window full: NCCL retries
  }
  Request* r = pool_.Get(true);
  if (r == nullptr) return Status::Ok();
  TxMsg& m = msgs_[next_seq_ % RxTracker::kWindow];
  m.seq = next_seq_++;
  m.data = static_cast<const uint8_t*>(data);
  m.size = size;
  m.next_off = 0;
  m.scheduled = false;
  m.req = r;
  r->seq = m.seq;
  r->size = size;
  *req = r;
  return Progress();
}

// Hands the next chunk (oldest message first) to an idle stream.
bool SendComm::NextChunk(TxStream* s) {
  while (sched_seq_ < next_seq_ && msgs_[sched_seq_ % RxTracker::kWindow].scheduled) ++sched_seq_;
  if (sched_seq_ >= next_seq_) return false;
  TxMsg& m = msgs_[sched_seq_ % RxTracker::kWindow];
  size_t len = std::min<size_t>(chunk_, m.size - m.next_off);
  s->hdr.magic_type = FrameMagic(FrameType::kData);
  s->hdr.len = static_cast<uint32_t>(len);
  s->hdr.conn = static_cast<uint32_t>(conn_id_);
  s->hdr.epoch = link_->identity().epoch;
  s->hdr.seq = m.seq;
  s->hdr.offset = m.next_off;
  s->hdr.total = m.size;
  s->payload = m.data + m.next_off;
  s->len = len;
  s->done = 0;
  s->busy = true;
  m.next_off += len;
  if (m.next_off >= m.size) m.scheduled = true;
  return true;
}

Status SendComm::WriteStream(int i, bool* progressed) {
  TxStream& s = tx_[i];
  for (;;) {
    if (!s.busy && !NextChunk(&s)) return Status::Ok();
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
    IoState st = link_->Writev(i, iov, cnt, &n, &err);
    if (st == IoState::kAgain) return Status::Ok();
    if (st != IoState::kOk) {
      return Fail(Code::kRemoteError, "send on " + link_->Describe() + " stream " + std::to_string(i) +
                                          " failed: " + (st == IoState::kClosed ? "closed" : strerror(err)));
    }
    *progressed = true;
    s.done += n;
    if (s.done < sizeof(Frame) + s.len) return Status::Ok();  // socket buffer full
    s.busy = false;
  }
}

Status SendComm::ReadAcks() {
  for (;;) {
    size_t n = 0;
    int err = 0;
    IoState st = link_->Read(0, reinterpret_cast<uint8_t*>(&ack_) + ack_got_, sizeof(Frame) - ack_got_, &n, &err);
    if (st == IoState::kAgain) return Status::Ok();
    if (st == IoState::kClosed) {
      if (acked_ == next_seq_) {
        Transition(ConnState::kPeerClosed, "receiver closed the connection");
        return Status::Ok();
      }
      return Fail(Code::kRemoteError, "peer " + link_->Describe() + " closed the connection with " +
                                          std::to_string(next_seq_ - acked_) + " message(s) unacknowledged");
    }
    if (st == IoState::kError) {
      return Fail(Code::kRemoteError, "receiving acks on " + link_->Describe() + ": " + strerror(err));
    }
    ack_got_ += n;
    if (ack_got_ < sizeof(Frame)) continue;
    ack_got_ = 0;
    if (!FrameValid(ack_) || TypeOf(ack_) != FrameType::kAck || ack_.conn != static_cast<uint32_t>(conn_id_) ||
        ack_.seq > next_seq_ || ack_.seq < acked_) {
      return Fail(Code::kRemoteError, "protocol error: bad ack from " + link_->Describe());
    }
    for (; acked_ < ack_.seq; ++acked_) msgs_[acked_ % RxTracker::kWindow].req->state = ReqState::kDone;
  }
}

Status SendComm::Progress() {
  if (state_ == ConnState::kFailed) return failure_;
  // Loop while something moved: a stream that drains picks up the next chunk right away.
  for (int pass = 0; pass < 64; ++pass) {
    bool progressed = false;
    for (int i = 0; i < static_cast<int>(tx_.size()); ++i) RR_CHECK(WriteStream(i, &progressed));
    if (!progressed) break;
  }
  if (acked_ < next_seq_ || state_ == ConnState::kActive) RR_CHECK(ReadAcks());
  return Status::Ok();
}

Status SendComm::Test(Request* r, int* done, int* size) {
  *done = 0;
  if (r->state != ReqState::kDone) {
    Status st = Progress();
    if (!st.ok()) return st;
  }
  if (r->state != ReqState::kDone) return Status::Ok();
  *done = 1;
  if (size != nullptr) *size = static_cast<int>(r->size);
  pool_.Put(r);
  return Status::Ok();
}

}  // namespace rr::net
