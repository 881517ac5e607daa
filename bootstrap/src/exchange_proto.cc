// Request and response checks of the rootless exchange (exchange_wire.h): everything the exchange
// decides about bytes a peer sent, apart from the sockets, so a fuzzer and unit tests reach it.
#include <algorithm>

#include "exchange_wire.h"
#include "rerail/auth.h"

namespace rr::boot::wire {

Reply CheckRequest(const Request& r, const Shape& s) {
  if (!auth::ConstantTimeEqual(&r.magic, &s.magic, sizeof(s.magic))) return Reply::kBadMagic;
  if (r.nranks != s.nranks || r.blob_size != s.blob_size || r.algorithm != s.algorithm || r.from_rank >= s.nranks)
    return Reply::kBadShape;
  if (r.kind == static_cast<uint32_t>(Kind::kBye)) return Reply::kOk;
  bool pull_ok = r.kind == static_cast<uint32_t>(Kind::kPull) && r.first < s.nranks && r.min_count >= 1 &&
                 r.min_count <= r.count && r.count < s.nranks;
  return pull_ok ? Reply::kOk : Reply::kBadShape;
}

uint32_t AnswerCount(const Request& r, uint32_t rank, uint32_t nranks, uint32_t held) {
  // Distance from this rank's first held block to the first block wanted (both < nranks; 64-bit so
  // that first + nranks cannot wrap).
  const uint32_t offset = static_cast<uint32_t>((uint64_t{r.first} + nranks - rank) % nranks);
  if (offset >= held || held - offset < r.min_count) return 0;
  return std::min(held - offset, r.count);
}

Verdict CheckResponse(const Response& h, const Shape& s, const Expect& e, uint32_t* blocks) {
  *blocks = 0;
  if (!auth::ConstantTimeEqual(&h.magic, &s.magic, sizeof(s.magic))) return Verdict::kBadMagic;
  if (h.reply != static_cast<uint32_t>(Reply::kOk)) return Verdict::kRefused;
  bool good = e.bye ? h.count == 0
                    : h.first_rank == e.first && h.count >= e.min_count && h.count <= e.count &&
                          h.blob_size == s.blob_size;
  if (!good) return Verdict::kMalformed;
  *blocks = h.count;
  return Verdict::kOk;
}

}  // namespace rr::boot::wire
