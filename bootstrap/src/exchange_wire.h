// Wire format and socket helpers of the rootless exchange (internal).
// All fields are little-endian (x86-64 / aarch64 hosts); a stranger speaking anything else fails the
// magic check.
#pragma once

#include <cstdint>
#include <string>

#include "rerail/boot/job.h"
#include "rerail/status.h"

namespace rr::boot::wire {

enum class Kind : uint32_t {
  kPull = 1,  // "send me blobs first.. (at least min_count, at most count) once you hold them"
  kBye = 2,   // "I have everything; I will not pull from you again"
};

enum class Reply : uint32_t {
  kOk = 0,
  kBadMagic = 1,  // the request's magic is not this exchange's (another job or group)
  kBadShape = 2,  // nranks, blob size, algorithm or block range do not match this exchange
};

// Both algorithms keep one invariant: a rank holds the contiguous blocks rank, rank+1, ...
// rank+held-1 (mod nranks), and always pulls the next missing block first = rank+held from a peer.
struct Request {  // client -> server, 40 bytes
  uint64_t magic;
  uint32_t kind;
  uint32_t from_rank;
  uint32_t nranks;
  uint32_t blob_size;
  uint32_t algorithm;  // ExchangeAlgorithm; every rank must use the same
  uint32_t first;      // first block wanted
  uint32_t count;      // at most this many blocks
  uint32_t min_count;  // answer only once at least this many are held
};
static_assert(sizeof(Request) == 40, "request layout");

struct Response {  // server -> client, 24 bytes, then count * blob_size bytes for a pull
  uint64_t magic;
  uint32_t reply;
  uint32_t first_rank;  // blobs first_rank, first_rank+1, ... (mod nranks)
  uint32_t count;
  uint32_t blob_size;
};
static_assert(sizeof(Response) == 24, "response layout");

// ---- Message checks (pure functions: no socket, no clock; tests/fuzz/fuzz_boot_wire drives them).

// What one exchange expects of every request and response it sees.
struct Shape {
  uint64_t magic;      // per (job, group), keyed by RERAIL_JOB_SECRET when set
  uint32_t nranks;     // >= 1
  uint32_t blob_size;  // 1..kMaxBlob
  uint32_t algorithm;  // ExchangeAlgorithm
};
constexpr uint32_t kMaxBlob = 1u << 20;

// Server: the verdict on a request read from a connection. Magic first (constant time), then the
// shape: same nranks, blob size and algorithm, from_rank < nranks; a pull also needs first < nranks and
// 1 <= min_count <= count < nranks. A bye needs nothing more.
Reply CheckRequest(const Request& r, const Shape& s);

// Server: how many blocks to answer a pull (already accepted by CheckRequest) with, when this rank
// holds blocks rank .. rank+held-1 (mod nranks), 1 <= held <= nranks. 0: not enough held yet (the
// request stays parked). Otherwise the answer is blocks first .. first+n-1 (mod nranks) with
// min_count <= n <= count, every one of them held.
uint32_t AnswerCount(const Request& r, uint32_t rank, uint32_t nranks, uint32_t held);

// Client: what it expects of the answer to the request in flight.
struct Expect {
  bool bye;            // a bye: the answer carries no block
  uint32_t first;      // pull: blocks from here (mod nranks)
  uint32_t min_count;  // pull: at least this many
  uint32_t count;      // pull: at most this many
};
enum class Verdict {
  kOk,         // *blocks (<= e.count) blobs of s.blob_size bytes follow the header
  kBadMagic,   // another job or group answered
  kRefused,    // the server rejected the request (h.reply says why)
  kMalformed,  // a reply that no exchange of this shape sends
};
Verdict CheckResponse(const Response& h, const Shape& s, const Expect& e, uint32_t* blocks);

// Non-blocking TCP helpers. All return Status; none blocks.
Status Listen(const SockAddr& addr, int* fd);
// Starts a connect; *fd is a non-blocking socket whose completion is signalled by POLLOUT.
Status ConnectStart(const SockAddr& addr, int* fd);
// After POLLOUT on a connecting socket: Ok when connected, else the connect error.
Status ConnectFinish(int fd, const SockAddr& addr);
// Reads into buf[*have .. want); sets *eof on orderly close. Ok with *have < want: try later.
Status ReadSome(int fd, char* buf, size_t want, size_t* have, bool* eof);
// Writes out[*off ..]; Ok with *off < size: try later.
Status WriteSome(int fd, const std::string& out, size_t* off);
std::string PeerName(int fd);
void SetNoDelay(int fd);

}  // namespace rr::boot::wire
