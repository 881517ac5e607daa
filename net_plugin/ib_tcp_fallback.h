// rerail — the TCP link of an IB connection (RERAIL_IB_TCP_FALLBACK; issue 12, scope 5): IB links and
// one TCP link to the same peer in one comm, so a comm whose IB ports all fail goes on over TCP and
// goes back to IB when a port returns.
//
// The connection's core (core/core.h) gets one more link after its IB links: a last-resort link
// (SendCore::LinkSpec::last_resort), connected, heartbeated and failed back like any other, which the
// scheduler gives chunks only while no IB link is usable. So:
//   * failover IB -> TCP: the last IB link fails (WC error, port event, stall: the TCP link is a live
//     link, so the last IB link is failed like any other), its unacknowledged chunks are re-sent on the
//     TCP link with their payload; a chunk whose message the receiver already completed is dropped
//     there (kDiscard), as over TCP. The IB driver fences the TCP link too: the failed IB link's
//     notice precedes every re-sent chunk on each TCP stream, so the receiver has put that link's QPs
//     in ERR before it completes a message with a re-sent chunk (ib_send_driver.h);
//   * failback TCP -> IB: the IB link's probe is answered (port up), it is usable again, and the next
//     chunk goes to it; the TCP link keeps only what it carried until acknowledged. A chunk first
//     handed to the TCP link is re-sent over IB as a SEND, never written in place.
//   * the TCP link is an ordinary rerail TCP link (transports/tcp/: hello with the listen handle's
//     nonce and the job secret, RERAIL_TCP_STREAMS streams, wire.h's frames) to the listener's bootstrap
//     address, link index = the number of IB links. The listener routes it to its comm by connection id
//     (ListenHub, as TCP comms do); the sender dials it only once the receiver answered on the bootstrap
//     stream, i.e. once the receiver's comm exists (so it never arrives before its bootstrap stream).
//
// Cost while IB works: per connection RERAIL_TCP_STREAMS more sockets, the core's heartbeats on them
// (every RERAIL_HEARTBEAT_MS while a send waits, both ways), an ack copy when fewer than two IB links live.
//
// Contract: one thread drives a link (NCCL's progress thread, through the IB drivers), as conn.h.
// Errors: a socket error fails the link in the core (re-probed with back-off); nothing here fails the
// connection. Logs: the core's WARN when the TCP link starts carrying data, INFO when IB takes over
// again (core.h "Last-resort links").
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "transport.h"
#include "transports/ib/ib_recv_driver.h"
#include "transports/ib/ib_send_driver.h"
#include "transports/ib/ib_wire.h"

namespace rr::net {

// The load-table slot (SendCore::LinkSpec::rail, RecvCore rail) of TCP interface `dev` in IB mode:
// after the IB devices' slots (an IbCts carries keys for at most kCtsRails of them). No rail event
// ever names it (the IB port monitor publishes IB slots only).
inline int IbTcpRail(int dev) { return std::min(ib::kCtsRails + dev, kMaxRails - 1); }

// Where a sender's TCP link goes (plugin_ib.cc fills it).
struct IbTcpPlan {
  Transport* transport = nullptr;  // null: no TCP link
  int dev = -1;                    // local TCP device (the bootstrap's)
  sock::Addr remote;               // the listener's bootstrap address
  int remote_rail = 0;             // its rail in the listener's handle (0: the bootstrap address)
  int streams = 2;                 // RERAIL_TCP_STREAMS
  Nonce nonce{};
  uint32_t chunk = 0;
  bool grouped = false;            // RERAIL_MAX_RECVS > 1 (the TCP hello's kHelloFlagGrouped)
  std::function<bool()> may_dial;  // true once the receiver's comm exists (it answered on the bootstrap)
};

// The sender's end: writes the core's frames for it (fences first), reads its control frames.
class IbTcpSendLink final : public ib::SideSendLink {
 public:
  explicit IbTcpSendLink(IbTcpPlan plan) : plan_(std::move(plan)) {}
  void Connect(uint64_t now, uint32_t epoch) override;
  void Close(const Frame& notice) override;
  void Fence(const Frame& notice) override;
  bool up() const override { return tcp_ != nullptr; }
  void Pass(uint64_t now) override;
  LinkSample Sample() override;

 private:
  struct Stream {
    bool busy = false;
    bool fenced = false;          // the frame in progress is a fence notice (the core does not know it)
    TxFrame f{};
    size_t done = 0;              // bytes of header + payload written
    std::deque<Frame> fences;     // notices to write before anything else
  };
  void Dial(uint64_t now);
  void PollConnector(uint64_t now);
  void Write(int s, uint64_t now, bool* progressed);
  void ReadControl(uint64_t now);
  void Error(uint64_t now, const std::string& why, bool peer_closed);

  IbTcpPlan plan_;
  bool dial_due_ = false;  // a kConnect waits for plan_.may_dial
  uint32_t epoch_ = 0;
  std::unique_ptr<Connector> connector_;
  std::unique_ptr<Link> tcp_;
  std::vector<Stream> tx_;
  std::array<uint8_t, 16 * sizeof(Frame)> in_{};  // control frames read ahead: in_[in_pos_, in_end_)
  size_t in_pos_ = 0, in_end_ = 0;
};

// The receiver's end: the comm attaches each (re)connection of the link; reads frames into the posted
// buffers (or the core's stash, or a sink), writes the core's control frames on stream 0.
class IbTcpRecvLink final : public ib::SideRecvLink {
 public:
  IbTcpRecvLink(RecvCore* core, int link) : core_(core), idx_(link) {}
  // A (re)connection of this link: replaces the one before; false when the core refused it (stale).
  bool Attach(std::unique_ptr<Link> tcp, uint64_t now);
  int link() const override { return idx_; }
  bool Read(uint64_t now) override;
  void Flush(uint64_t now) override;
  void Sync() override;
  LinkSample Sample() override;
  bool up() const override { return tcp_ != nullptr; }
  bool Quiet() const override { return tcp_ == nullptr || !out_busy_; }

 private:
  struct Stream {
    Frame hdr{};
    size_t hdr_got = 0;       // header bytes read
    bool have_hdr = false;    // hdr is whole and not yet taken by the core (kWait: parked)
    bool payload = false;     // reading the payload of hdr
    uint8_t* dst = nullptr;   // null: discard
    size_t remaining = 0;
  };
  bool ReadStream(int s, uint64_t now);
  void Error(uint64_t now, const std::string& why, bool peer_closed);
  void ReadFailed(uint64_t now, IoState st, int err);   // a read that ended the link: closed or failed

  RecvCore* core_;
  int idx_;
  std::unique_ptr<Link> tcp_;
  std::vector<Stream> rx_;
  std::vector<uint8_t> sink_;  // dropped payloads
  Frame out_{};                // control frame being written
  bool out_busy_ = false;
  size_t out_done_ = 0;
};

}  // namespace rr::net
