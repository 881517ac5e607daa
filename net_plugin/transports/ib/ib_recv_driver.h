// rerail — the IB driver of a RecvCore (core.h "RDMA"): accepts the sender's links (IbLinkHello),
// publishes every posted receive as an IbCts, turns received headers into OnFrame / OnPayload, and
// writes the core's control frames. What travels is described in ib_wire.h.
//
// Contract
//   * One driver per RecvCore, which it does not own; rails[r] is the receiver's device r (the index
//     of its keys in MrHandle::keys and in IbCts::rkey).
//   * Accept(hello) is the receiving end of the handshake (IbDialer): it (re)creates the link's QPs on
//     the rail the sender asked for, connects them (RESET -> INIT -> RTR -> RTS, receives posted before
//     the answer leaves), calls RecvCore::OnLinkUp and queues the CTS of every posted receive on the
//     link, ahead of any control frame. A refused link (stale epoch, bad index) answers an error.
//   * Irecv() wraps RecvCore::Irecv; a posted receive's CTS (address, size, rkey per rail) is queued on
//     every live link, before the ack that will carry its credit (ib_wire.h).
//   * Frames: a header whose payload was written by RDMA must be placed (kPlace) exactly where the
//     sender wrote it — the posted buffer + offset — which the driver checks (a mismatch aborts the
//     connection), or dropped (kDiscard: a duplicate, identical bytes). A frame carrying its payload is
//     copied to action.dst (kPlace, kStash), dropped (kDiscard), or kept in its bounce buffer (kWait)
//     and offered again after the next Irecv.
//   * The late-write guard: whenever the core no longer has a link alive (its own error, a rail event,
//     the stall watchdog, or the sender's link-down notice), the driver moves that link's QPs to ERR
//     before any completion is handed out: NextCompletion() runs the guard first, so a message that had
//     chunks on a failed link never reaches NCCL while an RDMA write of that link could still land in
//     its buffer. (The sender's fences make the notice precede every re-sent chunk on the survivors.)
//     Always take completions through NextCompletion(), never from the core directly.
//   * Progress(now): one pass of core.h's loop: rail events, completions, samples, Poll(now, idle),
//     the guard, control frames out. Thread-safety as IbSendDriver (OnRailEvent from any thread).
//   * Side links (SideRecvLink, below): core links that arrive over another transport (an IB comm's TCP
//     link, RERAIL_IB_TCP_FALLBACK; the comm attaches it and feeds its OnLinkUp). Progress reads them
//     after the IB links' completions and writes their control frames with the IB links'; the guard
//     closes one the core dropped (Sync). A frame on one may be a link-down notice of an IB link: the
//     guard runs before any completion is handed out, as for notices on IB links.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/core.h"
#include "transports/ib/ib_link.h"
#include "transports/ib/ib_mr_cache.h"
#include "transports/ib/ib_wire.h"

namespace rr::ib {

// A core link over another transport (the header). It feeds the core directly (OnFrame, OnPayload,
// OnLinkError) for its own index; the driver calls it at the points below.
class SideRecvLink {
 public:
  virtual ~SideRecvLink() = default;
  virtual int link() const = 0;                 // its index in the core
  virtual bool Read(uint64_t now) = 0;          // frames in; true when a byte moved
  virtual void Flush(uint64_t now) = 0;         // the core's control frames for it out
  virtual void Sync() = 0;                      // the core dropped it: its notice (best effort), close
  virtual net::LinkSample Sample() = 0;
  virtual bool up() const = 0;
  virtual bool Quiet() const = 0;               // no control frame queued or half written
};

class IbRecvDriver {
 public:
  // cfg: QP options and receive depth (recv_slots) of every link; buffer sizes follow the sender's chunk.
  IbRecvDriver(net::RecvCore* core, std::vector<IbDevice*> rails, const IbLinkConfig& cfg);
  ~IbRecvDriver();

  Status Accept(uint64_t now, const IbLinkHello& hello, IbLinkHello* answer);
  Status Irecv(uint64_t now, void* buf, size_t cap, const MrHandle* mh, void* owner, bool* posted, void** slot);
  // A grouped receive (core.h "Grouped receives"): n elements, each with its own CTS; mhs[k] registers
  // bufs[k]. Completions come per element (Completion.index).
  Status IrecvGroup(uint64_t now, int n, void* const* bufs, const size_t* caps, const int* tags,
                    const MrHandle* const* mhs, void* owner, bool* posted, void** slots);
  void OnRailEvent(int rail, bool down);
  // A side link (above), driven from now on (not owned: the comm keeps it, and it outlives the driver's
  // last call).
  void AddSideLink(SideRecvLink* side) { side_.push_back(side); }
  void Progress(uint64_t now);
  bool NextCompletion(net::Completion* out);
  // The sender closed the connection (the plugin's bootstrap stream ended): every live link counts as
  // closed by the peer, so the core ends in kPeerClosed, or fails a receive still pending.
  void OnPeerClosed(uint64_t now, const std::string& why);
  // Every control frame queued so far was posted and its SEND completed: closing now loses no ack.
  bool Quiet() const;
  // A link the core dropped (its QPs are in ERR now), with its new epoch, once each: the comm
  // announces it on the bootstrap stream.
  bool NextDropped(int* link, uint32_t* epoch);

  struct Stats {
    uint64_t placed_written = 0;  // headers of chunks the sender wrote in place
    uint64_t placed_copied = 0;   // chunks copied from a bounce buffer (eager, re-sent)
    uint64_t discarded = 0;       // duplicates dropped
    uint64_t guarded = 0;         // links moved to ERR because the core dropped them
    uint64_t wc_errors = 0;
    std::vector<uint64_t> rail_bytes;  // per local rail: payload bytes placed (written or copied), as
                                       // TCP counts the payload it reads (the board's "received")
  };
  const Stats& stats() const { return stats_; }
  bool connected(int link) const { return link < static_cast<int>(links_.size()) && links_[link].up; }
  // An IB link is up (side links do not count).
  bool AnyLinkUp() const {
    for (const Link& l : links_) {
      if (l.up) return true;
    }
    return false;
  }
  // The local rail a link was accepted on (-1: no such link yet).
  int link_rail(int link) const { return link >= 0 && link < static_cast<int>(links_.size()) ? links_[link].rail : -1; }
  // The port monitor last reported this rail's port down (Accept refuses links on it).
  bool rail_down(int rail) const {
    return rail >= 0 && static_cast<size_t>(rail) < rail_down_.size() && rail_down_[rail];
  }

 private:
  struct Out {
    uint8_t bytes[sizeof(IbCts)];
    uint32_t len;
  };
  struct Link {
    std::unique_ptr<IbLink> ib;
    int rail = -1;
    uint32_t chunk = 0;
    bool up = false;
    // A message of the sender arrived on this incarnation: its QPs are past RTR. Until then nothing is
    // posted here (the sender connects its QPs when our answer reaches it; a SEND that arrives at a QP
    // still in INIT is dropped and retried only after the ACK timeout, RETRY_EXC_ERR if the sender is
    // slower than timeout x retries). The sender speaks first: a heartbeat as soon as it connected.
    bool heard = false;
    std::deque<Out> out;  // CTS records and control frames, in order, for stream 0
  };
  struct RxBuf {
    uint64_t seq = UINT64_MAX;
    uint8_t* buf = nullptr;
    size_t cap = 0;
    IbCts cts{};
  };
  struct Held {  // a frame with its payload, waiting for its receive (kWait)
    int link, stream;
    uint32_t slot;
    net::Frame hdr;
    const uint8_t* payload;
  };

  void LinkError(uint64_t now, int idx, const std::string& why);
  void OnRecv(uint64_t now, int idx, const IbLink::Event& ev);
  // Handles one frame; false when it must stay in its bounce buffer (kWait).
  bool Deliver(uint64_t now, int idx, int stream, const net::Frame& h, const uint8_t* payload);
  void Guard();
  void Queue(Link& l, const void* p, uint32_t len);
  void FlushOut(uint64_t now, int idx);
  void RetryHeld(uint64_t now);
  // Hands the port events queued by OnRailEvent to the core and records each rail's last state.
  void ApplyRailEvents(uint64_t now);

  net::RecvCore* core_;
  std::vector<IbDevice*> rails_;
  IbLinkConfig cfg_;
  std::vector<Link> links_;
  std::vector<SideRecvLink*> side_;
  RxBuf rx_[net::RxTracker::kWindow];
  std::vector<Held> held_;
  std::mutex events_mu_;
  std::vector<std::pair<int, bool>> events_;
  // The port monitor's last word per rail: a link is not accepted on a port it said is down (its QP
  // would fail LOC_QP_OP_ERR at the first post, a second failover for one fault).
  std::vector<bool> rail_down_;
  std::vector<IbLink::Event> evs_;
  std::vector<std::pair<int, uint32_t>> dropped_;  // Guard's links, not yet announced (NextDropped)
  Stats stats_;
};

}  // namespace rr::ib
