// rerail — resilient connections: the send and receive sides of one NCCL network connection.
//
// A SendComm/RecvComm owns the Links of its connection (one per rail; today one, on the NCCL device's
// rail) and runs rerail's wire protocol over their streams (wire.h):
//   * isend assigns the next message sequence number; chunks of RERAIL_CHUNK_SIZE are written straight
//     from NCCL's buffer (header + payload in one sendmsg, no copy). The buffer stays NCCL's until the
//     send completes, which happens when the receiver's cumulative ack covers the message — so the
//     buffer is also the retransmit buffer.
//   * the receiver reads each chunk header, then the payload straight into the posted buffer at its
//     offset (RxTracker decides place/drop/wait), completes a receive when every byte is placed and
//     acks in-order completion on stream 0's reverse direction.
//
// Threading: all I/O is driven from isend/irecv/test on the caller's thread (NCCL's progress thread);
// a comm is never used by two threads at once, so the data path takes no lock. Construction (on the
// proxy service thread) hands a fully built comm to NCCL, whose own synchronisation publishes it.
//
// Errors: a dead stream fails the connection (issue 2 has a single link). Requests already complete
// still report done; pending and later requests report kRemoteError (peer closed / reset) or
// kSystemError (local socket failure). The first failure is logged once as a WARN.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "request.h"
#include "rx_tracker.h"
#include "transport.h"
#include "wire.h"

namespace rr::net {

constexpr uint32_t kSendCommMagic = 0x53434f4du;  // "MOCS"
constexpr uint32_t kRecvCommMagic = 0x52434f4du;
constexpr uint32_t kListenCommMagic = 0x4c434f4du;

// Connection life cycle (logged on every change).
enum class ConnState : uint8_t {
  kActive,      // links up, data flowing
  kPeerClosed,  // the peer closed its side in order; fine unless data is still expected
  kFailed,      // unrecoverable: every pending and future request errors
};
const char* ConnStateName(ConnState s);

class Comm {
 public:
  explicit Comm(uint32_t magic) : magic_(magic), pool_(this) {}
  virtual ~Comm() = default;
  uint32_t magic() const { return magic_; }
  // Drives I/O, then reports whether `r` is done (and its size). Frees `r` when done.
  virtual Status Test(Request* r, int* done, int* size) = 0;
  RequestPool& pool() { return pool_; }
  ConnState state() const { return state_; }
  const std::string& peer() const { return peer_; }

 protected:
  // Applies a state change and logs it; the first failure also logs a WARN with `why`.
  void Transition(ConnState to, const std::string& why);

  uint32_t magic_;
  RequestPool pool_;
  ConnState state_ = ConnState::kActive;
  Status failure_;         // set in kFailed
  std::string peer_;       // for messages
  uint64_t conn_id_ = 0;
};

class SendComm final : public Comm {
 public:
  SendComm(std::unique_ptr<Link> link, uint64_t conn_id, uint32_t chunk);
  // Posts a send; *req = nullptr means "retry later" (window or pool full).
  Status Isend(const void* data, size_t size, Request** req);
  Status Test(Request* r, int* done, int* size) override;

 private:
  struct TxMsg {
    uint64_t seq = 0;
    const uint8_t* data = nullptr;
    size_t size = 0;
    size_t next_off = 0;   // next byte to schedule
    bool scheduled = false;  // every chunk handed to a stream
    Request* req = nullptr;
  };
  struct TxStream {
    bool busy = false;
    Frame hdr{};
    const uint8_t* payload = nullptr;
    size_t len = 0;   // payload bytes
    size_t done = 0;  // bytes of hdr+payload written
  };

  bool NextChunk(TxStream* s);
  Status Progress();
  Status WriteStream(int i, bool* progressed);
  Status ReadAcks();
  Status Fail(Code code, const std::string& why);

  std::unique_ptr<Link> link_;
  uint32_t chunk_;
  TxMsg msgs_[RxTracker::kWindow];
  std::vector<TxStream> tx_;
  uint64_t next_seq_ = 0;   // seq of the next isend
  uint64_t sched_seq_ = 0;  // first message with chunks not yet handed to a stream
  uint64_t acked_ = 0;      // every seq < acked_ is acknowledged
  Frame ack_{};
  size_t ack_got_ = 0;
};

class RecvComm final : public Comm {
 public:
  RecvComm(std::unique_ptr<Link> link);
  // Posts one receive of capacity `cap`; *req = nullptr means "retry later".
  Status Irecv(void* data, size_t cap, Request** req);
  Status Test(Request* r, int* done, int* size) override;

 private:
  enum class Phase : uint8_t { kHeader, kPayload, kDiscard };
  struct RxStream {
    Phase phase = Phase::kHeader;
    Frame hdr{};
    size_t hdr_got = 0;
    uint8_t* dst = nullptr;
    size_t remaining = 0;
    RxTracker::Slot* slot = nullptr;
  };

  Status Progress();
  Status ReadStream(int i, bool* progressed);
  Status OnHeader(RxStream& s, bool* stalled);
  void OnPlaced(RxStream& s);
  Status SendAck();
  Status Fail(Code code, const std::string& why);

  std::unique_ptr<Link> link_;
  RxTracker tracker_;
  std::vector<RxStream> rx_;
  std::vector<uint8_t> scratch_;  // sink for dropped payloads
  uint64_t ack_sent_ = 0;         // cumulative ack value last queued
  Frame ack_out_{};
  size_t ack_out_done_ = sizeof(Frame);  // bytes of ack_out_ written; == size when idle
};

class ListenComm {
 public:
  ListenComm(std::unique_ptr<Listener> l, int dev) : magic_(kListenCommMagic), listener_(std::move(l)), dev_(dev) {}
  uint32_t magic() const { return magic_; }
  // Polls for the connection; *out stays null until one arrived.
  Status Accept(std::unique_ptr<RecvComm>* out);

 private:
  uint32_t magic_;
  std::unique_ptr<Listener> listener_;
  int dev_;
};

}  // namespace rr::net
