// rerail — one reliable-connected queue pair (IbQp): the unit of an IB link's "stream" (core.h, RDMA).
//
// Contract
//   * Create() makes an RC QP in RESET on a device, with its send and receive completions on the given
//     CQs. Endpoint() is what the peer needs to connect to it (sent over the link's TCP bootstrap).
//   * Connect(remote) walks RESET -> INIT -> RTR -> RTS with the attribute masks NCCL's net_ib uses
//     (connect.cc): INIT {state, pkey 0, port, access REMOTE_WRITE|REMOTE_READ|LOCAL_WRITE}; RTR {state,
//     AV (RoCE: GRH with the remote GID, our GID index, hop limit 255; IB: remote LID), path MTU =
//     min of both ports, dest QPN, RQ PSN, max_dest_rd_atomic 1, min_rnr_timer 12}; RTS {state,
//     timeout, retry_cnt, rnr_retry, SQ PSN, max_rd_atomic 1}. A QP that failed (ERR) is re-used by
//     Reset() then Connect() again — the failback path — with a fresh local PSN.
//   * Posting never blocks: the send queue holds max_send WRs; a post beyond that (or on a QP in ERR)
//     is the provider's error, returned as System. Unsignalled WRs still occupy the queue until a later
//     signalled WR on the same QP completes (the caller signals at least every max_send/2 posts).
//   * ToError() moves the QP to ERR: every outstanding WR completes with WR_FLUSH_ERR and no remote
//     write can land through it afterwards (the receiver's guard before NCCL reuses a buffer).
//   * Thread-safety: none; one thread posts and polls (NCCL's progress thread).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "transports/ib/ib_device.h"

namespace rr::ib {

// What one side tells the other to connect a QP (fixed layout: it travels in the link handshake).
struct QpEndpoint {
  vx::Gid gid{};          // RoCE: the GID at the sender's chosen index; IB: may be zero
  uint32_t qpn = 0;
  uint32_t psn = 0;       // first PSN the owner will send with
  uint16_t lid = 0;       // IB only
  uint8_t mtu = 0;        // enum ibv_mtu of the owner's port
  uint8_t link_layer = 0; // vx::LinkLayer
  uint8_t reserved[4] = {};
};
static_assert(sizeof(QpEndpoint) == 32, "QpEndpoint travels on the wire");

struct QpOptions {
  uint32_t max_send = 128;   // send WRs in flight (NCCL: 2 x MAX_REQUESTS x NCCL_NET_IB_MAX_RECVS)
  uint32_t max_recv = 128;   // receives posted for WRITE_WITH_IMM notifications
  uint8_t timeout = 14;      // RERAIL_IB_TIMEOUT: 4.096 us x 2^timeout per try (14: 67 ms)
  uint8_t retry_cnt = 3;     // RERAIL_IB_RETRY_CNT
  uint8_t rnr_retry = 7;     // 7 = retry forever on receiver-not-ready
  uint8_t traffic_class = 0;
  // timeout and retry_cnt from RERAIL_IB_TIMEOUT / RERAIL_IB_RETRY_CNT (Params must be loaded).
  static QpOptions FromParams();
};

// How long an RC write on a dead path takes to end in RETRY_EXC_ERR: 4.096 us x 2^timeout x
// (retry_cnt + 1), in ms (the IB spec's minimum; providers may wait up to about twice that).
double DeadPathMs(uint8_t timeout, uint8_t retry_cnt);

class IbQp {
 public:
  static Status Create(IbDevice& dev, IbCq& send_cq, IbCq& recv_cq, const QpOptions& opt, std::unique_ptr<IbQp>* out);
  ~IbQp();
  IbQp(const IbQp&) = delete;
  IbQp& operator=(const IbQp&) = delete;

  QpEndpoint Endpoint() const;
  uint32_t qpn() const;
  Status Connect(const QpEndpoint& remote);
  Status Reset();    // any state -> RESET (outstanding WRs are dropped); a new PSN for the next Connect
  Status ToError();  // any state -> ERR (outstanding WRs flush)
  // The provider's view of the QP state (ibv_query_qp); kQpsUnknown when the query fails.
  int QueryState() const;

  // RDMA WRITE of [laddr, laddr+len) (registered under lkey) to raddr/rkey. with_imm: WRITE_WITH_IMM
  // consuming one posted receive at the peer, whose completion carries `imm` (host order here).
  // inline_data: copied at post time (len <= the device's max_inline), no lkey needed.
  Status PostWrite(uint64_t wr_id, const void* laddr, uint32_t len, uint32_t lkey, uint64_t raddr, uint32_t rkey,
                   bool with_imm, uint32_t imm, bool signaled, bool inline_data = false);
  // RDMA READ of remote [raddr, raddr+len) into local [laddr, ...) (always signalled).
  Status PostRead(uint64_t wr_id, void* laddr, uint32_t len, uint32_t lkey, uint64_t raddr, uint32_t rkey);
  // A zero-length receive for one WRITE_WITH_IMM notification (the QP must be connected: the verbs
  // refuse receives in RESET).
  Status PostRecv(uint64_t wr_id);
  // SEND of [laddr, laddr+len) into the peer's next posted receive (always signalled). inline_data:
  // copied at post time (len <= the device's max_inline), lkey unused.
  Status PostSend(uint64_t wr_id, const void* laddr, uint32_t len, uint32_t lkey, bool inline_data);
  // A receive of up to `len` bytes into [addr, addr+len) (registered under lkey) for one SEND.
  Status PostRecv(uint64_t wr_id, void* addr, uint32_t len, uint32_t lkey);

 private:
  IbQp(IbDevice& dev, const QpOptions& opt) : dev_(dev), opt_(opt) {}
  Status Modify(vx::QpAttr* attr, int mask, const char* what);
  Status Post(vx::SendWr* wr);

  IbDevice& dev_;
  QpOptions opt_;
  vx::Qp* qp_ = nullptr;
  uint32_t psn_ = 0;
};

}  // namespace rr::ib
