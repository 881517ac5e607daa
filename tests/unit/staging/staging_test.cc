// Staging ring and CPU copy engine: ordering, wrap-around, slot reuse only after the wire is done,
// errors, and a pipelined transfer (pack slot i+1 while slot i is on the wire) that must be byte-exact.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "staging/copy_engine.h"
#include "staging/slot_ring.h"

using rr::staging::ChooseStaging;
using rr::staging::CopyJob;
using rr::staging::CpuCopyEngine;
using rr::staging::SlotRing;
using rr::staging::StagingMode;

namespace {

std::unique_ptr<SlotRing> MakeRing(CpuCopyEngine& e, std::size_t slot, unsigned n) {
  return std::make_unique<SlotRing>(slot, n, e.AllocHost(SlotRing::AllocBytes(slot, n)));
}

void WaitReady(const SlotRing& r, int i) {
  while (!r.Ready(i)) std::this_thread::yield();
}

}  // namespace

TEST(Staging, RingHandsOutInOrderAndWraps) {
  CpuCopyEngine e;
  auto r = MakeRing(e, 256, 3);
  EXPECT_EQ(r->Acquire(), 0);
  EXPECT_EQ(r->Acquire(), 1);
  EXPECT_EQ(r->Acquire(), 2);
  EXPECT_EQ(r->Acquire(), -1);   // full
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(e.Submit(CopyJob{r->Data(i), "x", 1, r->Flag(i), r->Ticket(i)}).ok());
    WaitReady(*r, i);
    ASSERT_TRUE(r->MarkOnWire(i).ok());
  }
  ASSERT_TRUE(r->Release(0).ok());
  EXPECT_EQ(r->Acquire(), 0);    // wrap-around
  EXPECT_EQ(r->Acquire(), -1);
}

TEST(Staging, SlotReusedOnlyAfterEveryOlderSlotLeftTheWire) {
  CpuCopyEngine e;
  auto r = MakeRing(e, 64, 2);
  int a = r->Acquire(), b = r->Acquire();
  for (int i : {a, b}) {
    ASSERT_TRUE(e.Submit(CopyJob{r->Data(i), "yy", 2, r->Flag(i), r->Ticket(i)}).ok());
    WaitReady(*r, i);
    ASSERT_TRUE(r->MarkOnWire(i).ok());
  }
  ASSERT_TRUE(r->Release(b).ok());    // the newer one first
  EXPECT_EQ(r->Acquire(), -1) << "slot a is still on the wire";
  EXPECT_EQ(r->in_use(), 2u);
  ASSERT_TRUE(r->Release(a).ok());
  EXPECT_EQ(r->in_use(), 0u);
  EXPECT_EQ(r->Acquire(), a);
}

TEST(Staging, StaleFlagIsNotReadyAfterReuse) {
  CpuCopyEngine e;
  auto r = MakeRing(e, 64, 1);
  int i = r->Acquire();
  ASSERT_TRUE(e.Submit(CopyJob{r->Data(i), "z", 1, r->Flag(i), r->Ticket(i)}).ok());
  WaitReady(*r, i);
  ASSERT_TRUE(r->MarkOnWire(i).ok());
  ASSERT_TRUE(r->Release(i).ok());
  ASSERT_EQ(r->Acquire(), i);
  EXPECT_FALSE(r->Ready(i)) << "the previous use's flag must not count";
}

TEST(Staging, Errors) {
  CpuCopyEngine e;
  auto r = MakeRing(e, 64, 2);
  int i = r->Acquire();
  EXPECT_EQ(r->MarkOnWire(i).code(), rr::Code::kInternalError);   // not ready yet
  EXPECT_EQ(r->Release(i).code(), rr::Code::kInternalError);      // not on the wire
  EXPECT_EQ(r->Release(1).code(), rr::Code::kInternalError);      // free slot
  EXPECT_EQ(r->MarkOnWire(7).code(), rr::Code::kInternalError);   // out of range
  EXPECT_EQ(e.Submit(CopyJob{nullptr, "a", 1, r->Flag(i), 1}).code(), rr::Code::kInvalidArgument);
  EXPECT_EQ(e.Submit(CopyJob{r->Data(i), "a", 1, nullptr, 1}).code(), rr::Code::kInvalidArgument);
  ASSERT_TRUE(r->Abandon(i).ok());                                  // a failed link's slot
  EXPECT_EQ(r->in_use(), 0u);
  e.Stop();
  int j = r->Acquire();
  EXPECT_EQ(e.Submit(CopyJob{r->Data(j), "a", 1, r->Flag(j), r->Ticket(j)}).code(), rr::Code::kInternalError);
}

TEST(Staging, CpuEngineCompletesInSubmissionOrder) {
  CpuCopyEngine e;
  const int kN = 2000;
  std::vector<std::atomic<uint64_t>> flags(kN);
  std::vector<char> dst(kN), src(kN, 'q');
  for (int k = 0; k < kN; ++k) ASSERT_TRUE(e.Submit(CopyJob{&dst[k], &src[k], 1, &flags[k], uint64_t(k + 1)}).ok());
  // once job k is flagged every earlier job is flagged too
  for (int k = kN - 1; k >= 0; k -= 97) {
    while (flags[k].load(std::memory_order_acquire) != uint64_t(k + 1)) std::this_thread::yield();
    for (int m = 0; m < k; ++m) ASSERT_EQ(flags[m].load(std::memory_order_acquire), uint64_t(m + 1));
  }
  EXPECT_EQ(0, std::memcmp(dst.data(), src.data(), kN));
}

// Sender side of a staged link: pack chunk i+1 into a slot while chunk i is "on the wire" (a wire
// thread that takes slots in order, copies them out slowly and releases them); receiver side unpacks
// from the wire's slots into the posted buffer. Sizes are odd so the last chunk is short.
TEST(Staging, PipelinedTransferIsByteExact) {
  const std::size_t kBytes = 10 * 1024 * 1024 + 12345, kSlot = 64 * 1024 + 3;
  std::vector<unsigned char> src(kBytes), dst(kBytes, 0);
  std::mt19937 g(5);
  for (auto& c : src) c = static_cast<unsigned char>(g());
  CpuCopyEngine pack, unpack;
  auto tx = MakeRing(pack, kSlot, 4);
  auto rx = MakeRing(unpack, kSlot, 4);
  std::size_t nchunks = (kBytes + kSlot - 1) / kSlot, packed = 0, sent = 0;
  std::vector<int> tx_slot(nchunks, -1), rx_slot(nchunks, -1);
  std::vector<std::size_t> unpacked_at;   // chunk ids whose unpack is queued, in order
  std::size_t overlap = 0, done = 0;
  while (done < nchunks) {
    // pack as far ahead as the ring allows
    while (packed < nchunks) {
      int s = tx->Acquire();
      if (s < 0) break;
      std::size_t off = packed * kSlot, len = std::min(kSlot, kBytes - off);
      ASSERT_TRUE(pack.Submit(CopyJob{tx->Data(s), &src[off], len, tx->Flag(s), tx->Ticket(s)}).ok());
      tx_slot[packed++] = s;
    }
    // the wire: send the oldest packed chunk once its flag is up, into a receive slot
    if (sent < nchunks && tx->Ready(tx_slot[sent])) {
      int rs = rx->Acquire();
      if (rs >= 0) {
        if (packed > sent + 1) ++overlap;   // the next chunk was packing meanwhile
        int s = tx_slot[sent];
        ASSERT_TRUE(tx->MarkOnWire(s).ok());
        std::size_t off = sent * kSlot, len = std::min(kSlot, kBytes - off);
        std::memcpy(rx->Data(rs), tx->Data(s), len);   // bytes "on the wire"
        ASSERT_TRUE(tx->Release(s).ok());
        // the receive slot is full: unpack it into the posted buffer
        rx->Flag(rs)->store(rx->Ticket(rs), std::memory_order_release);
        ASSERT_TRUE(rx->MarkOnWire(rs).ok());
        std::atomic<uint64_t>* f = new std::atomic<uint64_t>(0);
        ASSERT_TRUE(unpack.Submit(CopyJob{&dst[off], rx->Data(rs), len, f, 1}).ok());
        while (f->load(std::memory_order_acquire) != 1) std::this_thread::yield();   // iflush
        delete f;
        ASSERT_TRUE(rx->Release(rs).ok());
        rx_slot[sent++] = rs;
        ++done;
      }
    }
  }
  EXPECT_EQ(0, std::memcmp(src.data(), dst.data(), kBytes));
  EXPECT_GT(overlap, 0u) << "packing never overlapped the wire";
  EXPECT_EQ(tx->in_use(), 0u);
  EXPECT_EQ(rx->in_use(), 0u);
}

TEST(Staging, ChooseStagingPerLink) {
  EXPECT_EQ(ChooseStaging(false, false, false, false), StagingMode::kDirect);   // host buffer
  EXPECT_EQ(ChooseStaging(true, true, false, false), StagingMode::kDirect);     // GDR link
  EXPECT_EQ(ChooseStaging(true, false, true, false), StagingMode::kCuda);       // TCP, GPU buffer
  EXPECT_EQ(ChooseStaging(true, false, false, false), StagingMode::kImpossible);
  EXPECT_EQ(ChooseStaging(false, false, false, true), StagingMode::kCpu);       // forced, host
  EXPECT_EQ(ChooseStaging(true, true, true, true), StagingMode::kCuda);         // forced, GPU
}

TEST(Staging, CudaProbeSaysWhyWhenUnavailable) {
  auto p = rr::staging::ProbeCuda();
  if (p.available) GTEST_SKIP() << "a CUDA device is present";
  EXPECT_FALSE(p.why.empty());
  std::printf("cuda backend unavailable here: %s\n", p.why.c_str());
}
