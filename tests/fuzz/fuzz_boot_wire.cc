// libFuzzer target: the bootstrap exchange's wire (bootstrap/src/exchange_proto.cc): requests a server
// reads from any connection to its planned port, and responses a client reads back.
//
// Input: a 16-byte preamble (mode, exchange shape, this rank and how many blocks it holds), then
// records of 40 request bytes + 24 response bytes. Mode bits fix up the magic and shape fields so
// the checks behind them are reached.
// Invariants:
//   * an accepted request satisfies every bound exchange_wire.h states;
//   * the answer to an accepted pull names only held blocks, min_count <= n <= count, and a client
//     that sent that pull accepts exactly that answer (server -> client round trip); same for a bye;
//   * an accepted response never announces more blocks than were asked for, nor a blob of another
//     size, nor (for a pull) other blocks than the ones asked for.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "exchange_wire.h"

using namespace rr::boot::wire;

namespace {

constexpr uint64_t kMagic = 0x6a6f622d67726f75ull;

[[noreturn]] void Fail() { std::abort(); }

void CheckOneRequest(Request r, const Response& resp_in, uint8_t mode, const Shape& s, uint32_t rank, uint32_t held) {
  if (mode & 1) r.magic = s.magic;
  if (mode & 2) r.nranks = s.nranks, r.blob_size = s.blob_size, r.algorithm = s.algorithm;
  if (mode & 4) {  // plausible pull: small numbers modulo the shape
    r.kind = (r.kind & 1) ? static_cast<uint32_t>(Kind::kPull) : static_cast<uint32_t>(Kind::kBye);
    r.from_rank %= s.nranks;
    r.first %= s.nranks;
    if (s.nranks > 1) r.count %= s.nranks, r.min_count %= s.nranks;
  }
  const Reply v = CheckRequest(r, s);
  if (v != Reply::kOk && v != Reply::kBadMagic && v != Reply::kBadShape) Fail();
  if (v == Reply::kBadMagic && r.magic == s.magic) Fail();
  if (v != Reply::kOk) return;
  if (r.magic != s.magic || r.nranks != s.nranks || r.blob_size != s.blob_size || r.algorithm != s.algorithm ||
      r.from_rank >= s.nranks)
    Fail();
  if (r.kind == static_cast<uint32_t>(Kind::kBye)) {
    const Response bye{s.magic, static_cast<uint32_t>(Reply::kOk), rank, 0, 0};
    uint32_t blocks = 1;
    if (CheckResponse(bye, s, Expect{true, 0, 0, 0}, &blocks) != Verdict::kOk || blocks != 0) Fail();
    return;
  }
  if (r.kind != static_cast<uint32_t>(Kind::kPull) || r.first >= s.nranks || r.min_count < 1 ||
      r.min_count > r.count || r.count >= s.nranks)
    Fail();
  const uint32_t n = AnswerCount(r, rank, s.nranks, held);
  const uint64_t offset = (uint64_t{r.first} + s.nranks - rank) % s.nranks;  // of the first block wanted
  const bool enough = offset < held && held - offset >= r.min_count;
  if (enough != (n != 0)) Fail();
  const Expect e{false, r.first, r.min_count, r.count};
  if (n != 0) {
    // Blocks first .. first+n-1 are offsets offset .. offset+n-1 from this rank: all held.
    if (n < r.min_count || n > r.count || offset + n > held) Fail();
    const Response answer{s.magic, static_cast<uint32_t>(Reply::kOk), r.first, n, s.blob_size};
    uint32_t blocks = 0;
    if (CheckResponse(answer, s, e, &blocks) != Verdict::kOk || blocks != n) Fail();
  }
  // Whatever a peer answers to that pull.
  Response h = resp_in;
  if (mode & 8) h.magic = s.magic, h.reply = 0;
  if (mode & 16) h.first_rank = r.first, h.blob_size = s.blob_size, h.count = r.min_count + h.count % (r.count - r.min_count + 1);
  uint32_t blocks = 0;
  const Verdict rv = CheckResponse(h, s, e, &blocks);
  if (rv != Verdict::kOk) {
    if (blocks != 0) Fail();
    if (rv == Verdict::kBadMagic && h.magic == s.magic) Fail();
    return;
  }
  if (h.magic != s.magic || h.reply != 0 || h.first_rank != r.first || h.blob_size != s.blob_size ||
      blocks != h.count || blocks < r.min_count || blocks > r.count)
    Fail();
  // A bye's answer must carry nothing: any accepted one has count 0.
  if (CheckResponse(h, s, Expect{true, 0, 0, 0}, &blocks) == Verdict::kOk && (h.count != 0 || blocks != 0)) Fail();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  constexpr size_t kPre = 16, kRec = sizeof(Request) + sizeof(Response);
  if (size < kPre) return 0;
  uint8_t mode = data[0];
  uint32_t nranks, blob, rank, held;
  std::memcpy(&nranks, data + 1, 4);
  std::memcpy(&blob, data + 5, 4);
  std::memcpy(&rank, data + 9, 4);
  std::memcpy(&held, data + 13, 3);
  held &= 0xffffffu;
  // Mode bit 7 allows any nranks up to 2^32-1 (the wire field's range); otherwise small jobs.
  nranks = (mode & 0x80) ? (nranks == 0 ? 1 : nranks) : 1 + nranks % 64;
  const Shape s{kMagic, nranks, 1 + blob % kMaxBlob, static_cast<uint32_t>(mode >> 5 & 1)};
  rank %= nranks;
  held = 1 + held % nranks;
  data += kPre, size -= kPre;
  for (; size >= kRec; data += kRec, size -= kRec) {
    Request r;
    Response h;
    std::memcpy(&r, data, sizeof(r));
    std::memcpy(&h, data + sizeof(r), sizeof(h));
    CheckOneRequest(r, h, mode, s, rank, held);
    mode = static_cast<uint8_t>(mode * 5 + 1);  // vary fix-ups between records, deterministically
  }
  return 0;
}
