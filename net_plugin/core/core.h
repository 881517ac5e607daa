// rerail — the sans-I/O resilient-connection core: the protocol state machine of one NCCL send or
// receive comm, with no descriptor, socket, queue pair, thread or clock of its own.
//
// Who drives it
//   * Production: SendComm / RecvComm (net_plugin/send_comm.cc, recv_comm.cc) translate TCP socket
//     readiness, reads, writes and TCP_INFO samples into the inputs below, and the outputs into
//     sendmsg/recv calls and connector objects. The IB transport (#8) will do the same with work
//     requests and completions. The simulator (tests/sim/) drives the very same objects with a
//     virtual clock and simulated links. There is no #ifdef and no "simulation mode" in the core.
//   * Every input carries `now` (ns, any origin but > 0, never decreasing across calls on one core).
//     The core never reads a clock; timers are values compared with `now`.
//   * The driver loop, after every batch of inputs (the TCP shells do this on every NCCL call):
//       1. when SampleDue(now): OnSamples(now, one LinkSample per link);
//       2. Poll(now) (sender) / Poll(now, idle) (receiver): timers, give-up, failback probes, acks;
//       3. drain the outputs: NextCommand (sender: connect / close links) until false; NextTx
//          (sender) or NextControl (receiver) for every link that can take a frame; NextCompletion
//          until false;
//       4. sleep until Deadline() or the next input, whichever comes first.
//     Poll is cheap and idempotent: an early or extra call changes nothing that was not due. Every
//     input may queue commands (a failed link is closed by a kClose command), so drain NextCommand
//     before touching a link again after OnLinkError / OnControl / OnSamples / OnRail / Poll.
//   * Determinism: the core has no randomness, no pointer-keyed or unordered containers, and no
//     global state except the RailLoad table named in the config (share one per simulated host, as
//     a process shares one per plugin context). Same inputs in the same order -> same outputs.
//
// The model: chunk-level, not a byte stream
//   A connection has N links (one per rail to the peer; link 0 is the primary = NCCL's device). A
//   link has S ordered streams (TCP: sockets; RDMA: one RC QP per stream). Messages (isend/irecv,
//   sequence numbers 0, 1, ... in posting order, at most RxTracker::kWindow outstanding) are cut into
//   chunks of cfg.chunk bytes (a message smaller than a chunk per link: one chunk per link, in whole
//   granules, SendCore::FreshChunk); each chunk travels as a Frame (wire.h: conn, link epoch, seq,
//   offset, len, total) followed by `len` payload bytes on ONE stream of ONE link. Chunks of one
//   message may use any links and arrive in any order; within a stream they arrive in the order written.
//   Control frames (acks + credits, heartbeats, link-down notices) are payload-less Frames.
//
// Sender side (SendCore), per link:
//   NextTx(now, link, &tx)        the link has room for one more frame (TCP: a stream finished its
//                                 previous frame and the socket is writable; RDMA: a send-queue slot):
//                                 the core hands out the next frame for it or says "nothing now".
//                                 tx.payload points into NCCL's buffer (the retransmit buffer: it
//                                 stays valid until the send completes) or into the core's eager copy.
//                                 Writing it is the driver's job: TCP = one sendmsg of header+payload,
//                                 continued on short writes; RDMA = one RDMA WRITE at the offset the
//                                 receiver published (see "RDMA" below).
//   OnWritten(link, bytes)        bytes of any frame entered the transport (kernel socket buffer /
//                                 posted WR): the rail's backlog for the scheduler.
//   OnTxDone(now, link, hdr)      a whole frame entered the transport (eager sends complete here).
//   OnControl(now, link, frame)   a control frame arrived from the receiver on `link`.
//   OnLinkUp / OnConnectFailed / OnLinkError / OnRail   link life cycle (below).
//   OnSamples(now, samples)       transport counters per stream, when SampleDue(now): what the
//                                 peer's transport acknowledged (TCP: tcpi_bytes_acked; RDMA: bytes
//                                 of successful completions) and what is in flight. They drive the
//                                 black-hole watchdog (bytes in flight, acknowledgement not advancing
//                                 for cfg.stall_ns) and the bandwidth estimate of the scheduler.
//   Outputs: NextCommand (kConnect link epoch: start (re)connecting, the failback probe; kClose link:
//   drop its transport object now, its epoch is dead), NextCompletion (owner cookie, size, ok).
//
// Receiver side (RecvCore), per link and stream:
//   OnLinkUp(now, link, epoch, rail, streams, name)   an incoming link finished its handshake.
//   OnFrame(now, link, stream, hdr) -> RxAction       a frame header arrived: where its payload goes:
//       kPlace   read action.len bytes straight into action.dst (the posted buffer at the chunk's
//                offset), then call OnPayload(link, stream);
//       kStash   same, but action.dst is a core-owned copy (an eager chunk whose receive is not posted);
//       kDiscard read and drop action.len bytes (duplicate, stale epoch, completed message), then
//                OnPayload;
//       kWait    the chunk's receive is not posted: leave the payload where it is (in the socket) and
//                offer the same header again after the next Irecv (credits make this rare: wire.h);
//       kNone    a payload-less frame (control, or a zero-length chunk) fully handled: no OnPayload;
//       kFail    protocol violation: the connection failed (status()).
//   OnPayload(now, link, stream)  the payload of the last frame of that stream is in place.
//   NextControl(now, link, &f)    a control frame to write on the link's control stream (stream 0,
//                                 receiver -> sender). Once handed out it is the driver's to write.
//   Release(owner-slot)           NCCL was told the receive completed: its slot may be reused.
//   Acks and credits (kAck: cumulative ack + credit) cost a control frame each, so they go out at once
//   only when the sender waits for them: a normal message completed (its send completes on the ack),
//   a 0-byte one (its sender is about to close), kEagerAckEvery eager messages or half the eager pool
//   unacknowledged, or a new credit while the sender sends normal messages (or asked for it with
//   kFrameWantCredit: wire.h). Otherwise (eager traffic: a small-message ping-pong) they are held
//   back and go out in the first idle pass kHoldControlNs after the first of them, or with the next
//   urgent ack (heartbeats carry both too): one control frame per kEagerAckEvery messages, not one
//   each. A sender whose next message waits for a credit asks for it once (SendCore::NextTx).
//   Poll(now, idle)               timers; idle = the driver's last pass moved no byte (acks and
//                                 credits held back go out in such a pass, off the critical path).
//
// Link life cycle (both sides): OnLinkError(now, link, why, peer_closed) for a transport error
// (peer_closed: RST/EOF from the peer, which counts towards "the peer closed every link"); OnRail
// (now, rail, down) for a rail event of the local device `rail` (rtnetlink / IBV_EVENT_PORT_*).
// The core bumps the link's epoch, re-queues its unacknowledged chunks, tells the peer over a
// survivor and, on the sender, asks for a reconnect after capped exponential back-off
// (cfg.backoff_*; while no link works, at most giveup_ns / 8). A link is never failed for a stall
// while it is the last one alive; with no working link for cfg.giveup_ns the connection fails and
// every pending request errors. That clock starts at the first message (sender) or receive
// (receiver): a connection set up long before its first use, its links still connecting (IB: the
// peer answers a handshake only once it is driven), has had no chance to connect them yet.
//
// RDMA: how the IB transport of issue 12 maps onto this interface, with no change to the core
//   * A stream = an RC QP; OnWritten/OnTxDone when the WRITE is posted; "delivered" samples from
//     successful completions (RC: the remote ACK came back): acked_bytes = completed bytes,
//     in_flight = posted - completed. A WC error = OnLinkError; flush errors of later WRs are
//     ignored (the link is already failed). The frame header travels as the immediate data plus a
//     small header ring (or as a 40-byte inline SEND before the WRITE), so the receiver's OnFrame /
//     OnPayload are called from the WRITE_WITH_IMM completion with the data already placed: the
//     driver checks that action.dst equals where the WRITE landed.
//   * The sender must know the receive buffer's address per rail before writing: credits (acks carry
//     "receives posted") already gate fresh chunks on a posted receive; the IB driver adds the
//     address/rkey per rail to the same credit (a CTS frame the RecvCore emits on Irecv). Eager
//     chunks go as SENDs into pre-posted bounce buffers (kStash path).
//
// Grouped receives (NCCL's irecv with n <= maxRecvs buffers, each with a tag; issue 12)
//   NCCL posts n buffers as ONE receive; the n matching isends come on the same send comm, each with
//   one of the tags, in any order. The sender picks the element, as NCCL's net_ib does from its CTS
//   FIFO, so every later step stays per sequence number:
//   * the receiver posts the n elements as n consecutive messages (seq g .. g+n-1, element k = g+k:
//     RxTracker slots, credits, placement, acks unchanged) and announces each element to the sender
//     with a kPosted control frame (seq, capacity, tag, n, k) on every live link, and again on every
//     link that comes up while it is pending (wire.h);
//   * a sender in grouped mode (cfg.grouped; it said so in its hello) takes a sequence number only
//     for an announced element: Isend(tag) looks at the current group (the oldest announced group with
//     an element no send took yet; net_ib's fifoHead) once every one of its n announcements arrived,
//     takes its first free element with that tag and gives the message that element's seq (g+k), so
//     messages may be taken out of seq order within a group. No announcement, no free element with
//     that tag in the current group (it belongs to a later group), or the window full: *posted =
//     false and NCCL retries, as net_ib returns a NULL request. A message larger than its element is
//     refused at Isend (kInvalidUsage, nothing sent);
//   * everything after Isend (chunks, frames, credits, re-send, exactly-once placement, FIFO acks, the
//     IB CTS of that seq) is the same as for a single receive: the frame's seq names the element. The
//     receiver completes the request when all n elements are complete (Completion.index = k) and
//     reports each element's own size (a buffer may be larger than its message; 0-byte messages too).
//   In grouped mode a sender never sends before the receive is posted, so eager messages never reach
//   a receiver unposted (the stash stays empty); they still complete once written.
//
// Last-resort links (an IB comm's TCP link to the same peer, RERAIL_IB_TCP_FALLBACK; issue 12)
//   A link whose LinkSpec says last_resort is connected, heartbeated, sampled and failed back like any
//   other, but the scheduler gives it chunks (fresh or re-sent) only while no other link is usable:
//   the policy (stripe / failover) chooses among the preferred links, and the last resort stands in
//   for all of them. A re-send after the last preferred link failed goes to it, so nothing is lost;
//   the first preferred link that is usable again (its probe answered) takes the next chunk. Because
//   it is a live link, the last preferred link is failed for a stall or a rail event like any other
//   (the core keeps only the last LIVE link). The driver of a link whose transport can write into
//   memory after a failure (RDMA) still fences: a failed link's notice precedes every re-sent chunk on
//   each stream of every survivor, the last resort included. One WARN when the last resort starts
//   carrying data, one INFO when a preferred link takes over again (with the chunks and bytes the last
//   resort carried meanwhile); introspection: on_last_resort(), last_resort_chunks().
//
// What a simulator must provide to drive the core faithfully
//   * Per link direction: S FIFO streams; a frame is delivered (OnFrame then OnPayload) after its
//     serialization and propagation delay; bytes are only ever delivered in order on one stream, and
//     never lost or duplicated while the link lives (TCP and RC hide loss): model faults as stalls
//     (black holes: bytes stay in flight, acked_bytes stops), errors (OnLinkError on either side,
//     with the unread tail lost), rail events (OnRail, with or without a real fault), slowness.
//   * Backpressure: NextTx only when the simulated send queue has room (its depth bounds the rail's
//     backlog); OnWritten/OnTxDone as frames enter that queue; samples (acked_bytes, in_flight,
//     notsent, outq) from the simulated transport state when SampleDue.
//   * Payload: real bytes (the core memcpy's eager copies and stashes; placement uses the driver's
//     copy into action.dst), so oracles can check every byte.
//   * Time: call Poll(now) at Deadline() at the latest; never go back in time.
//
// Thread-safety: none. One core is driven by one thread at a time (NCCL's progress thread). The only
// shared object is the per-process RailLoad table of the scheduler (atomics), named in the config.
// Errors: inputs never throw; a fatal condition moves the core to ConnState::kFailed and status()
// carries the reason; every later request completes with that error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "../link_state.h"
#include "../rx_tracker.h"
#include "../scheduler.h"
#include "../wire.h"
#include "rerail/status.h"

namespace rr::net {

enum class Policy : uint8_t {
  kStripe,    // chunks go to every healthy link
  kFailover,  // primary link only while it is healthy and not degraded; every healthy survivor otherwise
};

// Connection life cycle (logged on every change).
enum class ConnState : uint8_t {
  kActive,      // at least one link works or is being recovered
  kPeerClosed,  // the peer closed its side in order; fine unless data is still expected
  kFailed,      // unrecoverable: every pending and future request errors
};
const char* ConnStateName(ConnState s);

// Why a link failed, from its reason text: names the board event and the profiler's short reason.
enum class FailCause : uint8_t { kStall, kLinkDown, kOther };
FailCause CauseOf(const std::string& why);
const char* ShortReason(const std::string& why);

// Protocol parameters (by value; shells read RERAIL_*, the simulator draws them).
struct CoreConfig {
  uint32_t chunk = 128 * 1024;      // RERAIL_CHUNK_SIZE
  size_t eager_max = 16384;         // sends up to this size are eager (copied; complete once written); 0: never
  size_t eager_pool = 1 << 20;      // bytes of eager copies a send comm may hold unacknowledged
  Policy policy = Policy::kStripe;
  uint64_t stall_ns = 1'000'000'000;
  uint64_t heartbeat_ns = 200'000'000;
  uint64_t giveup_ns = 30'000'000'000;
  uint64_t connect_grace_ns = 1'000'000'000;  // how long connect waits for the primary before settling
  uint64_t backoff_min_ns = 100'000'000;
  uint64_t backoff_max_ns = 5'000'000'000;
  // RERAIL_FAILBACK_PROBATION_MS: a link re-admitted by a probe restarts its back-off from
  // backoff_min_ns only once it stayed up this long; one that fails sooner (ack-only loss: the probe
  // is answered, the data's acknowledgements are not) waits twice as long before its next probe.
  uint64_t probation_ns = 2'000'000'000;
  RailLoad* loads = nullptr;  // per local rail, shared by a context's send comms (null: private)
  // Grouped receives (above). Sender: take sequence numbers only for elements the receiver announced
  // (RERAIL_MAX_RECVS > 1; the driver says so in the hello). Receiver: the sender is in grouped mode
  // (its hello said so): announce every posted receive; without it an Irecv of n > 1 is refused.
  bool grouped = false;
};

// How often a link's transport counters are sampled for the stall watchdog: an eighth of the stall
// time (at least 1 ms), so a black hole is caught within stall_ns * 9 / 8.
inline uint64_t StallCheckNs(const CoreConfig& c) { return c.stall_ns / 8 > 1000000 ? c.stall_ns / 8 : 1000000; }

// What the transport says about one stream's send side (TCP_INFO / RDMA completion counts).
struct StreamSample {
  uint64_t acked_bytes = 0;  // cumulative bytes the peer's transport acknowledged
  uint64_t in_flight = 0;    // sent and not acknowledged (0: nothing in flight)
  uint64_t notsent = 0;      // written by the driver, not yet sent (the transport is the limit)
  uint64_t outq = 0;         // written, not yet acknowledged (queued + in flight)
  uint64_t min_rtt_ns = 0;   // the transport's minimum round-trip time (TCP: tcpi_min_rtt); 0 unknown
  // Cumulative time the peer's receive window was the limit (TCP: tcpi_rwnd_limited; 0 where the
  // transport has no such count): the receiver, or the path's window over its round trip, held the
  // bytes back.
  uint64_t rwnd_limited_ns = 0;
  // The peer's advertised receive window now (TCP: tcpi_snd_wnd, Linux >= 5.4; UINT64_MAX unknown).
  // Near 0: its buffer is full of bytes its application has not read (the receiver is the limit);
  // open while window-limited: the window is smaller than the path's bandwidth-delay product (the
  // rail, for this connection, is the limit).
  uint64_t peer_window = UINT64_MAX;
};
// One link's sample; valid = false when the link has no transport object or counters are unavailable.
struct LinkSample {
  bool valid = false;
  int streams = 0;
  StreamSample s[kMaxStreams];
};

// Notifications for logs, the rail-health board and the profiler (the driver implements them; the
// simulator counts them). Default: ignore. Called synchronously from inside inputs.
class CoreObserver {
 public:
  virtual ~CoreObserver() = default;
  // A link failed with unacknowledged chunks re-queued (sender) or was dropped (receiver, bytes 0).
  // to_link: the first surviving link (-1: none); stall_ns: time since the peer was last heard.
  virtual void OnFailover(int /*link*/, const std::string& /*why*/, uint64_t /*bytes*/, uint64_t /*chunks*/,
                          int /*to_link*/, uint64_t /*stall_ns*/, bool /*was_probing*/) {}
  // The re-queued chunks of earlier failures were handed to `to_link` (one event per drain).
  virtual void OnRetransmit(int /*to_link*/, uint64_t /*bytes*/, uint64_t /*chunks*/) {}
  // The peer answered on a probing link: re-admitted.
  virtual void OnFailback(int /*link*/) {}
  // A sender link's state changed (not reported: the first connecting -> healthy).
  virtual void OnLinkState(int /*link*/, LinkState /*from*/, LinkState /*to*/, const std::string& /*why*/) {}
  // A sender's bandwidth estimate of a usable link (bytes/s), every heartbeat period.
  virtual void OnBandwidth(int /*link*/, uint64_t /*bytes_per_s*/) {}
};

// One frame for the driver to write (sender -> receiver).
struct TxFrame {
  Frame hdr{};
  const uint8_t* payload = nullptr;  // hdr.len bytes; valid until the message's send completes
};

// Link commands from the sender core.
struct LinkCommand {
  enum Kind : uint8_t {
    kConnect,  // start connecting `link` with `epoch` (first connect, retry, failback probe)
    kClose,    // drop the link's transport object (connector or established link) now
  } kind;
  int link;
  uint32_t epoch;
  // kClose: a link-down notice for the link itself, to write on it before closing it when a stream
  // is between frames (best effort). TCP delivers it before the FIN, so the peer can tell "the
  // other side dropped this link" from "the other side's process closed or died".
  Frame notice{};
};

// A request the core finished: owner = the cookie given to Isend/Irecv.
struct Completion {
  void* owner = nullptr;
  size_t size = 0;  // send: message size; receive: bytes received
  int index = 0;    // receive: the element (0 .. n-1) of the owner's grouped receive
};

// The connection-wide part both sides share: state, failure, give-up clock.
class CoreBase {
 public:
  ConnState state() const { return state_; }
  const Status& status() const { return failure_; }  // Ok unless kFailed
  uint64_t conn_id() const { return conn_id_; }
  // Completed requests, in completion order. False when none is left.
  bool NextCompletion(Completion* out);
  // The copy between NCCL's buffers and the core's own host memory: the sender's eager copy at
  // isend, the receiver's stashed (eager) chunks into their posted buffer. memcpy unless set; the
  // comm sets it when NCCL's buffers may be GPU memory (staging/). A failure fails the connection.
  using CopyFn = std::function<Status(void* dst, const void* src, size_t len)>;
  void SetCopier(CopyFn fn) { copier_ = std::move(fn); }
  // A local failure outside the protocol (a CUDA copy of the staged path): the connection fails.
  Status Abort(Code code, const std::string& why) { return Fail(code == Code::kOk ? Code::kInternalError : code, why); }

 protected:
  CoreBase(uint64_t conn_id, CoreObserver* obs) : conn_id_(conn_id), obs_(obs != nullptr ? obs : &null_obs_) {}
  virtual ~CoreBase() = default;
  void Transition(ConnState to, const std::string& why);
  // The connection stopped being active (failed, or closed by the peer): nothing more is sent.
  virtual void Ended() {}
  Status Fail(Code code, const std::string& why);
  // Runs while no link works (usable and not stalled) on a connection in use (a message posted: one
  // set up long before its first use has had no chance to connect its links); true once it has run
  // for longer than giveup_ns.
  bool GiveUpDue(bool in_use, int working, uint64_t now, uint64_t giveup_ns);

  // copier_(dst, src, len), or memcpy when unset.
  Status Copy(void* dst, const void* src, size_t len);
  CopyFn copier_;
  uint64_t conn_id_;
  CoreObserver null_obs_;
  CoreObserver* obs_;
  ConnState state_ = ConnState::kActive;
  Status failure_;
  uint64_t no_link_since_ns_ = 0;  // 0 while some link works
  std::deque<Completion> done_;
};

// The stall watchdog's view of one link: per stream, when its acknowledgement last advanced while
// bytes were in flight.
struct StallTracker {
  uint64_t acked[kMaxStreams] = {};
  uint64_t since_ns[kMaxStreams] = {};  // 0: nothing in flight at the last sample
  uint64_t age_ns = 0;                  // the worst stream's stall age at the last sample
  void Reset() { *this = StallTracker{}; }
  void Sample(const LinkSample& s, uint64_t now);
};

class SendCore final : public CoreBase {
 public:
  struct LinkSpec {
    int rail = 0;              // local device (index into cfg.loads)
    double nominal_bps = 1e9;  // until measured
    std::string name;          // for logs: "rail eth1 -> 10.0.1.2:5000"
    // A last resort (an IB comm's TCP link, RERAIL_IB_TCP_FALLBACK): it takes chunks only while no
    // other link is usable (see "Last-resort links" above); heartbeats and notices as any link.
    bool last_resort = false;
  };
  // Emits kConnect for every link at once (standby links are connected eagerly).
  SendCore(const CoreConfig& cfg, uint64_t conn_id, std::vector<LinkSpec> links, CoreObserver* obs, uint64_t now);
  ~SendCore() override;

  // ---- NCCL calls
  // Posts a send. *posted = false: retry later (window or request limit; not an error). tag: NCCL's
  // tag, matched against the receiver's announced elements in grouped mode (ignored otherwise).
  Status Isend(uint64_t now, const void* data, size_t size, void* owner, bool* posted, int tag = 0);
  // Setup: true once the comm may carry data (a link is up, and the primary settled or the grace
  // period is over). An error when no link could be connected for giveup_ns.
  Status Ready(uint64_t now, bool* ready);

  // ---- link events
  bool NextTx(uint64_t now, int link, TxFrame* out);
  // False when no NextTx call can hand out a frame before the next input (nothing to send: no
  // notice, heartbeat, re-send or unscheduled message). True may still find nothing (credit, policy).
  bool HasTx() const;
  void OnWritten(int link, size_t bytes);
  void OnTxDone(uint64_t now, int link, const Frame& hdr);
  void OnControl(uint64_t now, int link, const Frame& f);
  // The receiver dropped `link`; `epoch` is the dropped incarnation's successor (a kLinkDown notice,
  // on any link or out of band, e.g. an IB comm's bootstrap stream). Stale when the link reconnected
  // since (its epoch is already that far).
  void OnPeerDroppedLink(uint64_t now, int link, uint32_t epoch);
  void OnLinkUp(uint64_t now, int link);
  void OnConnectFailed(uint64_t now, int link, const std::string& why);
  void OnLinkError(uint64_t now, int link, const std::string& why, bool peer_closed);
  void OnRail(uint64_t now, int rail, bool down);
  // Samples are due every Scheduler::kReportNs, and sooner while the scheduler refused a chunk since
  // the last one: a rail's backlog is counted up as bytes are written and only the sample counts it
  // down, so a rail that drained in a fraction of kReportNs would look busy and sit idle (one comm
  // on 4 x 1 Gbit/s: 0.74 of the link sum). Then every refused chunk's time on the fastest rail
  // (the smallest refused: a message cut into a chunk per link has chunks of a quarter of
  // cfg.chunk on 4 rails, and at cfg.chunk's pace rails drained and idled between samples: 0.76 of
  // 4X for rerail-perf -C 1 sendrecv in the simulator).
  bool SampleDue(uint64_t now) const { return now >= SampleAt(); }
  void OnSamples(uint64_t now, const std::vector<LinkSample>& samples);  // one per link

  // ---- timers and outputs
  void Poll(uint64_t now);
  uint64_t Deadline() const;
  bool NextCommand(LinkCommand* out);

  // ---- introspection (drivers, tests, simulator oracles)
  int links() const { return static_cast<int>(links_.size()); }
  bool usable(int link) const { return links_[link].fsm.usable(); }
  LinkState link_state(int link) const { return links_[link].fsm.state(); }
  uint32_t epoch(int link) const { return links_[link].epoch; }
  int LiveLinks() const;
  size_t eager_bytes() const { return eager_bytes_; }
  uint64_t posted() const { return next_seq_; }
  uint64_t last_seq() const { return last_seq_; }  // the seq the last posted Isend took
  bool grouped() const { return cfg_.grouped; }
  // A posted send the receiver has not acknowledged. Eager sends complete before that (once written)
  // and a 0-byte one (an end-of-stream marker) holds no eager bytes, so this, not eager_bytes(), is
  // what a closing comm must wait for: until the ack, only this core can re-send it.
  bool unacknowledged() const { return acked_ < next_seq_; }
  // A send waits: a message is unacknowledged, or NCCL retries an isend that waits for the receiver's
  // announcement (grouped mode). Every usable link carries heartbeats meanwhile.
  bool SendWaits() const { return acked_ < next_seq_ || awaits_element_; }
  uint64_t acked() const { return acked_; }
  const Scheduler& scheduler() const { return sched_; }
  // Last-resort links (above): whether one carries data now, and the data chunks handed to last-resort
  // links since the connection started.
  bool on_last_resort() const { return on_last_resort_; }
  uint64_t last_resort_chunks() const { return last_resort_chunks_; }

 private:
  // Its queued and pending bytes leave the rails' shared load: a failed or peer-closed comm waits for
  // NCCL's close, and other comms must not see its work as still to do.
  void Ended() override;
  struct ChunkRef {
    uint64_t seq;
    uint64_t off;
    uint32_t len;
  };
  struct TxMsg {
    uint64_t seq = 0;
    bool assigned = false;    // seq was given to a send (grouped mode leaves holes until taken)
    const uint8_t* data = nullptr;
    size_t size = 0;
    size_t next_off = 0;      // next fresh byte to schedule
    bool scheduled = false;   // every chunk handed out once
    void* owner = nullptr;    // null once reported done (eager), so an ack cannot complete it twice
    bool eager = false;       // data points into copy; completes when `written` reaches size
    size_t written = 0;       // eager: payload bytes of chunks fully written (re-sends may count twice)
    std::vector<uint8_t> copy;
  };
  struct TxLink {
    LinkSpec spec;
    LinkFsm fsm{""};
    uint32_t epoch = 0;
    bool has_transport = false;      // a connector or an established link exists in the driver
    bool rail_down = false;          // the last rail event said down: no probe until it is up
    bool peer_closed = false;        // the peer closed it (EOF/RST) since a link was last usable
    uint64_t probe_since_ns = 0;     // when the current connect (first, retry or probe) started
    bool hb_due = false;             // a heartbeat for the peer is due on this link
    uint64_t next_hb_ns = 0;
    std::deque<ChunkRef> inflight;   // chunks handed to this link, not yet known acknowledged
    uint64_t last_heard_ns = 0;
    uint64_t retry_at_ns = 0;
    uint64_t backoff_ns = 0;
    uint64_t failback_ns = 0;        // when a probe last re-admitted it (0: not since its last failure)
    StallTracker stall;
    uint64_t acked_base = UINT64_MAX;  // the transport's acked-bytes count at the last report
    uint64_t rwnd_base = 0;            // its streams' receive-window-limited time then, summed
    uint64_t report_ns = 0;            // when that report was taken
  };

  bool Eligible(const TxLink& l) const;
  // A link that is not a last resort is usable (the last resorts then take no chunk).
  bool PreferredUsable() const;
  // The WARN / INFO of a last-resort link starting or stopping to carry data.
  void NoteLastResort(int idx, bool carries);
  void AddPending(int64_t delta);  // pending_bytes_, published to the scheduler
  uint64_t SampleAt() const;
  // The payload of the next fresh chunk of `m` when `n` links may carry it: a full chunk, but a message
  // of less than a full chunk per link is cut into one chunk per link, in whole granules (wire.h).
  size_t FreshChunk(const TxMsg& m, size_t n) const;
  // A full chunk: cfg.chunk in whole granules.
  size_t FullChunk() const { return ChunkGranule(cfg_.chunk) * kChunkGranules; }
  void SetState(int idx, LinkState to, const std::string& why);
  void ScheduleRetry(uint64_t now, int idx);  // retry_at_ns / backoff_ns of a link that just failed
  void HastenRetries(uint64_t now);
  bool Stalled(const TxLink& l) const { return l.stall.age_ns > cfg_.stall_ns; }
  // How long a probe may go unanswered before it is replaced: the peer answers a new link at once
  // when it polls, and NCCL may leave it unpolled for a while.
  uint64_t ProbeTimeoutNs() const { return 2 * cfg_.stall_ns + cfg_.heartbeat_ns; }
  // An element the receiver announced (kPosted), by seq % kWindow.
  struct Elem {
    uint64_t seq = UINT64_MAX;  // UINT64_MAX: none
    size_t cap = 0;
    int tag = 0;
    int n = 1, k = 0;
    bool taken = false;
  };
  void Complete(TxMsg& m);
  void OnPosted(const Frame& f);
  // Grouped mode: the seq of the current group's first free element with `tag`; false when none now.
  bool TakeElement(int tag, size_t size, uint64_t* seq, Status* err);
  void OnAck(uint64_t ack, uint64_t credit);
  void FailLink(uint64_t now, int idx, const std::string& why, bool peer_closed);
  void StartConnect(uint64_t now, int idx);
  void ReportDelivered(uint64_t now, const std::vector<LinkSample>& samples);
  void CheckPrimarySpeed(uint64_t now);

  CoreConfig cfg_;
  std::vector<TxLink> links_;
  TxMsg msgs_[RxTracker::kWindow];
  Scheduler sched_;
  std::vector<bool> eligible_;    // scratch for the scheduler
  int64_t pending_bytes_ = 0;     // bytes of posted messages (and re-sends) not handed to a link yet
  std::deque<ChunkRef> requeue_;  // chunks of failed links waiting to be re-sent
  std::deque<Frame> notices_;     // control frames for the peer (link-down notices)
  std::deque<LinkCommand> cmds_;
  uint64_t next_seq_ = 0;          // one past the highest seq taken (grouped mode: holes below it)
  uint64_t sched_seq_ = 0;
  Elem elems_[RxTracker::kWindow];
  uint64_t group_ = 0;             // grouped mode: first seq of the current group
  bool awaits_element_ = false;    // grouped mode: the last isend found no announced buffer (NCCL retries)
  uint64_t last_seq_ = 0;
  uint64_t acked_ = 0;
  uint64_t credit_ = 0;            // receives the peer has posted: only messages below it are sent
  uint64_t want_credit_ = 0;       // a credit above this seq was asked for (kFrameWantCredit)
  size_t eager_bytes_ = 0;         // bytes held in eager copies (bounded by cfg_.eager_pool)
  uint64_t open_ = 0;              // posted sends not yet reported done (an owner set)
  uint64_t setup_start_ns_ = 0;
  uint64_t next_sample_ns_ = 0;
  uint64_t last_sample_ns_ = 0;
  double fastest_ = 0;              // the fastest usable rail at the last sample, bytes/ns (0: none)
  uint64_t refused_ = 0;           // the smallest chunk the scheduler refused since the last sample; 0: none
  uint64_t next_board_ns_ = 0;
  uint64_t last_observe_ns_ = 0;
  bool primary_degraded_ = false;  // failover policy: the primary is measurably slower than a survivor
  uint64_t degraded_since_ns_ = 0;
  static constexpr uint64_t kDegradeAfterNs = 500'000'000;
  // A peer window below this (TCP: less than a page) is closed: the peer's buffer is full of unread
  // bytes (Linux advertises 0 once the free space is below one MSS).
  static constexpr uint64_t kClosedWindow = 4096;
  bool on_last_resort_ = false;    // a last-resort link carries data (no preferred link usable)
  uint64_t last_resort_chunks_ = 0;
  uint64_t last_resort_bytes_ = 0;
  uint64_t last_resort_mark_ = 0;  // last_resort_chunks_ when it started carrying (the INFO's count)
  uint64_t resent_chunks_ = 0;     // re-sent since the requeue last drained (one event per drain)
  uint64_t resent_bytes_ = 0;
};

// What the receiver driver does with a frame's payload (RecvCore::OnFrame).
struct RxAction {
  enum Kind : uint8_t { kPlace, kStash, kDiscard, kWait, kNone, kFail } kind = kNone;
  uint8_t* dst = nullptr;  // kPlace / kStash: where the payload goes (nullptr for kDiscard: a sink)
  size_t len = 0;          // payload bytes to read (kPlace, kStash, kDiscard)
};

class RecvCore final : public CoreBase {
 public:
  // How long an ack or credit that nobody waits for may be held back (see "Acks and credits" above).
  static constexpr uint64_t kHoldControlNs = 1'000'000;
  // Eager messages that force an ack without waiting for an idle pass.
  static constexpr uint32_t kEagerAckEvery = 16;

  RecvCore(const CoreConfig& cfg, uint64_t conn_id, uint32_t chunk_size, CoreObserver* obs);

  // ---- NCCL calls
  // Posts the next receive. *posted = false: retry later. *slot: pass to Release once NCCL was told.
  Status Irecv(uint64_t now, void* buf, size_t cap, void* owner, bool* posted, void** slot, int tag = 0);
  // A grouped receive: n (1..kMaxRecvs) elements as n consecutive messages, all posted or none
  // (*posted = false: retry). slots[k]: element k's slot, each released with Release. Completions
  // come per element (Completion.index = k), all with `owner`.
  Status IrecvGroup(uint64_t now, int n, void* const* bufs, const size_t* caps, const int* tags, void* owner,
                    bool* posted, void** slots);
  void Release(void* slot);

  // ---- link events
  // An incoming link finished its handshake; false when it is refused (stale epoch, bad index).
  bool OnLinkUp(uint64_t now, int link, uint32_t epoch, int rail, int streams, const std::string& name);
  RxAction OnFrame(uint64_t now, int link, int stream, const Frame& hdr);
  // The notice to write on a link the core dropped before closing it (see LinkCommand::notice).
  Frame DropNotice(int link) const;
  void OnPayload(uint64_t now, int link, int stream);
  bool NextControl(uint64_t now, int link, Frame* out);
  void OnLinkError(uint64_t now, int link, const std::string& why, bool peer_closed);
  void OnRail(uint64_t now, int rail, bool down);
  bool SampleDue(uint64_t now) const { return now >= next_sample_ns_; }
  void OnSamples(uint64_t now, const std::vector<LinkSample>& samples);  // one per link (links())

  // ---- timers
  // idle: the driver's last pass read nothing (acks and credits held back for kHoldControlNs go out now).
  void Poll(uint64_t now, bool idle);
  uint64_t Deadline() const;
  // Whether this comm must be driven although NCCL holds none of its receives (IdleSends does it: NCCL
  // calls a receive comm only while it has a receive there): the sender may still wait for an ack of
  // messages that completed here, and only this side can accept the links it probes and send the ack
  // again on them. True from a completion until a sample of a link that carried an ack covering it
  // shows every byte of its control stream acknowledged by the sender's kernel, and again after any
  // link drop (the ack may have been lost with it). The sender may still lose an ack its kernel holds
  // (a reset before it read it, tests/sim seed 100931), so the duty lasts RERAIL_GIVEUP_MS past that
  // confirmation (the sender's own bound for a wait with no link; Poll ends it). It ends at once when
  // the connection ends, or after RERAIL_GIVEUP_MS with no link (the sender gave up too). Reads no clock.
  bool OwesIdleProgress() const { return state_ == ConnState::kActive && (ack_unconfirmed_ || owe_until_ns_ != 0); }
  // How often that driving must come: at every chance (0) while an ack may be missing; while only the
  // RERAIL_GIVEUP_MS linger holds, kIdleLingerNs, or a quarter of a sender's probe timeout when that
  // is shorter, answers a probe in time (a dropped link makes the ack unconfirmed again at once).
  // Measured with 64 idle receive comms (net-hotpath --quiet-ms): the linger polled every 5 ms cost
  // 5.5 % of a core.
  static constexpr uint64_t kIdleLingerNs = 100'000'000;
  uint64_t IdlePeriodNs() const {
    return ack_unconfirmed_ ? 0 : std::min<uint64_t>(kIdleLingerNs, (2 * cfg_.stall_ns + cfg_.heartbeat_ns) / 4);
  }
  // The driver closes the comm: an ack or credit held back is queued now (NextControl), so a sender
  // that lingers on the ack of its last messages (a closing send comm) gets it at once.
  void FlushHeld(uint64_t now);

  // ---- introspection
  int links() const { return static_cast<int>(links_.size()); }
  bool alive(int link) const { return links_[link].alive; }
  uint32_t epoch(int link) const { return links_[link].epoch; }
  int rail(int link) const { return links_[link].rail; }
  int LiveLinks() const;
  // Bumped whenever a link stops being alive: a driver closes the transport objects of dropped
  // links when it changed (and only then).
  uint64_t drops() const { return drops_; }
  uint64_t completed() const { return tracker_.completed_prefix(); }
  uint64_t posted() const { return tracker_.posted(); }
  size_t stash_bytes() const { return stash_bytes_; }
  // Some message is complete but its completion waits: a stream still places a late copy of one of
  // its chunks (a link that died mid-chunk, until it is dropped), so completed() runs ahead of what
  // Completions() handed out.
  bool deferring() const { return !deferred_.empty(); }
  bool grouped() const { return cfg_.grouped; }
  // The sender's mode, from a handshake that comes after construction (IB's link hello).
  void SetPeerGrouped(bool grouped) { cfg_.grouped = grouped; }

 private:
  struct Stashed {
    Frame hdr{};
    std::vector<uint8_t> bytes;
    int link = -1;  // link whose stream is filling it (-1 once complete)
  };
  struct RxStream {
    Frame hdr{};
    RxAction::Kind kind = RxAction::kNone;
    RxTracker::Slot* slot = nullptr;
    Stashed* stash = nullptr;
  };
  struct RxLink {
    bool alive = false;
    uint32_t epoch = 0;
    int rail = -1;
    std::string name;
    std::vector<RxStream> rx;
    std::deque<Frame> out;  // control frames for the sender
    uint64_t last_hb_ns = 0;
    bool hb_now = false;    // answer at once (a new link: the sender re-admits it on the first frame)
    bool rail_down = false; // kept alive on a downed rail as the last link (not working)
    bool carries_ack = false;  // the latest ack was queued on this link (an ack or heartbeat frame)
    bool peer_ended = false;   // the peer's side ended it: its transport closed it, or its core dropped
                               // it and said so (not this side's rail event or stall watchdog)
    StallTracker stall;
  };

  void Complete(RxTracker::Slot* slot, const Frame& f);
  void Done(const RxTracker::Slot* slot);
  // Grouped mode: the kPosted announcement of a pending element, to queue on a link.
  Frame PostedFrame(const RxTracker::Slot& s, uint32_t epoch) const;
  void DrainStash();
  void ForgetStash(int idx);
  bool Placing(const RxTracker::Slot* slot) const;
  void ReleaseDeferred();
  // peer_closed: the peer's transport closed it (EOF/RST: its process may be gone); peer_dropped:
  // the peer's core dropped it and said so (no WARN, no notice back, never fatal).
  void DropLink(uint64_t now, int idx, const std::string& why, bool peer_closed, bool peer_dropped = false);
  void QueueControl(uint64_t now, bool idle, bool flush_held = false);
  bool Stalled(const RxLink& l) const { return l.stall.age_ns > cfg_.stall_ns; }

  CoreConfig cfg_;
  RxTracker tracker_;
  std::vector<RxLink> links_;
  std::vector<std::unique_ptr<Stashed>> stash_;  // eager chunks waiting for their receive
  size_t stash_bytes_ = 0;
  std::vector<RxTracker::Slot*> deferred_;  // complete, but a late duplicate still writes into the buffer
  uint64_t ack_sent_ = 0;
  uint64_t credit_sent_ = 0;    // receives posted as last announced to the sender
  bool ack_urgent_ = false;     // a dropped link may have carried the last ack: send it again at once
  uint64_t waited_upto_ = 0;    // 1 + the newest completed message whose sender waits for the ack
  uint32_t eager_unacked_ = 0;  // eager messages completed since the last ack
  size_t eager_unacked_bytes_ = 0;
  bool ack_unconfirmed_ = false;  // OwesIdleProgress: the sender's kernel may not have an ack of every completion
  uint64_t owe_until_ns_ = 0;     // OwesIdleProgress: RERAIL_GIVEUP_MS after the last confirmation (0: none)
  bool peer_eager_ = false;     // the last data frame was a chunk of an eager message (needs no credit)
  uint64_t want_credit_ = 0;    // the sender waits for a credit covering this (kFrameWantCredit)
  uint64_t held_since_ns_ = 0;  // since when an ack or credit is held back (0: none)
  uint64_t drops_ = 0;
  uint64_t next_sample_ns_ = 0;
};

}  // namespace rr::net
