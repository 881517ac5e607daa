// rerail — resilient connections: the send and receive sides of one NCCL network connection.
//
// A SendComm/RecvComm owns one Link per usable rail to the peer (link 0 = the NCCL device's rail, the
// primary; the others are standby links connected eagerly) and runs rerail's wire protocol (wire.h):
//   * isend assigns the next message sequence number. Chunks of RERAIL_CHUNK_SIZE are written straight
//     from NCCL's buffer (header + payload in one sendmsg, no copy) on whichever stream of an eligible
//     link can take bytes (policy: stripe = every healthy link, failover = the primary while healthy).
//     The send completes when the receiver's cumulative ack covers it, so NCCL's buffer is also the
//     retransmit buffer: each link remembers the chunks it carried until they are acknowledged.
//     Eager sends (size <= eager_max while the comm's eager pool has room) are copied into the pool
//     and complete once every chunk was written; the copy is the retransmit buffer until the ack.
//   * the receiver reads each chunk header, then the payload straight into the posted buffer at its
//     offset (RxTracker decides place / drop / wait), completes a receive when every byte is placed,
//     and acks in-order completion on the reverse direction of a live link: at once after a normal
//     message; after an eager one in the next test() on the comm that finds nothing to read (so a
//     reply goes first and the ack waits off the critical path), with the next normal ack, or at once
//     when 16 eager messages / half the eager pool are unacknowledged. Heartbeats carry it too. Every RERAIL_HEARTBEAT_MS
//     it also sends a heartbeat (carrying the same cumulative ack) on every live link.
//   * a link fails on a socket error, a link-down event for its local rail (either side: the receiver
//     drops the link and tells the sender over a survivor, so the sender re-sends within
//     milliseconds), a peer notice, or a stall: the transport reports bytes in flight whose
//     acknowledgement has not advanced for RERAIL_STALL_MS (black hole; checked on both sides, the
//     receiver's heartbeats are its bytes in flight). Only the peer's kernel is judged, never its
//     application: NCCL leaves comms unpolled for seconds, and a receiver that does not post closes
//     its window (nothing in flight). The last live link is never failed for a stall; no working link
//     for RERAIL_GIVEUP_MS fails the connection. Its epoch is
//     bumped, its unacknowledged chunks are re-queued on the survivors, the peer is told over a
//     surviving link, and one WARN names rail, peer, reason and the bytes re-sent. The sender re-probes
//     the rail with capped exponential back-off (RERAIL_FAILBACK_MIN_MS..MAX_MS, never giving up) and
//     re-admits it when the peer answers on it.
//   * the connection fails (test() returns kRemoteError) only when every link was closed by the peer
//     at once (the peer process closed or died) or when no link has worked (usable and not stalled)
//     for RERAIL_GIVEUP_MS.
//
// Threading: all I/O is driven from isend/irecv/test on the caller's thread (NCCL's progress thread),
// including heartbeats, the stall watchdog and reconnection; a comm is never used by two threads at
// once, so the data path takes no lock. Rail up/down events arrive through RailSignals (atomics
// written by the link-monitor thread, read here without a lock).
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "link_state.h"
#include "listen_hub.h"
#include "request.h"
#include "rx_tracker.h"
#include "scheduler.h"
#include "transport.h"
#include "wire.h"

namespace rr::net {

constexpr uint32_t kSendCommMagic = 0x53434f4du;  // "MOCS"
constexpr uint32_t kRecvCommMagic = 0x52434f4du;
constexpr uint32_t kListenCommMagic = 0x4c434f4du;

// Link events per local device, published by the link monitor (any thread) and polled by comms.
struct RailSignals {
  std::atomic<uint64_t> gen[kMaxRails] = {};  // bumped on every up/down change of the rail
  std::atomic<bool> down[kMaxRails] = {};     // latest state: true while the interface cannot carry traffic
};

enum class Policy : uint8_t {
  kStripe,    // chunks go to every healthy link
  kFailover,  // primary link only while it is healthy and not degraded; every healthy survivor otherwise
};

}  // namespace rr::net
namespace rr::rails {
class BoardWriter;
}
namespace rr::prof {
class NetEventEmitter;
}
namespace rr::net {

struct ConnConfig {
  Transport* transport = nullptr;
  const RailSignals* rails = nullptr;
  RailLoad* loads = nullptr;  // per local device, shared by the context's send comms (null: private)
  rails::BoardWriter* board = nullptr;  // rail-health board (slot = local device index); may be null
  prof::NetEventEmitter* prof = nullptr;  // NCCL's profiler callback (plugin.h); null = no events
  int dev = -1;                           // NCCL device of a listen/recv comm (its IO spans' rail)
  uint32_t chunk = 128 * 1024;
  size_t eager_max = 16384;         // sends up to this size are eager (copied; complete once written); 0: never
  size_t eager_pool = 1 << 20;      // bytes of eager copies a send comm may hold unacknowledged
  int streams = 2;
  Policy policy = Policy::kStripe;
  uint64_t stall_ns = 1'000'000'000;
  uint64_t heartbeat_ns = 200'000'000;
  uint64_t giveup_ns = 30'000'000'000;
  uint64_t connect_grace_ns = 1'000'000'000;  // how long connect waits for the primary before settling
  uint64_t backoff_min_ms = 100;
  uint64_t backoff_max_ms = 5000;
};

inline uint64_t RailGen(const RailSignals* s, int rail) {
  return s != nullptr && rail >= 0 && rail < kMaxRails ? s->gen[rail].load(std::memory_order_acquire) : 0;
}

// What the link monitor reported for `rail` since generation *seen (which it updates).
enum class RailChange : uint8_t { kNone, kDown, kUp };
inline RailChange PollRail(const RailSignals* s, int rail, uint64_t* seen) {
  uint64_t gen = RailGen(s, rail);
  if (gen == *seen) return RailChange::kNone;
  *seen = gen;
  return s->down[rail].load(std::memory_order_acquire) ? RailChange::kDown : RailChange::kUp;
}

// Why a link failed, from its reason text: names the board event and the profiler's short reason.
enum class FailCause : uint8_t { kStall, kLinkDown, kOther };
inline FailCause CauseOf(const std::string& why) {
  if (why.rfind("stall", 0) == 0) return FailCause::kStall;
  return why == "link-down event" ? FailCause::kLinkDown : FailCause::kOther;
}
inline const char* ShortReason(const std::string& why) {
  switch (CauseOf(why)) {
    case FailCause::kStall: return "stall";
    case FailCause::kLinkDown: return "link-down";
    case FailCause::kOther: break;
  }
  return why.c_str();
}

// How often a link's transport-level stall age is sampled: an eighth of RERAIL_STALL_MS (at least
// 1 ms), so a black hole is caught within stall_ns * 9 / 8.
inline uint64_t StallCheckNs(const ConnConfig& c) { return c.stall_ns / 8 > 1000000 ? c.stall_ns / 8 : 1000000; }

// The transport-level stall age of one link (either side), sampled every StallCheckNs.
struct StallWatch {
  uint64_t next_ns = 0;
  uint32_t ms = 0;  // stall age at the last sample
  // Takes a sample when one is due; true when it did.
  bool Sample(Link& link, uint64_t now, const ConnConfig& c) {
    if (now < next_ns) return false;
    next_ns = now + StallCheckNs(c);
    ms = link.StallMs(now);
    return true;
  }
  bool stalled(const ConnConfig& c) const { return ms * 1000000ull > c.stall_ns; }
};

// Connection life cycle (logged on every change).
enum class ConnState : uint8_t {
  kActive,      // at least one link works or is being recovered
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

 protected:
  void Transition(ConnState to, const std::string& why);
  Status Fail(Code code, const std::string& why);
  // isend/irecv once the connection ended (kPeerClosed, kFailed): hands out a request that is never
  // queued (seq kSeqPostedAfterEnd); test() on it returns EndedStatus(what), i.e. failure_ (kFailed)
  // or a remote error. NULL request (retry) when the pool is exhausted.
  static constexpr uint64_t kSeqPostedAfterEnd = UINT64_MAX;
  Status PostAfterEnd(bool is_send, size_t size, Request** req);
  Status EndedStatus(const char* what);
  // The give-up clock: runs while no link works (usable and not stalled); true once it has run for
  // longer than giveup_ns.
  bool GiveUpDue(int working, uint64_t now, uint64_t giveup_ns);
  // Profiler IO span of one request (no-op without an emitter or with a NULL phandle).
  void ProfStart(prof::NetEventEmitter* e, Request* r, void* phandle, int rail);
  void ProfStop(prof::NetEventEmitter* e, Request* r);

  uint32_t magic_;
  RequestPool pool_;
  ConnState state_ = ConnState::kActive;
  Status failure_;  // set in kFailed
  uint64_t conn_id_ = 0;
  uint64_t no_link_since_ns_ = 0;  // 0 while some link works
};

// Where one link of a send comm goes.
struct LinkPlan {
  int local_dev = 0;
  int remote_rail = 0;
  sock::Addr remote;
};

class SendComm final : public Comm {
 public:
  SendComm(const ConnConfig& cfg, const Nonce& nonce, uint64_t conn_id, std::vector<LinkPlan> plan);
  // Closing: completed eager sends may still be unacknowledged (only the pool holds them); drives
  // I/O for up to kEagerLingerMs until they are acked or no link is left, so close loses nothing.
  ~SendComm() override;
  // Connection setup (NCCL's connect polling): *ready once the comm may carry data.
  Status PollConnect(bool* ready);
  // Posts a send; *req = nullptr means "retry later" (window or pool full).
  // phandle: NCCL's profiler step handle (may be NULL).
  Status Isend(const void* data, size_t size, void* phandle, Request** req);
  Status Test(Request* r, int* done, int* size) override;

 private:
  struct ChunkRef {
    uint64_t seq;
    uint64_t off;
    uint32_t len;
  };
  struct TxMsg {
    uint64_t seq = 0;
    const uint8_t* data = nullptr;
    size_t size = 0;
    size_t next_off = 0;      // next fresh byte to schedule
    bool scheduled = false;   // every chunk handed out once
    Request* req = nullptr;   // null once reported done (eager) so the ack cannot touch a reused request
    bool eager = false;       // data points into copy; req completes when `written` reaches size
    size_t written = 0;       // eager: payload bytes of chunks fully written (re-sends may count twice)
    std::vector<uint8_t> copy;
  };
  struct TxStream {
    bool busy = false;
    Frame hdr{};
    const uint8_t* payload = nullptr;
    size_t len = 0;
    size_t done = 0;  // bytes of hdr+payload written
  };
  struct TxLink {
    LinkPlan plan;
    LinkFsm fsm{""};
    uint32_t epoch = 0;
    std::unique_ptr<Link> link;
    std::unique_ptr<Connector> connector;
    std::vector<TxStream> tx;
    std::deque<ChunkRef> inflight;  // chunks handed to this link, not yet known acknowledged
    Frame in{};
    size_t in_got = 0;
    uint64_t last_heard_ns = 0;
    uint64_t retry_at_ns = 0;
    uint64_t backoff_ms = 0;
    uint64_t rail_gen = 0;
    uint64_t bytes = 0;
    StallWatch stall;
    uint64_t acked_base = UINT64_MAX;  // the transport's acked-bytes counter at the last report
  };

  bool Eligible(const TxLink& l) const;
  bool NextItem(TxLink& l, TxStream* s);
  Status Progress();
  Status WriteStream(TxLink& l, int i, bool* progressed);
  void OnChunkWritten(const Frame& f);
  Status ReadControl(TxLink& l);
  void OnAck(uint64_t ack, uint64_t credit);
  void ForgetBacklogIfIdle();
  void FailLink(TxLink& l, const std::string& why, bool peer_closed);
  void PostFailover(const TxLink& l, const std::string& why, size_t bytes, size_t chunks, uint64_t now);
  void PostRetransmit(int to_link);
  void StartConnect(TxLink& l);
  Status PollConnector(TxLink& l);
  Status Watchdog(uint64_t now);
  void ReportDelivered(uint64_t now);
  void CheckPrimarySpeed(uint64_t now);
  int LiveLinks() const;

  ConnConfig cfg_;
  Nonce nonce_;
  std::vector<TxLink> links_;
  TxMsg msgs_[RxTracker::kWindow];
  Scheduler sched_;
  std::vector<bool> eligible_;    // scratch for the scheduler
  int64_t pending_bytes_ = 0;     // bytes of posted messages (and re-sends) not handed to a link yet
  std::deque<ChunkRef> requeue_;  // chunks of failed links waiting to be re-sent
  std::deque<Frame> notices_;     // control frames for the peer (link-down notices)
  uint64_t next_seq_ = 0;
  uint64_t sched_seq_ = 0;
  uint64_t acked_ = 0;
  uint64_t credit_ = 0;            // receives the peer has posted: only messages below it are sent
  size_t eager_bytes_ = 0;         // bytes held in eager copies (bounded by cfg_.eager_pool)
  uint64_t setup_start_ns_ = 0;
  uint64_t next_board_ns_ = 0;
  uint64_t next_report_ns_ = 0;
  bool primary_degraded_ = false;  // failover policy: the primary is measurably slower than a survivor
  uint64_t degraded_since_ns_ = 0;  // when the primary was first seen degraded (0: not)
  static constexpr uint64_t kDegradeAfterNs = 500'000'000;
  int peer_closed_links_ = 0;
  // Re-sent chunks since the requeue last drained (one RETRANSMIT event per drain).
  uint64_t resent_chunks_ = 0;
  uint64_t resent_bytes_ = 0;
  int last_failed_rail_ = -1;
};

class RecvComm final : public Comm {
 public:
  RecvComm(const ConnConfig& cfg, std::unique_ptr<Listener> listener, std::unique_ptr<Link> first);
  // Posts one receive of capacity `cap`; *req = nullptr means "retry later".
  // phandle: NCCL's profiler step handle (may be NULL).
  Status Irecv(void* data, size_t cap, void* phandle, Request** req);
  Status Test(Request* r, int* done, int* size) override;

 private:
  enum class Phase : uint8_t { kHeader, kPayload, kDiscard, kStash };
  // A chunk of an eager message that arrived before its receive was posted. The sender writes eager
  // chunks without waiting for the credit (wire.h), so the receiver must always absorb them: the
  // copy is placed when the receive is posted. Bounded by the sender's eager pool (RERAIL_EAGER_POOL).
  struct Stashed {
    Frame hdr{};
    std::vector<uint8_t> bytes;
    int link = -1;          // link whose stream is filling it (-1 once complete)
  };
  struct RxStream {
    Phase phase = Phase::kHeader;
    Frame hdr{};
    size_t hdr_got = 0;
    uint8_t* dst = nullptr;
    size_t remaining = 0;
    RxTracker::Slot* slot = nullptr;
    Stashed* stash = nullptr;  // kStash: the copy being filled
  };
  struct RxLink {
    std::unique_ptr<Link> link;  // null while down
    uint32_t epoch = 0;
    std::vector<RxStream> rx;
    std::deque<Frame> out;       // control frames for the sender (acks, heartbeats, notices)
    size_t out_done = 0;         // bytes of out.front() written
    uint64_t last_hb_ns = 0;
    StallWatch stall;
    uint64_t rail_gen = 0;  // RailSignals generation of its local rail when last looked at
  };

  void Attach(std::unique_ptr<Link> link);
  Status Progress(bool idle_acks);  // idle_acks: a call that reads nothing sends deferred acks
  Status ReadStream(RxLink& l, int i, bool* progressed);
  Status OnHeader(RxLink& l, RxStream& s, bool* stalled);
  void OnPlaced(RxStream& s);
  void Complete(RxTracker::Slot* slot, const Frame& f);
  void DrainStash();
  void DropLink(int idx, const std::string& why, bool peer_closed);
  Status FlushControl(uint64_t now, bool flush_acks);
  Status PollListener(uint64_t now);
  void CheckStalls(uint64_t now);
  void CheckRailEvents();
  int LiveLinks() const;

  ConnConfig cfg_;
  std::unique_ptr<Listener> listener_;  // kept for re-connections of failed rails
  RxTracker tracker_;
  std::vector<RxLink> links_;
  std::vector<uint8_t> scratch_;  // sink for dropped payloads
  std::vector<std::unique_ptr<Stashed>> stash_;  // eager chunks waiting for their receive
  size_t stash_bytes_ = 0;
  uint64_t ack_sent_ = 0;
  uint64_t credit_sent_ = 0;    // receives posted as last announced to the sender
  bool ack_urgent_ = false;     // a normal message completed since the last ack: ack in this call
  uint32_t eager_unacked_ = 0;  // eager messages completed since the last ack
  size_t eager_unacked_bytes_ = 0;
  uint64_t next_listen_poll_ns_ = 0;
  std::string peer_;
};

class ListenComm {
 public:
  ListenComm(const ConnConfig& cfg, std::unique_ptr<Listener> l)
      : magic_(kListenCommMagic), cfg_(cfg), hub_(std::make_shared<ListenHub>(std::move(l))) {}
  ~ListenComm() { hub_->StopAccepting(); }
  ListenComm(const ListenComm&) = delete;
  ListenComm& operator=(const ListenComm&) = delete;
  uint32_t magic() const { return magic_; }
  // Polls for the next connection made with this comm's handle; *out stays null until its first link
  // arrived. May be called again after it returned a comm: each call accepts one more connection, as
  // NCCL's socket transport does (listen_hub.h). Each RecvComm keeps accepting re-connections of its
  // failed rails through the shared listener.
  Status Accept(std::unique_ptr<RecvComm>* out);

 private:
  uint32_t magic_;
  ConnConfig cfg_;
  std::shared_ptr<ListenHub> hub_;
};

}  // namespace rr::net
