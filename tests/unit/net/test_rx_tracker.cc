#include <gtest/gtest.h>

#include "request.h"
#include "rx_tracker.h"

namespace {

using namespace rr::net;
constexpr uint32_t kConn = 77;
constexpr uint32_t kChunk = 4096;

Frame Data(uint64_t seq, uint64_t off, uint32_t len, uint64_t total, uint32_t epoch = 0) {
  Frame f{};
  f.magic_type = FrameMagic(FrameType::kData);
  f.conn = kConn;
  f.epoch = epoch;
  f.seq = seq;
  f.offset = off;
  f.len = len;
  f.total = total;
  return f;
}

TEST(RxTracker, PlacesChunksAnyOrderCompletesOnLastByte) {
  RxTracker t(kConn, kChunk);
  char buf[10000];
  ASSERT_NE(t.Post(buf, sizeof(buf), nullptr), nullptr);
  RxTracker::Slot* s = nullptr;
  std::string err;
  Frame c2 = Data(0, 8192, 1000, 9192), c0 = Data(0, 0, 4096, 9192), c1 = Data(0, 4096, 4096, 9192);
  ASSERT_EQ(t.Classify(c2, 0, &s, &err), RxTracker::Verdict::kPlace);
  EXPECT_FALSE(t.Placed(s, c2));
  ASSERT_EQ(t.Classify(c0, 0, &s, &err), RxTracker::Verdict::kPlace);
  EXPECT_FALSE(t.Placed(s, c0));
  EXPECT_EQ(t.completed_prefix(), 0u);
  ASSERT_EQ(t.Classify(c1, 0, &s, &err), RxTracker::Verdict::kPlace);
  EXPECT_TRUE(t.Placed(s, c1));
  EXPECT_EQ(s->total, 9192);
  EXPECT_EQ(t.completed_prefix(), 1u);
}

TEST(RxTracker, DropsDuplicatesStaleEpochsAndCompletedMessages) {
  RxTracker t(kConn, kChunk);
  char buf[8192];
  t.Post(buf, sizeof(buf), nullptr);
  RxTracker::Slot* s = nullptr;
  std::string err;
  Frame c0 = Data(0, 0, 4096, 8192, 2);
  ASSERT_EQ(t.Classify(c0, 2, &s, &err), RxTracker::Verdict::kPlace);
  t.Placed(s, c0);
  EXPECT_EQ(t.Classify(c0, 2, &s, &err), RxTracker::Verdict::kDrop) << "duplicate";
  EXPECT_EQ(t.Classify(Data(0, 4096, 4096, 8192, 1), 2, &s, &err), RxTracker::Verdict::kDrop) << "stale epoch";
  Frame c1 = Data(0, 4096, 4096, 8192, 2);
  ASSERT_EQ(t.Classify(c1, 2, &s, &err), RxTracker::Verdict::kPlace);
  EXPECT_TRUE(t.Placed(s, c1));
  RxTracker::Slot* done = s;
  EXPECT_EQ(t.Classify(c1, 2, &s, &err), RxTracker::Verdict::kDrop) << "chunk of a completed message";
  EXPECT_EQ(s, nullptr);
  t.Release(done);
  EXPECT_EQ(t.Classify(c1, 2, &s, &err), RxTracker::Verdict::kDrop) << "after release too";
}

TEST(RxTracker, WaitsForPostAndMatchesInPostingOrder) {
  RxTracker t(kConn, kChunk);
  RxTracker::Slot* s = nullptr;
  std::string err;
  EXPECT_EQ(t.Classify(Data(0, 0, 10, 10), 0, &s, &err), RxTracker::Verdict::kNotPosted);
  char a[10], b[20];
  RxTracker::Slot* sa = t.Post(a, sizeof(a), nullptr);
  RxTracker::Slot* sb = t.Post(b, sizeof(b), nullptr);
  EXPECT_EQ(sa->seq, 0u);
  EXPECT_EQ(sb->seq, 1u);
  Frame m1 = Data(1, 0, 20, 20);
  ASSERT_EQ(t.Classify(m1, 0, &s, &err), RxTracker::Verdict::kPlace);
  EXPECT_EQ(s, sb);
  EXPECT_TRUE(t.Placed(s, m1));
  EXPECT_EQ(t.completed_prefix(), 0u) << "message 1 complete but 0 is not: prefix stays";
  Frame m0 = Data(0, 0, 0 + 10, 10);
  ASSERT_EQ(t.Classify(m0, 0, &s, &err), RxTracker::Verdict::kPlace);
  EXPECT_TRUE(t.Placed(s, m0));
  EXPECT_EQ(t.completed_prefix(), 2u);
}

// A message completed and released out of order (an older one still incomplete) drops a late
// duplicate: "not posted" would park it at the head of its stream, and the older message's missing
// chunk behind it, for good (found by test_core's seeded swarm).
TEST(RxTracker, ALateDuplicateOfAReleasedMessageIsDropped) {
  RxTracker t(kConn, kChunk);
  char b0[8192], b1[4096];
  ASSERT_NE(t.Post(b0, sizeof(b0), nullptr), nullptr);
  RxTracker::Slot* s1 = t.Post(b1, sizeof(b1), nullptr);
  ASSERT_NE(s1, nullptr);
  RxTracker::Slot* s = nullptr;
  std::string err;
  Frame m1 = Data(1, 0, 4096, 4096);
  ASSERT_EQ(t.Classify(m1, 0, &s, &err), RxTracker::Verdict::kPlace);
  EXPECT_TRUE(t.Placed(s, m1));
  EXPECT_EQ(t.completed_prefix(), 0u) << "message 0 is still incomplete";
  t.Release(s1);
  EXPECT_EQ(t.Classify(m1, 0, &s, &err), RxTracker::Verdict::kDrop);
  Frame m0 = Data(0, 0, 4096, 8192);
  EXPECT_EQ(t.Classify(m0, 0, &s, &err), RxTracker::Verdict::kPlace);
}

// A message smaller than a full chunk per link is cut into a chunk per link (SendCore::FreshChunk):
// chunks are whole granules (kChunk / 8 = 512 bytes here), any number up to a full chunk, the message's
// last one ending anywhere. A re-sent chunk is the same range: all of it placed is a duplicate, part
// of it a sender that cut the message two ways.
TEST(RxTracker, ChunksOfWholeGranulesUpToAFullChunk) {
  ASSERT_EQ(ChunkGranule(kChunk), 512u);
  RxTracker t(kConn, kChunk);
  char buf[8292];
  t.Post(buf, sizeof(buf), nullptr);
  RxTracker::Slot* s = nullptr;
  std::string err;
  const uint64_t total = sizeof(buf);
  EXPECT_EQ(t.Classify(Data(0, 100, 512, total), 0, &s, &err), RxTracker::Verdict::kError) << "off the granule grid";
  EXPECT_EQ(t.Classify(Data(0, 0, 1000, total), 0, &s, &err), RxTracker::Verdict::kError) << "ends inside a granule";
  EXPECT_EQ(t.Classify(Data(0, 0, 4608, total), 0, &s, &err), RxTracker::Verdict::kError) << "longer than a chunk";
  Frame a = Data(0, 0, 1024, total), b = Data(0, 1024, 3072, total), c = Data(0, 4096, 4096, total), d = Data(0, 8192, 100, total);
  for (const Frame* f : {&d, &b}) {
    ASSERT_EQ(t.Classify(*f, 0, &s, &err), RxTracker::Verdict::kPlace) << err;
    EXPECT_FALSE(t.Placed(s, *f));
  }
  EXPECT_EQ(t.Classify(b, 0, &s, &err), RxTracker::Verdict::kDrop) << "a re-sent copy of a placed chunk";
  EXPECT_EQ(t.Classify(Data(0, 512, 1024, total), 0, &s, &err), RxTracker::Verdict::kError) << "half not placed (a), half placed (b)";
  EXPECT_NE(err.find("overlaps a placed one"), std::string::npos) << err;
  ASSERT_EQ(t.Classify(a, 0, &s, &err), RxTracker::Verdict::kPlace) << err;
  EXPECT_FALSE(t.Placed(s, a));
  EXPECT_EQ(t.Classify(Data(0, 3584, 1024, total), 0, &s, &err), RxTracker::Verdict::kError) << "half placed (b), half not (c)";
  EXPECT_EQ(t.completed_prefix(), 0u);
  ASSERT_EQ(t.Classify(c, 0, &s, &err), RxTracker::Verdict::kPlace) << err;
  EXPECT_TRUE(t.Placed(s, c)) << "every byte placed once";
  EXPECT_EQ(s->placed, total);
  EXPECT_EQ(t.completed_prefix(), 1u);
}

TEST(RxTracker, ZeroByteMessageCompletes) {
  RxTracker t(kConn, kChunk);
  t.Post(nullptr, 0, nullptr);
  RxTracker::Slot* s = nullptr;
  std::string err;
  Frame z = Data(0, 0, 0, 0);
  ASSERT_EQ(t.Classify(z, 0, &s, &err), RxTracker::Verdict::kPlace);
  EXPECT_TRUE(t.Placed(s, z));
  EXPECT_EQ(s->total, 0);
}

TEST(RxTracker, ErrorsOnOversizeAndMalformed) {
  RxTracker t(kConn, kChunk);
  char buf[100];
  t.Post(buf, sizeof(buf), nullptr);
  RxTracker::Slot* s = nullptr;
  std::string err;
  EXPECT_EQ(t.Classify(Data(0, 0, 101, 101), 0, &s, &err), RxTracker::Verdict::kError);
  EXPECT_NE(err.find("larger than the posted receive"), std::string::npos) << err;
  EXPECT_EQ(t.Classify(Data(0, 50, 60, 100), 0, &s, &err), RxTracker::Verdict::kError) << "beyond total";
  EXPECT_EQ(t.Classify(Data(0, 100, 10, 50), 0, &s, &err), RxTracker::Verdict::kError) << "offset past total";
  EXPECT_EQ(t.Classify(Data(0, 1, 10, 50), 0, &s, &err), RxTracker::Verdict::kError) << "unaligned offset";
  EXPECT_EQ(t.Classify(Data(40, 0, 10, 50), 0, &s, &err), RxTracker::Verdict::kError) << "beyond window";
  Frame other = Data(0, 0, 10, 10);
  other.conn = kConn + 1;
  EXPECT_EQ(t.Classify(other, 0, &s, &err), RxTracker::Verdict::kError);
  Frame garbage = Data(0, 0, 10, 10);
  garbage.magic_type = 0x12345678;
  EXPECT_EQ(t.Classify(garbage, 0, &s, &err), RxTracker::Verdict::kError);
}

TEST(RxTracker, WindowBoundsPostsUntilOldestCompletes) {
  RxTracker t(kConn, kChunk);
  char b;
  std::vector<RxTracker::Slot*> slots;
  for (int i = 0; i < RxTracker::kWindow; ++i) slots.push_back(t.Post(&b, 1, nullptr));
  EXPECT_EQ(t.Post(&b, 1, nullptr), nullptr);
  // Complete and release message 1 (not 0): the slot must not be reused before message 0 completes.
  RxTracker::Slot* s = nullptr;
  std::string err;
  Frame m1 = Data(1, 0, 1, 1);
  ASSERT_EQ(t.Classify(m1, 0, &s, &err), RxTracker::Verdict::kPlace);
  t.Placed(s, m1);
  t.Release(s);
  EXPECT_EQ(t.Post(&b, 1, nullptr), nullptr);
  Frame m0 = Data(0, 0, 1, 1);
  ASSERT_EQ(t.Classify(m0, 0, &s, &err), RxTracker::Verdict::kPlace);
  t.Placed(s, m0);
  t.Release(s);
  EXPECT_EQ(t.completed_prefix(), 2u);
  RxTracker::Slot* n = t.Post(&b, 1, nullptr);
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(n->seq, static_cast<uint64_t>(RxTracker::kWindow));
}

TEST(RequestPool, HandsOutAllThenRetries) {
  RequestPool pool(nullptr);
  std::vector<Request*> got;
  for (int i = 0; i < kMaxRequests; ++i) {
    Request* r = pool.Get(true);
    ASSERT_NE(r, nullptr);
    EXPECT_TRUE(pool.Owns(r));
    got.push_back(r);
  }
  EXPECT_EQ(pool.Get(true), nullptr);
  EXPECT_EQ(pool.in_use(), kMaxRequests);
  pool.Put(got[5]);
  EXPECT_EQ(pool.Get(false), got[5]);
  Request foreign;
  EXPECT_FALSE(pool.Owns(&foreign));
}

}  // namespace
