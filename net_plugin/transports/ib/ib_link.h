// rerail — one end of one IB link: S RC QPs ("streams", core.h) on one rail, their completion
// queues, the receive bounce buffers and the send staging buffers, with the per-stream counters the
// core's samples are made of. The drivers (ib_send_driver.h, ib_recv_driver.h) own one per link.
//
// Contract
//   * Create() makes the QPs in RESET with one send CQ and one receive CQ sized for every WR the link
//     can have outstanding (a flush completes all of them: the CQ never overruns). Receive buffers are
//     posted on the streams named in cfg.recv_streams (the receiver: all of them, for data; the sender:
//     stream 0, for control), cfg.recv_slots per stream of cfg.recv_bytes each, one MR.
//   * Connect(remote) = (RESET if needed) -> INIT -> RTR -> RTS on every QP (IbQp::Connect), then posts
//     every receive. Endpoints() are valid for the next Connect (fresh PSNs after a Reset).
//   * Fail() moves every QP to ERR: nothing it posted is executed any more, no remote write lands
//     through it, everything outstanding completes as a flush. Reset() returns the QPs to RESET (the
//     verbs drop outstanding WRs and their completions: every slot and counter starts over) and bumps
//     the generation, so a completion of the previous incarnation that was still queued is ignored.
//   * Receive credits (ib_wire.h): Connect(remote, peer_slots) starts each stream's credit at the
//     peer's receive count; Room() also requires a credit for the one SEND every frame has (keeping
//     the last for IbCredit records); Grant() adds the peer's reported re-posts; CreditDue() /
//     FillCredit() report this end's re-posts, CreditRoom() says whether the record may go.
//   * Posting: Room(stream, wrs) says whether the send queue takes `wrs` more; every send WR is
//     signalled, so each completes once (success, error or flush) and frees its slot, and its bytes
//     count as acknowledged (success) or gone (otherwise). StageAlloc() lends a registered buffer for a
//     SEND with payload; it returns to the pool when that SEND completes.
//   * Poll() polls both CQs once (non-blocking) and reports completions of the current generation;
//     a receive's buffer stays the caller's until Repost() (or the next Reset()).
//   * Thread-safety: none; one progress thread per link (NCCL's).
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "core/core.h"
#include "transports/ib/ib_device.h"
#include "transports/ib/ib_qp.h"
#include "transports/ib/ib_wire.h"

namespace rr::ib {

struct IbLinkConfig {
  int streams = 2;            // QPs per link (1..net::kMaxStreams)
  int recv_streams = 0;       // receives are posted on streams [0, recv_streams)
  int recv_slots = 32;        // receives per such stream
  uint32_t recv_bytes = 64;   // bytes per receive
  int stage_slots = 16;       // send staging buffers per link (SEND with payload)
  uint32_t stage_bytes = 64;  // bytes per staging buffer
  QpOptions qp;               // queue depths (max_send per QP), timeout, retry counts
};

class IbLink {
 public:
  // One completion as the drivers see it.
  struct Event {
    enum Kind : uint8_t { kSendOk, kSendError, kRecv, kRecvError } kind;
    int stream = 0;
    int status = 0;                 // vx::WcStatus (errors)
    const uint8_t* data = nullptr;  // kRecv: the received bytes (valid until Repost(stream, slot))
    uint32_t len = 0;               // kRecv: byte_len
    uint32_t slot = 0;              // kRecv: pass to Repost
  };

  static Status Create(IbDevice& dev, const IbLinkConfig& cfg, std::unique_ptr<IbLink>* out);
  ~IbLink();

  int streams() const { return cfg_.streams; }
  IbDevice& dev() const { return dev_; }
  bool connected() const { return connected_; }
  // RESET unless the QPs are there already: Endpoints() then hold the PSNs the next Connect uses.
  Status Prepare();
  void Endpoints(QpEndpoint* out) const;  // cfg.streams entries
  Status Connect(const QpEndpoint* remote, uint32_t peer_slots);
  uint32_t recv_slots() const { return static_cast<uint32_t>(cfg_.recv_slots); }
  Status Reset();
  void Fail();

  // ---- sending (every WR signalled)
  bool Room(int stream, int wrs) const;
  int PickStream(int wrs);  // a stream with room for `wrs`, rotating; -1 when none
  Status PostWrite(int stream, const void* laddr, uint32_t len, uint32_t lkey, uint64_t raddr, uint32_t rkey);
  Status PostInline(int stream, const void* data, uint32_t len);
  uint8_t* StageAlloc(int* slot);  // null when every staging buffer is in use
  void StageFree(int slot);        // an allocated buffer that was not posted
  Status PostStaged(int stream, int slot, uint32_t len);
  int stage_free() const { return static_cast<int>(stage_free_.size()); }
  // Some send WR has not completed yet (a QP destroyed now may never execute it).
  bool SendsPending() const {
    for (const Stream& s : s_) {
      if (!s.wrs.empty()) return true;
    }
    return false;
  }

  // ---- receive credits
  void Grant(const IbCredit& c);
  bool CreditDue() const;
  bool CreditRoom() const;  // stream 0 may take an IbCredit record now
  void FillCredit(IbCredit* c);

  // ---- completions and receives
  Status Poll(std::vector<Event>* out);
  Status Repost(int stream, uint32_t slot);

  // Per stream: acked = bytes of successful send completions, in_flight = posted - completed.
  net::LinkSample Sample() const;
  std::string WcName(int status) const { return WcStatusName(dev_.lib(), status); }

 private:
  struct WrRecord {
    uint64_t id;
    uint32_t bytes;
    int stage;  // -1: none
  };
  struct Stream {
    std::unique_ptr<IbQp> qp;
    std::deque<WrRecord> wrs;  // posted, not completed (completions come in posting order)
    uint64_t next_id = 0;
    uint64_t posted_bytes = 0, done_bytes = 0, acked_bytes = 0;
    uint64_t sends = 0;          // SENDs posted (each consumes one of the peer's receives)
    uint64_t credit = 0;         // receives the peer has posted for us: initial + reported re-posts
    uint16_t granted = 0;        // the peer's last reported count (mod 2^16)
    uint64_t reposted = 0;       // our receives re-posted since connect
    uint64_t reported = 0;       // of which reported to the peer
  };
  IbLink(IbDevice& dev, const IbLinkConfig& cfg) : dev_(dev), cfg_(cfg) {}
  uint64_t SendId(int stream, uint64_t n) const;
  uint64_t RecvId(int stream, uint32_t slot) const;
  Status PostRecvSlot(int stream, uint32_t slot);
  Status Track(int stream, uint64_t id, uint32_t bytes, int stage, Status posted);
  void Complete(int stream, uint64_t id, bool ok);
  void ClearAccounting();
  uint8_t* RecvBuf(int stream, uint32_t slot) { return recv_mem_.data() + (static_cast<size_t>(stream) * cfg_.recv_slots + slot) * cfg_.recv_bytes; }

  IbDevice& dev_;
  IbLinkConfig cfg_;
  std::unique_ptr<IbCq> scq_, rcq_;
  std::vector<Stream> s_;
  std::vector<uint8_t> recv_mem_, stage_mem_;
  std::unique_ptr<IbMr> recv_mr_, stage_mr_;
  std::vector<int> stage_free_;
  uint16_t gen_ = 1;
  bool connected_ = false;
  int rotate_ = 0;
};

}  // namespace rr::ib
