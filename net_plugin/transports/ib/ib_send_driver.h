// rerail — the IB driver of a SendCore (core.h "RDMA"): the core's frames go out as verbs work
// requests on the links' RC QPs, completions and the receiver's control messages come back as inputs.
// The IB counterpart of SendComm's TCP loop (send_comm.cc); what travels is described in ib_wire.h.
//
// Contract
//   * One driver per SendCore, which it does not own; links[i] is the local device of the core's link i
//     (rail = the index of that device in MrHandle::keys, peer_rail = the receiver's rail to dial). The
//     core's kConnect runs the handshake through the IbDialer (answered at once in-process, or later
//     over the plugin's TCP bootstrap stream: the link stays connecting meanwhile) and (re)creates the
//     link's QPs: RESET -> INIT -> RTR -> RTS on both ends — the failback path is the same as the
//     first connect. kClose moves its QPs to ERR and forgets a handshake still pending.
//   * Isend() wraps SendCore::Isend and remembers the buffer's registration (an MrHandle of the
//     sender's MrCache over the same rails) for the RDMA writes of its chunks.
//   * Progress(now) = PollCompletions(now) then Push(now): one pass of core.h's driver loop. The first
//     feeds completions (successful sends count as acknowledged bytes; a WC error other than a flush is
//     OnLinkError; flushes after it are ignored), the receiver's CTS records and control frames; the
//     second applies rail events (OnRail), samples, Poll, link commands and writes frames (NextTx) while
//     a stream's send queue has room for a WRITE + its header, the peer has a receive credit for the
//     header (ib_wire.h) and a staging buffer is free.
//   * Fences: a chunk re-sent after link L failed must reach the receiver after the receiver dropped L
//     (so its QPs are in ERR before the message completes and no late write of L can land after NCCL
//     reuses the buffer, see IbRecvDriver). The driver therefore writes L's link-down notice on EVERY
//     stream of every usable link when L is closed, and on every stream of a link that (re)connects for
//     every link then failed, before any other frame on that stream: RC orders each stream, the
//     receiver's core drops L on the first notice, duplicates are stale by epoch.
//   * Side links (SideSendLink, below): core links that do not travel over verbs (an IB comm's TCP link,
//     RERAIL_IB_TCP_FALLBACK). They follow the IB links in the core's link order, take their commands
//     from this driver, run once per Push after the IB links, and are fenced like them (a failed link's
//     notice on every stream of every survivor). A chunk's first hand-out decides RDMA WRITE vs SEND
//     whichever link it took, so a chunk first sent over TCP is re-sent over IB as a SEND. With side
//     links a credit may arrive on a link that carries no CTS (TCP) before the CTS arrives on an IB
//     link: such a fresh chunk travels as a SEND with its payload (as a re-send does).
//   * Errors: a fresh chunk with no CTS (no side link) or no registration aborts the connection (a
//     protocol or usage bug, never a fault); a failed post fails the link. Inputs never throw.
//   * Thread-safety: one thread drives the driver and its core (NCCL's progress thread), except
//     OnRailEvent, which any thread may call (the IbEventMonitor's).
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

// The handshake seam: delivers a sender's hello to the receiver's driver (IbRecvDriver::Accept) and
// brings back its answer. Either at once (in-process, tests) or later (the plugin's TCP bootstrap
// stream, ib_comm.h): Dial() sets *answered when *answer is already filled; otherwise the driver asks
// Poll(link) on every Push() until it answers. Answers of one link come in the order of its hellos; an
// answer whose epoch is not the one the driver waits for is stale (a re-dial overtook it) and dropped.
// An error from either call fails that connect attempt (the core re-probes with back-off).
class IbDialer {
 public:
  virtual ~IbDialer() = default;
  virtual Status Dial(uint64_t now, const IbLinkHello& hello, IbLinkHello* answer, bool* answered) = 0;
  virtual Status Poll(uint64_t now, int link, IbLinkHello* answer, bool* answered) {
    (void)now, (void)link, (void)answer;
    *answered = false;
    return Status::Internal("this dialer answers every hello at once");
  }
};

// What a side link asks of the driver that runs it.
class SideSendHost {
 public:
  virtual ~SideSendHost() = default;
  // Carries out the core's commands (after an input that may have queued some: OnLinkUp, OnControl,
  // OnLinkError; never inside Connect / Close, which the drain itself calls).
  virtual void DrainCommands(uint64_t now) = 0;
  // SendCore::NextTx for the side link, with each chunk's first hand-out noted (see the header).
  virtual bool NextTx(uint64_t now, int link, net::TxFrame* out) = 0;
};

// A core link that does not travel over verbs (the header). Its object feeds the core directly
// (OnLinkUp, OnControl, OnLinkError, OnConnectFailed) and calls host()->DrainCommands after each.
class SideSendLink {
 public:
  virtual ~SideSendLink() = default;
  void Bind(net::SendCore* core, int link, SideSendHost* host) { core_ = core, link_ = link, host_ = host; }
  virtual void Connect(uint64_t now, uint32_t epoch) = 0;  // the core's kConnect: (re)connect
  virtual void Close(const net::Frame& notice) = 0;        // the core's kClose: notice (best effort), drop
  virtual void Fence(const net::Frame& notice) = 0;        // before any other frame on each of its streams
  virtual bool up() const = 0;                             // connected and not closed
  virtual void Pass(uint64_t now) = 0;                     // connect progress, control in, frames out
  virtual net::LinkSample Sample() = 0;

 protected:
  net::SendCore* core_ = nullptr;
  int link_ = -1;
  SideSendHost* host_ = nullptr;
};

// The link-down notices a link that (re)connects writes first on each of its streams: one for every
// other link the core has failed (fences, above).
std::vector<net::Frame> FailedLinkNotices(const net::SendCore& core, int except);

struct IbSendLinkSpec {
  IbDevice* dev = nullptr;  // the local device of the link (not owned; outlives the driver)
  int rail = 0;             // its index in MrHandle::keys (and the core's LinkSpec::rail)
  int peer_rail = 0;        // which of the receiver's rails the link connects to
};

class IbSendDriver final : private SideSendHost {
 public:
  // cfg: streams and QP options of every link (recv/stage sizes are set by the driver).
  IbSendDriver(net::SendCore* core, std::vector<IbSendLinkSpec> links, const IbLinkConfig& cfg, uint32_t chunk,
               IbDialer* dialer);
  ~IbSendDriver();

  // tag: NCCL's, matched against the receiver's announced elements in grouped mode (core.h).
  Status Isend(uint64_t now, const void* data, size_t size, const MrHandle* mh, void* owner, bool* posted, int tag = 0);
  void OnRailEvent(int rail, bool down);
  // A side link (above); it becomes the core's link links + (side links added before). Before the first
  // Progress: the core's first kConnect of it is drained then.
  void AddSideLink(std::unique_ptr<SideSendLink> side);
  // The receiver closed the connection (the plugin's bootstrap stream ended): every link counts as
  // closed by the peer, so the core ends in kPeerClosed (everything acknowledged) or fails.
  void OnPeerClosed(uint64_t now, const std::string& why);
  void Progress(uint64_t now) {
    PollCompletions(now);
    Push(now);
  }
  void PollCompletions(uint64_t now);
  void Push(uint64_t now);

  // Counters for tests and logs.
  struct Stats {
    uint64_t written = 0;   // chunks written by RDMA WRITE (+ header SEND)
    uint64_t staged = 0;    // chunks sent with their payload (eager or re-sent)
    uint64_t resent = 0;    // of which re-sends
    uint64_t wc_errors = 0; // send/receive completions with an error other than a flush
    uint64_t connects = 0;  // successful (re)connects
    uint64_t link_chunks[16] = {};  // data chunks written or sent per link
    std::vector<uint64_t> rail_bytes;  // per local rail (IbSendLinkSpec::rail): frames posted, header +
                                       // payload, as TCP counts the bytes it writes (the board's "sent")
  };
  const Stats& stats() const { return stats_; }
  bool connected(int link) const {
    return link < static_cast<int>(links_.size()) ? links_[link].up : side_[link - links_.size()]->up();
  }

 private:
  struct Link {
    IbSendLinkSpec spec;
    std::unique_ptr<IbLink> ib;
    bool up = false;  // connected and not closed by the core
    bool dialing = false;     // a hello is out, its answer not in yet
    uint32_t dial_epoch = 0;  // the epoch that hello carried
    int peer_rail = 0;
    std::vector<std::deque<net::Frame>> fence;  // notices to write first, per stream
  };
  struct TxBuf {
    uint64_t seq = UINT64_MAX;
    const uint8_t* data = nullptr;
    size_t size = 0;
    const MrHandle* mh = nullptr;
  };

  void DrainCommands(uint64_t now) override;
  bool NextTx(uint64_t now, int link, net::TxFrame* out) override;
  SideSendLink* Side(int idx) const {
    return idx >= static_cast<int>(links_.size()) ? side_[idx - links_.size()].get() : nullptr;
  }
  // A fresh chunk's CTS on link l is known.
  bool HasCts(const Link& l, const net::Frame& h) const;
  void Connect(uint64_t now, int idx, uint32_t epoch);
  void PollDials(uint64_t now);
  void Answered(uint64_t now, int idx, const IbLinkHello& answer);
  void ConnectFailed(uint64_t now, int idx, const Status& st);
  void Close(int idx, const net::Frame& notice);
  void LinkError(uint64_t now, int idx, const std::string& why);
  void OnRecv(uint64_t now, int idx, const IbLink::Event& ev);
  bool FlushFences(int idx);
  int PickStream(Link& l);
  void Write(uint64_t now, int idx, int stream, const net::TxFrame& tx);
  bool IsFresh(const net::Frame& h);
  Status PostData(Link& l, int stream, const net::TxFrame& tx, bool fresh);

  net::SendCore* core_;
  std::vector<Link> links_;
  std::vector<std::unique_ptr<SideSendLink>> side_;  // core links links_.size() ..
  IbLinkConfig cfg_;
  uint32_t chunk_;
  IbDialer* dialer_;
  TxBuf tx_[net::RxTracker::kWindow];
  IbCts cts_[net::RxTracker::kWindow]{};
  uint64_t fresh_seq_ = 0, fresh_off_ = 0;  // the next chunk the core hands out for the first time
  std::mutex events_mu_;
  std::vector<std::pair<int, bool>> events_;
  std::vector<IbLink::Event> evs_;  // scratch
  Stats stats_;
};

}  // namespace rr::ib
