// rerail — resilient connections: the send and receive sides of one NCCL network connection.
//
// The protocol lives in the sans-I/O core (core/core.h: SendCore, RecvCore); SendComm and RecvComm
// are its TCP drivers: they own the transport objects (links, connectors, the listener), move bytes
// between sockets and NCCL's buffers (zero copy: one sendmsg of header + payload per chunk, payloads
// read straight into the posted buffer), read the clock, and translate the core's observer calls
// into the rail-health board and profiler events. What follows describes the protocol as a whole.
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
//     message; after eager ones (and a new credit while the sender sends eager messages, which need
//     none) in the first test() that finds nothing to read 1 ms after the first of them (a control
//     frame per message would cost a send and a receive each on a small-message ping-pong), with the
//     next normal ack, when the comm closes, or at once when 16 eager messages / half the eager pool
//     are unacknowledged or the sender asks for the credit (core.h, "Acks and credits"). Heartbeats
//     carry it too. Every RERAIL_HEARTBEAT_MS
//     it also sends a heartbeat (carrying the same cumulative ack) on every live link; the sender
//     does the same while a send waits (bytes in flight for its own stall watchdog).
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

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/core.h"
#include "duplex.h"
#include "idle_sends.h"
#include "listen_hub.h"
#include "rerail/clock.h"
#include "request.h"
#include "staging/stager.h"
#include "transport.h"

namespace rr::net {

// A stream that returned no bytes for kColdNs is cold: test() reads it at most every kColdReadNs
// instead of on every call. Small messages all take the first free stream (stream 0 of the first
// link), so a comm with L links of S streams waiting for its next message would otherwise pay L x S
// empty reads per test() (~0.5 us each here) where one does: on a ping-pong that is the time to
// notice the next message. A stream that starts carrying data again waits at most kColdReadNs. The
// same holds for a send comm's own link-0 control stream once its acks ride a shared socket
// (RERAIL_TCP_DUPLEX): only heartbeats and notices come there.
inline constexpr uint64_t kColdNs = 1'000'000;
inline constexpr uint64_t kColdReadNs = 10'000;

constexpr uint32_t kSendCommMagic = 0x53434f4du;  // "MOCS"
constexpr uint32_t kRecvCommMagic = 0x52434f4du;
constexpr uint32_t kListenCommMagic = 0x4c434f4du;
// The comms of RERAIL_TRANSPORT=ib (ib_comm.h); the plugin dispatches on these.
constexpr uint32_t kIbSendCommMagic = 0x53434249u;    // "IBCS"
constexpr uint32_t kIbRecvCommMagic = 0x52434249u;    // "IBCR"
constexpr uint32_t kIbListenCommMagic = 0x4c434249u;  // "IBCL"

// Link events per local device, published by the link monitor (any thread) and polled by comms.
struct RailSignals {
  std::atomic<uint64_t> gen[kMaxRails] = {};  // bumped on every up/down change of the rail
  std::atomic<bool> down[kMaxRails] = {};     // latest state: true while the interface cannot carry traffic
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
  int max_recvs = 1;                // RERAIL_MAX_RECVS: > 1 = send comms match tags (grouped receives)
  int streams = 2;
  bool duplex = false;              // RERAIL_TCP_DUPLEX (duplex.h)
  Policy policy = Policy::kStripe;
  uint64_t stall_ns = 1'000'000'000;
  uint64_t heartbeat_ns = 200'000'000;
  uint64_t giveup_ns = 30'000'000'000;
  uint64_t connect_grace_ns = 1'000'000'000;  // how long connect waits for the primary before settling
  uint64_t backoff_min_ms = 100;
  uint64_t backoff_max_ms = 5000;
  uint64_t probation_ms = 2000;
  CoreConfig core() const;  // the protocol's part
};

// A read-ahead buffer's unconsumed bytes buf[*pos, *end) move to its front (a partial frame waits
// there for the rest; the next read appends).
inline void CompactReadAhead(uint8_t* buf, size_t* pos, size_t* end) {
  if (*pos == 0) return;
  std::memmove(buf, buf + *pos, *end - *pos);
  *end -= *pos;
  *pos = 0;
}

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

class Comm {
 public:
  explicit Comm(uint32_t magic) : magic_(magic), pool_(this) {}
  virtual ~Comm() = default;
  uint32_t magic() const { return magic_; }
  // The magic of a pointer NCCL handed over that may not be a Comm at all (misuse): read as raw bytes
  // at magic_'s place (right after the vtable pointer), never through a member access, which on a
  // foreign object is undefined behaviour (UBSan's vptr check caught RegMr doing that).
  static uint32_t PeekMagic(const void* p) {
    uint32_t m;
    std::memcpy(&m, static_cast<const char*>(p) + sizeof(void*), sizeof(m));
    return m;
  }
  // Drives I/O, then reports whether `r` is done (and its size). Frees `r` when done.
  virtual Status Test(Request* r, int* done, int* size) = 0;
  RequestPool& pool() { return pool_; }
  // IdleSends (idle_sends.h), from its thread: drives a listed comm once unless its owner is inside
  // it; returns when it wants the next pass (ns from now), 0 when it no longer needs one (the peer
  // acknowledged everything, the connection ended, or NCCL holds a request of it again).
  uint64_t TryIdleProgress();
  // When a progress pass last drove its I/O (NowNs; 0: never), whoever drove it: NCCL's isend/test,
  // a partner send comm, IdleSends. IdleSends reads it without a lock: a comm driven within its pass
  // period needs no idle pass yet.
  uint64_t DrivenNs() const { return driven_ns_.load(std::memory_order_relaxed); }

 protected:
  // A progress pass (drive_mu_ held) with the time it already read: stamps DrivenNs.
  void MarkDriven(uint64_t now) { driven_ns_.store(now, std::memory_order_relaxed); }
  // Marks the requests the core completed as done.
  void DrainCompletions(CoreBase& core);
  // isend/irecv once the connection ended (kPeerClosed, kFailed): hands out a request that is never
  // queued (seq kSeqPostedAfterEnd); test() on it returns the connection's error every time, as NCCL's
  // socket transport does (net_plugin/README.md, "Peer compatibility"). NULL request (retry) when the
  // pool is exhausted.
  static constexpr uint64_t kSeqPostedAfterEnd = UINT64_MAX;
  Status PostAfterEnd(bool is_send, size_t size, Request** req);
  static Status EndedStatus(const CoreBase& core, const char* what);
  // The core's status by value: Ok without copying the failure's (empty) message string.
  static Status StatusOf(const CoreBase& core) { return core.status().ok() ? Status::Ok() : core.status(); }
  // Profiler IO span of one request (no-op without an emitter or with a NULL phandle).
  void ProfStart(prof::NetEventEmitter* e, Request* r, void* phandle, int rail);
  void ProfStop(prof::NetEventEmitter* e, Request* r);
  // A send comm's core events on the rail-health board and the profiler, TCP and IB alike (dev: the
  // NCCL device of a link; to_dev -1: no survivor).
  void ReportFailover(const ConnConfig& cfg, int dev, int to_dev, const std::string& why, uint64_t bytes,
                      uint64_t chunks, uint64_t stall_ns, bool was_probing);
  void ReportRetransmit(const ConnConfig& cfg, int to_dev, uint64_t bytes, uint64_t chunks);
  void ReportFailback(const ConnConfig& cfg, int dev);
  // A link's state change (profiler RAIL_STATE event), send comms, TCP and IB alike.
  void ReportLinkState(const ConnConfig& cfg, int dev, LinkState from, LinkState to, const std::string& why);
  // A receive comm's core dropped a link (profiler FAILOVER event: nothing re-sent, no survivor named).
  void ReportRecvFailover(const ConnConfig& cfg, int dev, const std::string& why);
  // A closing send comm, TCP and IB alike: while a completed send (eager, 0-byte ones included) is
  // unacknowledged, only `core` can re-send it, so `progress` is driven until the ack, the connection's
  // end, or kEagerLingerMs (also with every link failed: re-probes may come back). Only a clean close
  // lingers: requests NCCL still holds mean an abort (ncclCommAbort), which must not wait out the
  // linger on every comm of a dead peer.
  void LingerUntilAcked(const SendCore& core, const std::function<Status()>& progress);
  // NCCL holds none of the comm's requests, so it will not drive it, while a send comm's peer still
  // owes acks, or a receive comm's sender may still wait for an ack (RecvCore::OwesIdleProgress).
  bool OwesIdleProgress(const SendCore& core) const {
    return pool_.in_use() == 0 && core.unacknowledged() && core.state() == ConnState::kActive;
  }
  bool OwesIdleProgress(const RecvCore& core) const { return pool_.in_use() == 0 && core.OwesIdleProgress(); }
  // After a test() reported a request done: lists the comm in IdleSends if it owes idle progress.
  template <class Core>
  void MaybeListIdle(const Core& core) {
    if (!idle_listed_ && OwesIdleProgress(core)) ListIdle();
  }
  void ListIdle();
  // Whether an idle comm still needs IdleSends, and drives it once if so (drive_mu_ held): the time
  // until it wants the next pass, 0 when it needs none.
  template <class Core>
  uint64_t IdleProgressWith(const Core& core, const std::function<Status()>& progress) {
    if (!OwesIdleProgress(core)) return 0;
    (void)progress();   // an error is the connection's: the next test() reports it
    return OwesIdleProgress(core) ? IdlePeriod(core) : 0;
  }
  static uint64_t IdlePeriod(const SendCore&) { return IdleSends::kPeriodNs; }
  // A lingering receive comm at RecvCore::IdlePeriodNs, not at every pass.
  static uint64_t IdlePeriod(const RecvCore& core) { return std::max(IdleSends::kPeriodNs, core.IdlePeriodNs()); }
  virtual uint64_t IdleProgress() { return 0; }

  uint32_t magic_;
  RequestPool pool_;
  uint64_t conn_id_ = 0;
  int last_failed_rail_ = -1;  // the rail of the last failover (its re-sends' profiler event)
  // Held by a send comm's isend and test, and by IdleSends' thread while it drives the comm.
  std::mutex drive_mu_;
  bool idle_listed_ = false;   // in IdleSends (drive_mu_)
  std::atomic<uint64_t> driven_ns_{0};
};

// Where one link of a send comm goes.
struct LinkPlan {
  int local_dev = 0;
  int remote_rail = 0;
  sock::Addr remote;
};

class SendComm final : public Comm, private CoreObserver {
 public:
  SendComm(const ConnConfig& cfg, const Nonce& nonce, uint64_t conn_id, std::vector<LinkPlan> plan);
  // Closing: LingerUntilAcked, so close loses nothing and never waits longer than kEagerLingerMs.
  ~SendComm() override;
  // Connection setup (NCCL's connect polling): *ready once the comm may carry data.
  Status PollConnect(bool* ready);
  // Posts a send; *req = nullptr means "retry later" (window or pool full; grouped mode: no announced
  // receive with this tag in the current group). phandle: NCCL's profiler step handle (may be NULL).
  Status Isend(const void* data, size_t size, int tag, void* phandle, Request** req);
  Status Test(Request* r, int* done, int* size) override;
  ConnState state() const { return core_.state(); }

 private:
  // A frame of at most kInlineFrame bytes (header + payload: eager messages, control frames) is
  // copied into `small` and written from there in one buffer: a send() instead of a sendmsg() of two
  // (whose msghdr and iovec copy-in cost more than the copy).
  static constexpr size_t kInlineFrame = 4096;
  struct TxStream {
    bool busy = false;
    bool inlined = false;  // the frame is in `small`
    bool driver = false;   // the frame is the driver's (kShare), not the core's
    TxFrame f{};
    size_t done = 0;  // bytes of hdr+payload written
    std::array<uint8_t, kInlineFrame> small;
  };
  struct TxLink {
    LinkPlan plan;
    std::unique_ptr<Link> link;
    std::unique_ptr<Connector> connector;
    std::vector<TxStream> tx;
    std::array<uint8_t, 16 * sizeof(Frame)> in{};  // control frames read ahead: in[in_pos, in_end)
    size_t in_pos = 0, in_end = 0;
    uint64_t rail_gen = 0;
    uint64_t last_in_ns = 0;     // when a control read last returned bytes
    uint64_t next_cold_ns = 0;   // a cold control stream's next read (kColdReadNs)
  };

  Status Progress() { return Progress(NowNs()); }
  Status Progress(uint64_t now);  // now: the caller's clock (one read per NCCL call)
  uint64_t IdleProgress() override;
  void Commands(uint64_t now);  // carries out the core's link commands
  void PollConnector(int idx, uint64_t now);
  void WriteStream(int idx, int i, uint64_t now, bool* progressed);
  void ReadControl(int idx, uint64_t now);
  void PollRails(uint64_t now);
  void Sample(uint64_t now);
  // RERAIL_TCP_DUPLEX (duplex.h): takes an offered port, looks for a partner receive comm, notices a
  // dead port.
  void DuplexPoll(uint64_t now);
  // Control frames of link 0 from the port's mailbox (read on the shared socket by a receive comm).
  void ReadMailbox(uint64_t now, bool pump);
  // The port goes (link 0's transport reset or closed, a handback, the comm closed).
  void DropPort();
  // Link 0's socket is replaced: its sharing state goes with it.
  void ResetLink0Sharing();
  bool OwnsPort() const { return port_ != nullptr && port_stream_ < 0; }
  // CoreObserver: board, profiler.
  void OnFailover(int link, const std::string& why, uint64_t bytes, uint64_t chunks, int to_link, uint64_t stall_ns,
                  bool was_probing) override;
  void OnRetransmit(int to_link, uint64_t bytes, uint64_t chunks) override;
  void OnFailback(int link) override;
  void OnLinkState(int link, LinkState from, LinkState to, const std::string& why) override;
  void OnBandwidth(int link, uint64_t bytes_per_s) override;

  ConnConfig cfg_;
  Nonce nonce_;
  std::vector<TxLink> links_;
  std::unique_ptr<staging::Stager> stager_ = staging::Stager::FromParams();  // GPU buffers, RERAIL_FORCE_STAGING
  SendCore core_;
  std::vector<LinkSample> samples_;
  size_t pass_bytes_ = 0;  // bytes Progress wrote in its current call
  // RERAIL_TCP_DUPLEX (duplex.h)
  std::shared_ptr<DuplexPort> port_;  // the shared socket of link 0, if any
  int port_stream_ = -1;              // borrowed: its TxStream on link 0 (after the link's own); -1 with
                                      // a port: this comm's own link 0 stream 0 (the initiator's end)
  uint64_t port_seq_ = 0;             // borrowed: 1 + the highest message seq with a chunk written there
                                      // (losing the socket before the ack covers it needs a failover)
  bool share_pending_ = false;        // initiator: the kShare frame is still to be written
  bool acks_ride_ = false;            // the reactor's end: the partner receive comm's acks may come by mail
  uint64_t duplex_next_ns_ = 0;       // when the initiator looks for a partner next
  uint64_t duplex_wait_ns_ = 0;       // ... after this long (doubles while none is found, to kDuplexMaxWaitNs)
  bool closing_ = false;              // the destructor runs: no new pairing
  // After a handback (duplex.h) link 0 stream 0 is read here again: the adopter's unread bytes come
  // first, `own_skip_` bytes of the ended connection's payload are dropped, and so are its frames.
  std::vector<uint8_t> own_leftover_;
  size_t own_skip_ = 0;
  bool handed_back_ = false;
  std::atomic<bool> offer_{false};    // the registry holds a port offered to this comm
};

class RecvComm final : public Comm, private CoreObserver {
 public:
  RecvComm(const ConnConfig& cfg, std::unique_ptr<Listener> listener, std::unique_ptr<Link> first);
  // Closing: an ack or credit the core held back is written now (best effort, non-blocking), so the
  // sender's close need not linger for it.
  ~RecvComm() override;
  // Posts one receive of n buffers (n > 1: a grouped receive, core.h) with capacities caps[] and
  // NCCL's tags[]; *req = nullptr means "retry later". phandle: NCCL's profiler step handle of the
  // first buffer (may be NULL).
  Status Irecv(int n, void* const* data, const size_t* caps, const int* tags, void* phandle, Request** req);
  Status Test(Request* r, int* done, int* size) override;
  ConnState state() const { return core_.state(); }
  uint64_t IdleProgress() override;
  // RERAIL_TCP_DUPLEX (duplex.h), from a send comm of this process with the registry's comms mutex
  // held; never blocks (try-lock of this comm's drive mutex). TryAdopt: reads `p` as one more stream
  // of link 0 if link 0 runs on `local_dev` and shares nothing yet. TryPump: one read pass.
  bool TryAdopt(const std::shared_ptr<DuplexPort>& p, int local_dev);
  void TryPump();

 private:
  enum class Phase : uint8_t { kHeader, kPayload };
  // One stream's read state. Bytes are read in as few recv calls as the data allows: a header and a
  // small payload (an eager message) arrive together in `buf`; a chunk's payload is read straight into
  // its destination with `buf` as the tail of the same call, which then holds the next header.
  struct RxStream {
    Phase phase = Phase::kHeader;
    Frame hdr{};
    bool have_hdr = false;   // hdr holds a whole header the core has not taken yet (kWait: parked)
    uint8_t* dst = nullptr;  // null: discard
    size_t remaining = 0;
    std::vector<uint8_t> buf;  // read-ahead; allocated when the link attaches
    size_t pos = 0, end = 0;   // unconsumed bytes: buf[pos, end)
    uint64_t last_data_ns = 0;  // when a read last returned bytes (0: never)
  };
  struct RxLink {
    std::unique_ptr<Link> link;  // null while down
    std::vector<RxStream> rx;
    Frame out{};                 // control frame being written
    bool out_busy = false;
    size_t out_done = 0;         // bytes of `out` written
    int rail = -1;
    uint64_t rail_gen = 0;  // RailSignals generation of its local rail when last looked at
    // RERAIL_TCP_DUPLEX (duplex.h), link 0 only: the shared socket. Owner (reactor): it is this link's
    // stream 0 and a send comm of this process writes there too. Adopter (initiator's end): it is a
    // send comm's socket, read here as stream port_stream (the slot Attach reserved).
    std::shared_ptr<DuplexPort> port;
    int port_stream = -1;  // the adopted socket's stream; -1 with a port: the owner's end
    int reserved = -1;     // the stream slot Attach reserved for an adopted socket (-1: none)
    // Acks parked on the port that no send comm took, written here (the adopter's own socket) before
    // any new control frame; also those of a port that ended.
    std::vector<Frame> backlog;
    bool port_heard = false;  // the adopter read a frame of this connection on the port (DuplexPort::hold_ok)
    bool OwnsPort() const { return port != nullptr && port_stream < 0; }
  };

  void Attach(std::unique_ptr<Link> link, uint64_t now);
  void Sync();  // closes the transport objects of links the core dropped
  // idle_acks: a call that reads nothing sends deferred acks; want_seq: the receive test() waits for
  // (the read pass stops once it is complete).
  static constexpr uint64_t kNoSeq = UINT64_MAX;
  Status Progress(bool idle_acks, uint64_t want_seq = kNoSeq);
  // Places parked headers, and what was read ahead with them, without a read, and completes what
  // is complete (irecv).
  void PlaceParked();
  // read: false takes only the bytes the stream's read-ahead buffer holds.
  void ReadStream(int idx, int i, uint64_t now, bool read);
  // Reads more of stream i into its read-ahead buffer (after `want` bytes into `dst`, when given).
  // False when nothing came (EAGAIN, or an error the core was told of); *drained when the socket had
  // less than asked, so reading again now would only return EAGAIN.
  bool Fill(int idx, int i, uint64_t now, uint8_t* dst, size_t want, size_t* placed, bool* drained);
  // The adopted shared stream ended (error, EOF, its owner let it go, a foreign frame): mid-frame fails
  // link 0 (what was cut off is re-sent), else it is only detached.
  void DetachPort(int idx, uint64_t now, const std::string& why, bool tell_owner, bool eof);
  // The link's socket is replaced or dropped: its sharing ends. An owner's port dies. An adopted one
  // goes back to its owner, which reads its socket again from where this comm stopped (the shared
  // socket is not what failed: a fault of its own comes through DetachPort first); only when the
  // stream sits in a header that is no frame's, so no frame boundary can be found after it, does it
  // fail the owner's link 0 instead.
  void ReleasePort(RxLink& l);
  void OnShare(int idx, int i, const Frame& hdr);
  // Writes control bytes on stream 0 of a link, through its port when it is a shared socket.
  IoState WriteControl(RxLink& l, const iovec* iov, size_t frame_left, size_t* n, int* err);
  void FlushControl(uint64_t now);
  // Acks parked on link 0's port by the last pass that no send comm took: the owner writes them there,
  // the adopter moves them to its backlog (a cut one is finished on the port).
  void Unpark(uint64_t now);
  // The next control frame of link idx: an ack handed back from the port first (*fresh false), then
  // the core's (*fresh true).
  bool NextOut(RxLink& l, int idx, uint64_t now, Frame* f, bool* fresh);
  // Whether NextControl's frame f of link idx is parked on the port instead of written.
  bool Park(RxLink& l, int idx, const Frame& f);
  Status PollListener(uint64_t now);
  void PollRails(uint64_t now);
  void Sample(uint64_t now);
  void OnFailover(int link, const std::string& why, uint64_t bytes, uint64_t chunks, int to_link, uint64_t stall_ns,
                  bool was_probing) override;

  ConnConfig cfg_;
  RecvCore core_;
  std::unique_ptr<Listener> listener_;  // kept for re-connections of failed rails
  std::vector<RxLink> links_;
  std::vector<uint8_t> scratch_;  // sink for dropped payloads
  std::unique_ptr<staging::Stager> stager_ = staging::Stager::FromParams();  // GPU buffers, RERAIL_FORCE_STAGING
  std::vector<LinkSample> samples_;
  uint64_t next_listen_poll_ns_ = 0;
  uint64_t rx_events_ = 0;  // reads that returned bytes and headers taken: a test() that adds none is idle
  uint64_t synced_drops_ = 0;  // core_.drops() when Sync last closed the dropped links' transports
  uint64_t cold_read_ns_ = 0;  // when cold streams (no bytes for kColdNs) are read next
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
