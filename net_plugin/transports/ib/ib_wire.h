// rerail — what the IB transport exchanges besides the core's Frames (core.h "RDMA", issue 12).
//
// 1. IbLinkHello: one link's handshake, each way once per (re)connect. The sender's driver fills it on
//    the core's kConnect (its QPs' endpoints, the link index and epoch); the receiver's driver answers
//    with its own QPs and the rail it put the link on. Fixed layout, host byte order (both ends run the
//    same code): the plugin carries it unchanged over the connection's TCP bootstrap stream (IbDialer
//    answered asynchronously, net_plugin/ib_comm.h); the driver tests hand it over in-process.
//
// 2. Traffic on the QPs of one link (stream i = QP i on both ends, RC, in order per QP):
//    sender -> receiver, on any stream:
//      * fresh data chunk: RDMA WRITE of the payload at cts.addr + offset (rkey of the receiver's rail)
//        then a 40-byte inline SEND of the Frame. RC executes them in order, so the receiver sees the
//        header only after the bytes are in place (its receive completes after the WRITE's data).
//      * a chunk with no usable CTS write: eager chunks (the payload is the core's copy, not NCCL's
//        registered buffer) and every RE-SENT chunk: one SEND of Frame + payload into a bounce buffer;
//        the receiver copies it to RecvCore's action.dst, or drops it (kDiscard). A re-send never
//        writes into NCCL's buffer by RDMA: the receiver may have completed the message already (the
//        chunk landed, only the transport's ack was lost) and NCCL may own the buffer again.
//      * payload-less frames (heartbeats, link-down notices, zero-length chunks): a 40-byte inline SEND.
//    receiver -> sender, on stream 0 only: 40-byte control Frames (acks + credits, heartbeats, link-down
//      notices) and 64-byte IbCts records, each one inline SEND.
//    The two are told apart by length: a receive of exactly sizeof(Frame) is a header (its payload, if
//    any, was written); sizeof(Frame) + hdr.len carries its payload; sizeof(IbCts) with kCtsMagic is a CTS.
//    IbCredit records (4.) go both ways on stream 0 and are 48 bytes, as is a Frame with an 8-byte
//    payload: a 48-byte receive is a credit only when its first word is kCreditMagic.
//
// 3. IbCts ("clear to send", NCCL net_ib's FIFO entry) — published by SEND, not by RDMA write into a
//    sender-side ring: the receive of a SEND is an event the sender's progress already polls for, it
//    is ordered on stream 0 with the ack that carries the credit (so the sender never holds a credit
//    for a receive whose address it lacks), and a ring would need its own flow control and a second
//    rkey in the handshake. The receiver publishes a CTS on every live link at Irecv, and re-publishes
//    every posted, incomplete receive on a link when it (re)connects, before any ack on it: a credit
//    learnt on a link is always preceded on that link by the CTS of every receive it covers.
//
// 4. Receive credits: a SEND needs a posted receive, and a receive is re-posted only when the peer's
//    driver runs (NCCL calls test()). A SEND waiting for one (RNR) would have bytes in flight that do not
//    advance while the peer is merely unpolled, and the stall watchdog would take that for a black hole.
//    So each end posts a SEND on a stream only within the peer's credit: the receives it posted at
//    connect (IbLinkHello::recv_slots) plus the re-posts it reported since in IbCredit records (48-byte
//    inline SENDs on stream 0, cumulative counts per stream mod 2^16). The last credit of a stream is
//    kept for IbCredit records, so two ends that both wait for credit can always tell each other. A
//    record goes out once a quarter of a stream's receives were re-posted since the last one (not each:
//    records consume receives too, and reporting those at once would never end). With the peer
//    unpolled, everything posted is acknowledged by its HCA and nothing waits in flight; a black hole
//    still leaves the last SENDs unacknowledged for the watchdog.

#pragma once

#include <cstdint>
#include <cstring>

#include "wire.h"
#include "transports/ib/ib_qp.h"

namespace rr::ib {

constexpr uint32_t kIbHelloMagic = 0x4c424952u;  // "RIBL"
constexpr uint32_t kCtsMagic = 0x53544352u;      // "RCTS"
constexpr int kCtsRails = 8;                     // receiver rails a CTS carries keys for
constexpr uint32_t kCreditMagic = 0x52435252u;   // "RRCR"
// 2: the sender speaks first on a new link (a heartbeat once its QPs are connected) and the receiver
// posts nothing before it heard it; a version-1 peer (receiver sending at once) is refused.
// 3: the receiver also announces each link it dropped on the bootstrap stream (a record with
// streams = 0, epoch = the dropped incarnation's successor): a notice on the IB links themselves is
// lost when they all fail at once, and a sender with nothing in flight on a link whose receiver put
// its QP in ERR never sees it die (it waits for a CTS that cannot come).
constexpr uint16_t kIbHelloVersion = 3;
// A sender in grouped mode (RERAIL_MAX_RECVS > 1; core.h "Grouped receives") sets kIbHelloFlagGrouped and
// writes version 4, so a receiver older than grouped receives refuses the hello ("bad hello") instead of
// never announcing its receives; without it the hello is byte-identical to version 3.
constexpr uint16_t kIbHelloVersionGrouped = 4;
constexpr uint16_t kIbHelloFlagGrouped = 1;
// The sender's connection also has a TCP link after its IB links (RERAIL_IB_TCP_FALLBACK, net_plugin/
// ib_tcp_fallback.h): the receiver looks for it on its listener from then on. Any version; a receiver
// older than it ignores it (and never reads that link).
constexpr uint16_t kIbHelloFlagTcpLink = 2;

struct IbLinkHello {
  uint32_t magic;      // kIbHelloMagic
  uint16_t version;    // kIbHelloVersion
  uint8_t link;        // link index within the connection
  uint8_t streams;     // QPs (1..kMaxStreams)
  uint64_t conn_id;
  uint32_t epoch;      // the link's epoch (sender -> receiver); echoed back
  uint8_t rail;        // the writer's own rail (receiver's answer: the index of its rkey in an IbCts)
  uint8_t peer_rail;   // sender -> receiver: which of the receiver's rails the link goes to
  uint16_t flags;      // kIbHelloFlagGrouped (sender -> receiver); 0 otherwise
  uint32_t chunk;      // the sender's chunk size (the receiver sizes its bounce buffers by it)
  uint32_t recv_slots; // receives the writer posts per receiving stream: the peer's first credit
  QpEndpoint ep[net::kMaxStreams];
};
static_assert(sizeof(IbLinkHello) == 32 + 32 * net::kMaxStreams, "IbLinkHello travels on the wire");

struct IbCts {
  uint32_t magic;   // kCtsMagic
  uint32_t rails;   // valid entries of rkey
  uint64_t seq;     // the message this receive is for
  uint64_t addr;    // the posted buffer (the virtual address the MRs were registered with)
  uint64_t cap;     // its size
  uint32_t rkey[kCtsRails];  // by the receiver's rail index (IbLinkHello::rail of its answer)
};
static_assert(sizeof(IbCts) == 64, "IbCts is one inline SEND");

struct IbCredit {
  uint32_t magic;    // kCreditMagic
  uint16_t streams;  // valid entries of posted
  uint16_t reserved;
  uint16_t posted[net::kMaxStreams];  // receives re-posted per stream since connect, mod 2^16
  uint64_t reserved2;                 // pads to 48 bytes
};
// A Frame with an 8-byte payload (eager chunk, re-send) is 48 bytes too and may come on stream 0:
// the receiver tells them apart by the first word (kCreditMagic is no kFrameMagic | type).
static_assert((kCreditMagic & 0xffff0000u) != net::kFrameMagic, "an IbCredit is never read as a Frame");
static_assert(sizeof(IbCredit) == 48, "IbCredit is one inline SEND");

// Whether a received message is an IbCredit record: its length and its first word (both drivers ask).
inline bool IsCreditRecord(const void* data, uint32_t len) {
  uint32_t magic = 0;
  if (len == sizeof(IbCredit)) std::memcpy(&magic, data, sizeof(magic));
  return magic == kCreditMagic;
}

}  // namespace rr::ib
