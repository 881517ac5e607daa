// Host emulation of the staging kernels' grid: runs the per-thread functions of index_math.h for
// every thread of a grid, in a scrambled order, and compares the bytes with memcpy and the chunk
// checksum with libxxhash's XXH64.
#include <gtest/gtest.h>
#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "rerail/kernels/index_math.h"

namespace rk = rerail::kernels;

namespace {

std::vector<unsigned char> Pattern(std::size_t n, uint32_t seed) {
  std::vector<unsigned char> v(n);
  std::mt19937 g(seed);
  for (auto& c : v) c = static_cast<unsigned char>(g());
  return v;
}

// Emulates <<<blocks, threads>>> of the copy kernel; threads run in a shuffled order so a plan that
// relies on one thread seeing another's writes would fail.
void EmulateCopy(const unsigned char* src, unsigned char* dst, uint64_t bytes, uint64_t blocks, uint64_t threads) {
  rk::CopyPlan p = rk::MakeCopyPlan(reinterpret_cast<uintptr_t>(src), reinterpret_cast<uintptr_t>(dst), bytes);
  ASSERT_EQ(p.head + p.nvec * rk::kVec + p.tail, bytes);
  uint64_t n = blocks * threads;
  std::vector<uint64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937(static_cast<uint32_t>(bytes)));
  for (uint64_t t : order) rk::CopyThread(p, t, n, src, dst);
}

void CheckCopy(uint64_t bytes, unsigned soff, unsigned doff, uint64_t blocks, uint64_t threads) {
  const unsigned kGuard = 64;
  auto src = Pattern(bytes + 32, static_cast<uint32_t>(bytes * 31 + soff));
  std::vector<unsigned char> dst(bytes + 32 + 2 * kGuard, 0xA5);
  // vectors' storage is 16-byte aligned (operator new), so the offsets are the misalignments
  ASSERT_EQ(reinterpret_cast<uintptr_t>(src.data()) % 16, 0u);
  ASSERT_EQ(reinterpret_cast<uintptr_t>(dst.data()) % 16, 0u);
  unsigned char* d = dst.data() + kGuard + doff;
  EmulateCopy(src.data() + soff, d, bytes, blocks, threads);
  ASSERT_EQ(0, std::memcmp(d, src.data() + soff, bytes)) << bytes << " bytes, offsets " << soff << "/" << doff;
  for (unsigned char* q = dst.data(); q < d; ++q) ASSERT_EQ(*q, 0xA5) << "write before the slot";
  for (unsigned char* q = d + bytes; q < dst.data() + dst.size(); ++q) ASSERT_EQ(*q, 0xA5) << "write after it";
}

}  // namespace

TEST(KernelsEmu, PlanUsesVectorsOnlyWhenMutuallyAligned) {
  auto p = rk::MakeCopyPlan(0x1003, 0x2003, 100);
  EXPECT_EQ(p.head, 13u);
  EXPECT_EQ(p.nvec, 5u);
  EXPECT_EQ(p.tail, 7u);
  p = rk::MakeCopyPlan(0x1003, 0x2004, 100);
  EXPECT_EQ(p.nvec, 0u);
  EXPECT_EQ(p.head, 100u);
  p = rk::MakeCopyPlan(0x1001, 0x2001, 10);   // shorter than the head
  EXPECT_EQ(p.nvec, 0u);
  EXPECT_EQ(p.head, 10u);
  p = rk::MakeCopyPlan(0x1000, 0x2000, 0);
  EXPECT_EQ(p.head + p.nvec + p.tail, 0u);
}

TEST(KernelsEmu, CopySmallSizesAllOffsets) {
  for (uint64_t bytes = 0; bytes <= 80; ++bytes)
    for (unsigned so = 0; so < 17; ++so)
      for (unsigned dof : {0u, 1u, 7u, 8u, 15u, 16u, so})
        CheckCopy(bytes, so, dof, 2, 8);
}

TEST(KernelsEmu, CopyOddAndLargeSizes) {
  const uint64_t sizes[] = {127, 4095, 4096, 4097, 65537, 1u << 20, (1u << 20) + 13, 3u * (1 << 20) + 7};
  for (uint64_t b : sizes) {
    CheckCopy(b, 0, 0, 3, 128);
    CheckCopy(b, 5, 5, 7, 64);
    CheckCopy(b, 3, 9, 4, 32);       // mutually misaligned: byte-wise, grid-stride
  }
}

TEST(KernelsEmu, CopyGridShapes) {
  // more threads than work, a single thread, and non-power-of-two grids
  for (uint64_t blocks : {1u, 3u, 160u})
    for (uint64_t threads : {1u, 33u, 512u}) CheckCopy(10007, 4, 4, blocks, threads);
}

TEST(KernelsEmu, Xxh64MatchesLibxxhash) {
  auto data = Pattern(5000, 7);
  for (uint64_t seed : {0ull, 1ull, 0x9E3779B185EBCA87ull})
    for (std::size_t n = 0; n <= 300; ++n)
      for (std::size_t off : {0, 1, 3})
        ASSERT_EQ(rk::Xxh64(data.data() + off, n, seed), XXH64(data.data() + off, n, seed)) << n << "/" << off;
  EXPECT_EQ(rk::Xxh64(data.data(), 5000, 42), XXH64(data.data(), 5000, 42));
}

TEST(KernelsEmu, ChunkChecksumMatchesLibxxhashTree) {
  const uint64_t S = rk::kChecksumSegment;
  const uint64_t sizes[] = {0, 1, 1000, S - 1, S, S + 1, 5 * S + 333, 3ull << 20};
  for (uint64_t bytes : sizes) {
    auto data = Pattern(bytes + 1, static_cast<uint32_t>(bytes));
    const unsigned char* p = data.data() + 1;   // unaligned
    uint64_t nseg = rk::ChecksumSegments(bytes);
    std::vector<uint64_t> seg(nseg, 0);
    for (uint64_t t = 0; t < 6; ++t) rk::ChecksumThread(t, 6, p, bytes, 99, seg.data());
    uint64_t got = rk::ChecksumCombine(seg.data(), nseg, 99);
    // the reference, from libxxhash alone
    std::vector<uint64_t> ref(nseg);
    for (uint64_t s = 0; s < nseg; ++s) ref[s] = XXH64(p + s * S, std::min(S, bytes - s * S), 99);
    uint64_t want = nseg == 1 ? ref[0] : XXH64(ref.data(), nseg * 8, 99);
    EXPECT_EQ(got, want) << bytes;
    if (bytes <= S) {
      EXPECT_EQ(got, XXH64(p, bytes, 99));
    }
    if (bytes > 0) {   // one flipped bit changes it
      data[1 + bytes / 2] ^= 1;
      for (uint64_t t = 0; t < 6; ++t) rk::ChecksumThread(t, 6, p, bytes, 99, seg.data());
      EXPECT_NE(rk::ChecksumCombine(seg.data(), nseg, 99), got) << bytes;
    }
  }
}
