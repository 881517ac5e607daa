// rerail-perf — what one rank does for one collective of one size: NCCL's ring / p2p schedules cut
// into slices (reference §3.3), as lists of "GPU" primitives per stream.
//
// Contract
//   * BuildPlan() is a pure function of (collective, size, nranks, rank, channels, root, in-place):
//     every rank computes the same slicing, so the n-th send on a connection matches the n-th
//     receive on the other side (NCCL matches strictly in posting order).
//   * Ring collectives (all_reduce, all_gather, reduce_scatter) use the SIMPLE protocol shape:
//     512 KiB steps, slices of 2 steps (1 MiB), chunks of 4 steps (2 MiB), loops of
//     nChannels x nranks chunks; broadcast uses 1-step slices and chunks. sendrecv and alltoall use
//     the p2p connections: 128 KiB chunks, one step per message.
//   * Channel c's connections use device c mod ndev (decided by the communicator, not here).
//   * Byte offsets in Elem are relative to the plan's input and output buffers. In-place runs use one
//     buffer of max(in_bytes, out_bytes): input = buffer + in_offset, output = buffer + out_offset
//     (nccl-tests conventions: all_gather's input is the rank's block of the output, reduce_scatter's
//     output is the rank's block of the input).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "options.h"

namespace rr::perf {

constexpr size_t kRingStepBytes = 512 * 1024;  // NCCL_BUFFSIZE 4 MiB / NCCL_STEPS
constexpr size_t kP2pStepBytes = 128 * 1024;   // NCCL_P2P_NET_CHUNKSIZE

// Which connection a stream uses: ring (connIndex 0) or p2p (connIndex 1), direction, peer, channel.
struct ConnKey {
  bool p2p;
  bool send;
  int peer;
  int channel;
  bool operator<(const ConnKey& o) const;
  bool operator==(const ConnKey& o) const;
};

// One slice-sized primitive, as a GPU thread block would run it.
enum class ElemOp {
  kSend,                // slot <- in[src]
  kCopySend,            // out[dst] <- in[src]; slot <- in[src]
  kRecvReduceSend,      // slot <- recv + in[src]
  kRecvReduceCopySend,  // out[dst] <- recv + in[src]; slot <- out[dst]
  kRecvCopySend,        // out[dst] <- recv; slot <- recv
  kRecv,                // out[dst] <- recv
  kRecvReduceCopy,      // out[dst] <- recv + in[src]
  kCopy,                // out[dst] <- in[src] (local data, no network)
};

inline bool NeedsRecv(ElemOp op) {
  return op == ElemOp::kRecvReduceSend || op == ElemOp::kRecvReduceCopySend || op == ElemOp::kRecvCopySend ||
         op == ElemOp::kRecv || op == ElemOp::kRecvReduceCopy;
}
inline bool NeedsSend(ElemOp op) {
  return op == ElemOp::kSend || op == ElemOp::kCopySend || op == ElemOp::kRecvReduceSend ||
         op == ElemOp::kRecvReduceCopySend || op == ElemOp::kRecvCopySend;
}

struct Elem {
  ElemOp op;
  size_t src;    // byte offset in the input buffer
  size_t dst;    // byte offset in the output buffer
  size_t bytes;  // may be 0: NCCL still moves an empty step
};

// Primitives run in order; a stream waits for its recv connection's next slice and a free slot of
// its send connection. gate >= 0: element i may run only after stream `gate` ran element i (used by
// in-place p2p so a region is sent before it is overwritten).
struct Stream {
  int send_conn = -1;  // index into Plan::conns
  int recv_conn = -1;
  int gate = -1;
  std::vector<Elem> elems;
};

struct Plan {
  Coll coll;
  size_t count = 0;        // the "count" column (elements per rank parameter, nccl-tests)
  size_t size_bytes = 0;   // the "size" column
  size_t in_bytes = 0, out_bytes = 0;
  size_t in_offset = 0, out_offset = 0;  // in-place only (see above)
  bool in_place = false;
  int slice_steps = 1;
  std::vector<ConnKey> conns;
  std::vector<uint64_t> conn_slices;  // slices each connection moves
  std::vector<Stream> streams;
};

struct PlanArgs {
  Coll coll;
  size_t size_bytes;  // nccl-tests size (-b .. -e)
  size_t type_size;
  int nranks, rank, channels, root;
  bool in_place;
};

Plan BuildPlan(const PlanArgs& a);

// busbw = algbw x factor (nccl-tests doc/PERFORMANCE.md).
double BusBwFactor(Coll c, int nranks);
// The connections a collective needs (for setting them up before any run).
std::vector<ConnKey> ConnsFor(Coll c, int nranks, int rank, int channels);

}  // namespace rr::perf
