// The bootstrap exchange's request and response checks (bootstrap/src/exchange_proto.cc), without
// sockets. tests/fuzz/fuzz_boot_wire drives the same functions with arbitrary bytes.
#include <gtest/gtest.h>

#include "exchange_wire.h"

namespace rr::boot::wire {
namespace {

constexpr uint64_t kMagic = 0x1122334455667788ull;
const Shape kShape{kMagic, 8, 64, 0};

Request Pull(uint32_t first, uint32_t min_count, uint32_t count) {
  return Request{kMagic, static_cast<uint32_t>(Kind::kPull), 3, 8, 64, 0, first, count, min_count};
}

TEST(BootExchangeProto, RequestsAreCheckedMagicFirstThenShape) {
  EXPECT_EQ(CheckRequest(Pull(4, 1, 4), kShape), Reply::kOk);
  Request r = Pull(4, 1, 4);
  r.magic ^= 1;
  r.nranks = 9;  // a stranger is told "magic", whatever else is wrong
  EXPECT_EQ(CheckRequest(r, kShape), Reply::kBadMagic);
  EXPECT_EQ(CheckRequest(Pull(8, 1, 4), kShape), Reply::kBadShape);  // first >= nranks
  EXPECT_EQ(CheckRequest(Pull(4, 0, 4), kShape), Reply::kBadShape);  // min_count 0
  EXPECT_EQ(CheckRequest(Pull(4, 5, 4), kShape), Reply::kBadShape);  // min > count
  EXPECT_EQ(CheckRequest(Pull(4, 1, 8), kShape), Reply::kBadShape);  // count >= nranks
  r = Pull(4, 1, 4);
  r.from_rank = 8;
  EXPECT_EQ(CheckRequest(r, kShape), Reply::kBadShape);
  r = Pull(4, 1, 4);
  r.kind = 7;
  EXPECT_EQ(CheckRequest(r, kShape), Reply::kBadShape);
  r.kind = static_cast<uint32_t>(Kind::kBye);
  EXPECT_EQ(CheckRequest(r, kShape), Reply::kOk);
}

TEST(BootExchangeProto, AnswersNameOnlyHeldBlocks) {
  // Rank 6 of 8 holds blocks 6, 7, 0 (held 3).
  EXPECT_EQ(AnswerCount(Pull(7, 1, 4), 6, 8, 3), 2u);  // 7, 0
  EXPECT_EQ(AnswerCount(Pull(7, 3, 4), 6, 8, 3), 0u);  // only 2 held from 7 on: stay parked
  EXPECT_EQ(AnswerCount(Pull(1, 1, 4), 6, 8, 3), 0u);  // block 1 is not held
  EXPECT_EQ(AnswerCount(Pull(6, 1, 2), 6, 8, 3), 2u);  // capped by count
  // No 32-bit wrap of first + nranks for the largest shapes the wire can carry.
  const uint32_t n = 0xfffffff0u;
  Request big{kMagic, static_cast<uint32_t>(Kind::kPull), 0, n, 64, 0, n - 2, 4, 1};
  EXPECT_EQ(AnswerCount(big, n - 3, n, 3), 2u);
}

TEST(BootExchangeProto, ResponsesMustMatchTheRequestInFlight) {
  const Expect pull{false, 5, 2, 3};
  uint32_t blocks = 9;
  EXPECT_EQ(CheckResponse(Response{kMagic, 0, 5, 3, 64}, kShape, pull, &blocks), Verdict::kOk);
  EXPECT_EQ(blocks, 3u);
  EXPECT_EQ(CheckResponse(Response{kMagic, 0, 5, 4, 64}, kShape, pull, &blocks), Verdict::kMalformed);
  EXPECT_EQ(blocks, 0u);
  EXPECT_EQ(CheckResponse(Response{kMagic, 0, 5, 1, 64}, kShape, pull, &blocks), Verdict::kMalformed);
  EXPECT_EQ(CheckResponse(Response{kMagic, 0, 4, 2, 64}, kShape, pull, &blocks), Verdict::kMalformed);
  EXPECT_EQ(CheckResponse(Response{kMagic, 0, 5, 2, 65}, kShape, pull, &blocks), Verdict::kMalformed);
  EXPECT_EQ(CheckResponse(Response{kMagic, 2, 0, 0, 0}, kShape, pull, &blocks), Verdict::kRefused);
  EXPECT_EQ(CheckResponse(Response{kMagic + 1, 0, 5, 2, 64}, kShape, pull, &blocks), Verdict::kBadMagic);
  const Expect bye{true, 0, 0, 0};
  EXPECT_EQ(CheckResponse(Response{kMagic, 0, 3, 0, 0}, kShape, bye, &blocks), Verdict::kOk);
  EXPECT_EQ(CheckResponse(Response{kMagic, 0, 3, 1, 64}, kShape, bye, &blocks), Verdict::kMalformed);
}

}  // namespace
}  // namespace rr::boot::wire
