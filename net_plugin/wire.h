// rerail — what travels on a link's streams.
//
// Every stream starts with one Hello (sender → listener). After it, the sender → receiver direction of
// every stream carries Frames, each followed by `len` payload bytes; the receiver → sender direction of
// stream 0 carries payload-less control Frames (acks, heartbeats, epoch notices and, to a grouped
// sender, receive announcements: kPosted).
//
// magic_type = kFrameMagic | flags (bits 8..15) | type (bits 0..7). kFrameEager on a kData frame marks
// a chunk of an eager message (the sender holds a copy and already completed the send): the receiver
// may defer its ack. Flags are ignored by older code (TypeOf masks them), so frames stay unambiguous.
// Control frames (kAck, kHeartbeat, kLinkDown) have len 0. Frame fields for kData: conn = low 32 bits of the connection id, epoch = the link epoch the chunk was
// sent under, seq = message sequence number (0, 1, … in isend order = irecv posting order), offset/len =
// where the payload goes in the message, total = the message size. A chunk is at most the Hello's
// chunk_size and covers whole granules of ChunkGranule(chunk_size) bytes (the last chunk of a message
// may end inside one): a message smaller than a full chunk per link is cut into one chunk per link
// (SendCore::FreshChunk). Chunks of one message never overlap; a re-sent chunk is the same range again. For kAck: seq = number of messages
// completed in order (cumulative: every seq < ack is complete), offset = the receiver's credit: the number
// of receives it has posted (every seq < credit has a posted buffer). The sender writes chunks only of
// messages below the credit, so every chunk on a stream can be placed as soon as it arrives and a
// stream's head never waits for a receive: a re-sent chunk can never queue behind a chunk that the
// receiver cannot take yet (that deadlocked a failover while NCCL had not re-posted its slots).
// kHeartbeat carries the same two values. Host byte order (both ends of a rerail
// connection run the same code on the same architecture; the magic catches anything else).
#pragma once

#include <cstdint>

namespace rr::net {

constexpr uint32_t kHelloMagic = 0x4f4c4852u;  // "RHLO"
constexpr uint16_t kWireVersion = 2;  // 2: chunks of whole granules, not of chunk_size
constexpr uint32_t kFrameMagic = 0x52520000u;   // high 16 bits of Frame::magic_type
constexpr int kMaxStreams = 16;
// A full chunk is kChunkGranules granules; a chunk on a slower rail is fewer (at least one).
constexpr uint32_t kChunkGranules = 8;
inline uint32_t ChunkGranule(uint32_t chunk_size) { return chunk_size >= kChunkGranules ? chunk_size / kChunkGranules : 1; }

struct Hello {
  uint32_t magic;       // kHelloMagic
  uint16_t version;     // kWireVersion
  uint8_t stream;       // index of this stream within its link
  uint8_t nstreams;     // streams in the link (1..kMaxStreams)
  uint8_t nonce[16];    // must equal the listen handle's nonce
  uint64_t conn_id;     // random, chosen by the sender; groups the streams and links of one connection
  uint32_t chunk_size;  // sender's largest chunk (ChunkGranule of it: the receiver's bitmap granularity)
  uint8_t rail;         // rail (listener device index) this link runs on
  uint8_t link;         // link index within the connection
  uint16_t flags;       // kHelloFlag*; 0 from senders without RERAIL_JOB_SECRET
  uint32_t epoch;       // link epoch at connect time
  uint32_t check;       // xxh32 of the bytes before it
};
static_assert(sizeof(Hello) == 48, "Hello is 48 bytes on the wire");
// kHelloFlagTag: the hello is followed by a 32-byte HMAC-SHA256 of its 48 bytes keyed by RERAIL_JOB_SECRET
// (context kHelloTagContext). A listener with the secret accepts only hellos with a valid tag; one
// without it rejects hellos that carry one (the two ends are configured differently).
constexpr uint16_t kHelloFlagTag = 1;
// kHelloFlagGrouped (RERAIL_MAX_RECVS > 1 at the sender): this sender takes a sequence number only for an
// element the receiver announced with a kPosted frame (grouped receives, below). The receiver then
// announces every receive it posts. Without it a receive of n > 1 buffers is refused with a clear error;
// a listener older than this flag refuses the hello ("unknown hello flags").
constexpr uint16_t kHelloFlagGrouped = 2;
constexpr const char* kHelloTagContext = "rerail-net-hello-v1";

enum class FrameType : uint8_t {
  kData = 1,       // payload chunk of a message
  kAck = 2,        // cumulative message acknowledgement and credit (receiver → sender)
  kHeartbeat = 3,  // receiver → sender on every live link every RERAIL_HEARTBEAT_MS; seq = cumulative ack,
                   // offset = credit. Also sender → receiver on every usable link every RERAIL_HEARTBEAT_MS
                   // while a send waits (seq = messages posted, offset = acked; the receiver ignores it):
                   // bytes in flight for the sender's stall watchdog when it has no chunk to write; and
                   // once per message that waits for a credit, with kFrameWantCredit
  kLinkDown = 4,   // either direction, on a surviving link: seq = index of the link that failed,
                   // epoch = its new epoch (the peer drops that link and anything older)
  kPosted = 5,     // receiver -> sender, only to a kHelloFlagGrouped sender: one posted receive buffer
                   // (an element of a grouped irecv): seq = its message sequence number, offset = its
                   // capacity, total = PostedInfo(tag, n, k) (the element is the k-th of a group of n
                   // whose first element has seq - k). Sent on every live link at irecv and again on
                   // every link that comes up while the receive is pending; duplicates are harmless.
  kShare = 6,      // RERAIL_TCP_DUPLEX (duplex.h), sender -> receiver on stream 0 of link 0, written by the
                   // send comm's driver (never the core's): seq = the id of a connection from the
                   // receiver's process to the sender's, whose sender may now write its link-0 frames
                   // on this socket too (the sender's process reads them). A receiver that does not
                   // share ignores it.
};

// kPosted's `total`: tag (NCCL's int, as 32 bits) | n << 32 | k << 40.
inline uint64_t PostedInfo(int tag, int n, int k) {
  return static_cast<uint64_t>(static_cast<uint32_t>(tag)) | static_cast<uint64_t>(n & 0xff) << 32 |
         static_cast<uint64_t>(k & 0xff) << 40;
}
inline int PostedTag(uint64_t info) { return static_cast<int>(static_cast<uint32_t>(info)); }
inline int PostedN(uint64_t info) { return static_cast<int>((info >> 32) & 0xff); }
inline int PostedK(uint64_t info) { return static_cast<int>((info >> 40) & 0xff); }
// Most buffers one grouped irecv may carry (NCCL's net_ib default, advertised as maxRecvs).
constexpr int kMaxRecvs = 8;

struct Frame {
  uint32_t magic_type;  // kFrameMagic | type
  uint32_t len;         // payload bytes following this frame
  uint32_t conn;
  uint32_t epoch;
  uint64_t seq;
  uint64_t offset;
  uint64_t total;
};
static_assert(sizeof(Frame) == 40, "Frame is 40 bytes on the wire");

constexpr uint32_t kFrameEager = 0x100u;  // kData only: chunk of an eager message
// kHeartbeat from the sender only: a message waits for the receiver's credit (it is not eager and its
// seq is not below the last credit heard). seq = messages posted, as in every sender heartbeat. The
// receiver, which holds back a new credit while the sender sends eager messages (they need none, and a
// credit per receive is a control frame per message), then sends each new credit at once until it
// covers seq. A receiver without this rule (it ignores the flag) sends every credit at once anyway.
constexpr uint32_t kFrameWantCredit = 0x200u;

inline uint32_t FrameMagic(FrameType t) { return kFrameMagic | static_cast<uint32_t>(t); }
inline bool FrameValid(const Frame& f) { return (f.magic_type & 0xffff0000u) == kFrameMagic; }
inline FrameType TypeOf(const Frame& f) { return static_cast<FrameType>(f.magic_type & 0xffu); }
inline bool IsEager(const Frame& f) { return (f.magic_type & kFrameEager) != 0; }

}  // namespace rr::net
