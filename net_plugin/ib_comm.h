// rerail — NCCL connections over IB verbs (RERAIL_TRANSPORT=ib, issue 12 stage 3): the plugin's IB
// devices and registrations (IbContext), and the send / receive / listen comms that drive a SendCore /
// RecvCore through the IB drivers (transports/ib/ib_send_driver.h, ib_recv_driver.h).
//
// The bootstrap: every IB connection has ONE TCP stream between the two processes, made by the TCP
// transport exactly as a TCP link is (listen handle, nonce, job secret, authenticated hello), used for
// nothing but the IB link handshakes. The sender writes each link's IbLinkHello (QP endpoints, epoch,
// rail) on it whenever the core connects or re-connects a link (first connect and every failback), the
// receiver answers each with its own IbLinkHello after its QPs are ready (IbRecvDriver::Accept; a
// refused hello is answered with magic 0, same link and epoch). Fixed 544-byte records in both
// directions, host byte order (both ends run the same build), in order. Data never travels on it.
//
// The listen handle (handle.h) of an IB listener: entry 0 = the bootstrap address (the TCP device of
// the listener's primary TCP rail) with rail = the listener's IB device; entries 1.. = the same address
// with the listener's other IB devices as rails (up to kMaxAddrs in all). The sender pairs its own IB
// devices (NCCL's device first, then the others in order) with those rails in order: link k runs from
// its k-th device to the listener's k-th rail (rail-optimised when both sides list the same devices
// and NCCL uses the same device index on both).
//
// Contract
//   * Both ends must run with RERAIL_TRANSPORT=ib. An IB listener refuses a TCP sender's link (more than
//     one stream: WARN), and either IB end takes a bootstrap record that starts with anything but the
//     IbLinkHello magic (or 0, a refusal) for a TCP-mode peer: one WARN naming RERAIL_TRANSPORT, then the
//     connection ends as if the peer closed it. A TCP-mode end sees a bad frame magic. Nothing misreads data.
//   * Memory: RegMr registers through IbContext::mrs on the PD of every IB device (MrCache), so any
//     link of any comm can use any registration; the handle NCCL gets is an MrHandle*.
//   * Threading as conn.h: setup on NCCL's proxy service thread, the data path (Isend/Irecv/Test) on
//     its progress thread, one thread per comm at a time; the IbContext outlives every comm.
//   * Port events: the plugin's IbEventMonitor (one thread over every IB device) publishes port down /
//     up / device fatal into the plugin's RailSignals (slot = IB device = NCCL device); each comm polls
//     them lock-free at every call, as the TCP comms do for rtnetlink events, and hands the changes of
//     its rails to its driver (OnRailEvent) before anything else.
//   * Close: the end of the bootstrap stream (EOF, reset) is the peer closing the connection or dying:
//     every link counts as closed by the peer (the core's kPeerClosed when nothing is outstanding, else
//     the connection fails and pending requests return ncclRemoteError), as TCP's close / RST does.
//     A closing receiver first drives I/O until its queued acks were sent (bounded, 1 s).
//   * Rail-health board (RERAIL_BOARD): slot = IB device; port events, failovers (with re-sent chunks),
//     failbacks and bandwidth estimates of the send comms, bytes sent (frames posted) and received
//     (payload placed) per rail, as for TCP rails. Profiler (NCCL's callback):
//     IO spans of every isend / irecv with a step handle, the send comms' failover / retransmit /
//     failback / rail-state events and the receive comms' failover events, as SendComm / RecvComm
//     emit them.
//   * RERAIL_IB_TCP_FALLBACK: the send comm's core has one more link after the IB links, over TCP, used
//     only while no IB link is usable (ib_tcp_fallback.h). The listener routes incoming TCP links by
//     connection id (ListenHub): the first one of a connection is its bootstrap stream (link 0, one
//     stream), the others (link >= 1) go to that connection's recv comm as its TCP link (looked for every
//     2 ms once a hello carried kIbHelloFlagTcpLink, every 100 ms before). The TCP link's events skip the
//     board (it has slots for the IB devices only); the profiler gets them with rail = its load slot.
//   * Not done yet (net_plugin/README.md "IB in the plugin"): a timeout on an unanswered handshake.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "conn.h"
#include "ib_tcp_fallback.h"
#include "listen_hub.h"
#include "transports/ib/ib_device.h"
#include "transports/ib/ib_devices.h"
#include "transports/ib/ib_events.h"
#include "transports/ib/ib_mr_cache.h"
#include "transports/ib/ib_recv_driver.h"
#include "transports/ib/ib_send_driver.h"

namespace rr::net {

// The plugin's IB side: one IbDevice (context + PD) per offered port, their NCCL device descriptions,
// and the registration cache over all of them. Created at the first init with RERAIL_TRANSPORT=ib.
struct IbContext {
  std::vector<std::unique_ptr<ib::IbDevice>> devs;
  std::vector<DeviceInfo> info;  // NCCL devices, same index as devs
  std::unique_ptr<ib::VerbsRegistrar> reg;
  std::unique_ptr<ib::MrCache> mrs;
  ib::IbLinkConfig link;  // QPs per link and QP options of every link
  std::unique_ptr<ib::IbEventMonitor> monitor;  // from the first init to the last finalize

  // Opens every port of `d` (at most kCtsRails); InvalidUsage when none can be used.
  static Status Open(const ib::IbDiscovery& d, std::unique_ptr<IbContext>* out);
  std::vector<ib::IbDevice*> rails() const;
};

// The bootstrap stream of one IB connection: whole IbLinkHello records in both directions over one
// TCP stream (non-blocking; writes are buffered until the stream takes them).
class IbBootstrap {
 public:
  explicit IbBootstrap(std::unique_ptr<Link> link) : link_(std::move(link)) {}
  void Send(const ib::IbLinkHello& h);
  // Writes what is buffered, then reads; *got once a whole record arrived. Errors are final.
  Status Next(ib::IbLinkHello* h, bool* got);
  const Link& link() const { return *link_; }
  // Writes what the stream takes now (Next does it too); an error is final and Next reports it.
  Status Flush();

 private:
  std::unique_ptr<Link> link_;
  std::vector<uint8_t> out_;
  size_t out_done_ = 0;
  uint8_t in_[sizeof(ib::IbLinkHello)];
  size_t in_got_ = 0;
  Status error_;
};

class IbSendComm final : public Comm, private CoreObserver, private ib::IbDialer {
 public:
  // plan: the links (local device, listener rail); boot: the bootstrap stream being connected; tcp: the
  // TCP link after the IB links (RERAIL_IB_TCP_FALLBACK; transport null: none).
  IbSendComm(const ConnConfig& cfg, IbContext* ib, uint64_t conn_id, std::vector<ib::IbSendLinkSpec> plan,
             std::unique_ptr<Connector> boot, IbTcpPlan tcp);
  ~IbSendComm() override;
  // NCCL's connect polling: *ready once a link is up, i.e. the receiver answered a hello (as NCCL's
  // own IB connect waits for the remote QP info), or RERAIL_CONNECT_TIMEOUT_MS after the bootstrap
  // stream came up without one (the core's give-up rules then decide); with a TCP link, also once it
  // was up for the connect grace (1 s) with no IB link (every IB port down at connect).
  Status PollConnect(bool* ready);
  // phandle: NCCL's profiler step handle (may be NULL), as SendComm::Isend.
  // tag: NCCL's (grouped receives, core.h).
  Status Isend(const void* data, size_t size, int tag, ib::MrHandle* mh, void* phandle, Request** req);
  Status Test(Request* r, int* done, int* size) override;

 private:
  Status Progress();
  uint64_t IdleProgress() override;
  // CoreObserver: the rail-health board and the profiler (rail = the link's local IB device).
  void OnFailover(int link, const std::string& why, uint64_t bytes, uint64_t chunks, int to_link, uint64_t stall_ns,
                  bool was_probing) override;
  void OnRetransmit(int to_link, uint64_t bytes, uint64_t chunks) override;
  void OnFailback(int link) override;
  void OnLinkState(int link, LinkState from, LinkState to, const std::string& why) override;
  void OnBandwidth(int link, uint64_t bytes_per_s) override;
  Status PumpBoot();  // the answers that arrived, into answers_; an error = the bootstrap ended
  Status Dial(uint64_t now, const ib::IbLinkHello& hello, ib::IbLinkHello* answer, bool* answered) override;
  Status Poll(uint64_t now, int link, ib::IbLinkHello* answer, bool* answered) override;
  int RailOf(int link) const;  // the local rail (board slot, profiler rail) of a core link
  // The config its reports go through: the TCP link's have no board (its rail has no slot there).
  const ConnConfig& ReportCfg(int link) const;

  ConnConfig cfg_;
  IbContext* ib_;
  IbTcpPlan tcp_;           // transport null: no TCP link
  ConnConfig tcp_report_cfg_;
  bool boot_heard_ = false; // the receiver answered on the bootstrap: its comm exists (the TCP link may dial)
  std::vector<uint64_t> rail_gen_;  // RailSignals generation per IB device when last looked at
  std::vector<ib::IbSendLinkSpec> plan_;
  std::unique_ptr<Connector> connector_;
  std::unique_ptr<IbBootstrap> boot_;
  uint64_t boot_ns_ = 0;    // when the bootstrap stream came up (PollConnect's bound)
  bool boot_dead_ = false;  // ended: the receiver closed; the links were told (OnPeerClosed)
  std::vector<std::deque<ib::IbLinkHello>> answers_;  // per link, arrived and not yet taken
  std::unique_ptr<SendCore> core_;
  std::unique_ptr<ib::IbSendDriver> drv_;  // after core_: destroyed first
  std::vector<uint64_t> board_bytes_;      // per rail: the driver's byte count last put on the board
};

class IbRecvComm final : public Comm, private CoreObserver {
 public:
  // more: the connection's further TCP links (ListenHub), i.e. its TCP link (RERAIL_IB_TCP_FALLBACK).
  IbRecvComm(const ConnConfig& cfg, IbContext* ib, std::unique_ptr<Link> boot, std::unique_ptr<Listener> more);
  // Drives I/O (bounded) until the control frames already queued (the last acks) went out.
  ~IbRecvComm() override;
  // n buffers (n > 1: a grouped receive, core.h), mhs[k] registering data[k].
  Status Irecv(int n, void* const* data, const size_t* caps, const int* tags, ib::MrHandle* const* mhs, void* phandle,
               Request** req);
  Status Test(Request* r, int* done, int* size) override;
  // Answers the hellos that arrived (IbListenComm::Accept drives it before handing the comm out).
  Status Progress();
  uint64_t IdleProgress() override;
  // An IB link is up, or the TCP link (every IB port down at connect: the sender's connect returned too).
  bool AnyLinkUp() const;

 private:
  // CoreObserver: the profiler's receiver-side failover event (rail = the link's local IB device).
  void OnFailover(int link, const std::string& why, uint64_t bytes, uint64_t chunks, int to_link, uint64_t stall_ns,
                  bool was_probing) override;
  void PollTcpLinks(uint64_t now);  // attaches (re)connections of the TCP link

  ConnConfig cfg_;
  std::vector<uint64_t> rail_gen_;
  std::unique_ptr<Listener> more_;
  uint64_t next_more_poll_ns_ = 0;
  bool tcp_announced_ = false;  // a hello said the sender has a TCP link (kIbHelloFlagTcpLink)
  std::unique_ptr<IbTcpRecvLink> tcp_;  // the TCP link, once one arrived (the driver runs it)
  IbBootstrap boot_;
  bool boot_dead_ = false;  // ended: the sender closed; the links were told (OnPeerClosed)
  RecvCore core_;
  ib::IbRecvDriver drv_;  // after core_: destroyed first
  std::vector<uint64_t> board_bytes_;  // per rail: the driver's byte count last put on the board
};

class IbListenComm {
 public:
  IbListenComm(const ConnConfig& cfg, IbContext* ib, std::unique_ptr<Listener> l)
      : magic_(kIbListenCommMagic), cfg_(cfg), ib_(ib), hub_(std::make_shared<ListenHub>(std::move(l))) {}
  ~IbListenComm() { hub_->StopAccepting(); }
  IbListenComm(const IbListenComm&) = delete;
  IbListenComm& operator=(const IbListenComm&) = delete;
  uint32_t magic() const { return magic_; }
  // One more connection per call once its bootstrap stream arrived and a link is up (its hello
  // answered here: the sender's connect waits for that), or RERAIL_CONNECT_TIMEOUT_MS after the
  // bootstrap without one. A receiver that posts its first receive late thus still has its links
  // answered: before, they were answered only by the recv comm's own calls, and the sender gave up
  // after RERAIL_GIVEUP_MS with no link (conformance LatePostingIsNotAFailure over IB).
  Status Accept(std::unique_ptr<IbRecvComm>* out);

 private:
  // The next bootstrap stream (a new connection's link 0, one stream); a TCP link that overtook its
  // bootstrap waits in early_ for it (the sender dials it once the bootstrap was answered, or after the
  // connect grace: a bootstrap delayed longer on the network comes second).
  Status NextBootstrap(std::unique_ptr<Link>* boot, std::deque<std::unique_ptr<Link>>* early);
  struct Early {
    uint64_t conn;
    std::deque<std::unique_ptr<Link>> links;
    uint64_t since_ns;
  };

  uint32_t magic_;  // first member: read before the object is trusted (plugin.cc)
  ConnConfig cfg_;
  IbContext* ib_;
  std::shared_ptr<ListenHub> hub_;  // every TCP stream of this handle, by connection (listen_hub.h)
  std::unique_ptr<IbRecvComm> pending_;  // accepted bootstrap, no link up yet
  uint64_t pending_ns_ = 0;
  std::deque<Early> early_;
};

}  // namespace rr::net
