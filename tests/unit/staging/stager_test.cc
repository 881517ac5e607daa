// Stager and GpuBuffers (issue 13): which chunks are staged (GPU ranges, RERAIL_FORCE_STAGING), the
// bytes through the slots, the registry's bounds and reference counts, and the error path when a
// GPU copy cannot run (here: no CUDA driver), which must fail the chunk rather than pass it on.
#include <gtest/gtest.h>

#include <cstring>
#include <algorithm>
#include <vector>

#include "staging/cuda_driver.h"
#include "staging/stager.h"

using rr::staging::CudaDriver;
using rr::staging::GpuBuffers;
using rr::staging::Stager;

namespace {

struct OfferedGuard {   // GpuBuffers is process-wide: leave it as found
  explicit OfferedGuard(bool on) : was(GpuBuffers::Get().offered()) { GpuBuffers::Get().SetOffered(on); }
  ~OfferedGuard() { GpuBuffers::Get().SetOffered(was); }
  bool was;
};

std::vector<uint8_t> Bytes(std::size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 7);
  return v;
}

TEST(GpuBuffers, FindsOnlyWholeChunksInsideARange) {
  auto& g = GpuBuffers::Get();
  std::vector<uint8_t> mem(4096);
  void* ctx = reinterpret_cast<void*>(0x1234);
  g.Add(mem.data() + 1024, 1024, ctx);
  EXPECT_EQ(g.Find(mem.data() + 1024, 1024), ctx);
  EXPECT_EQ(g.Find(mem.data() + 1500, 548), ctx);
  EXPECT_EQ(g.Find(mem.data() + 2048, 0), ctx);          // empty chunk at the end
  EXPECT_EQ(g.Find(mem.data() + 1500, 549), nullptr);    // runs past the end
  EXPECT_EQ(g.Find(mem.data() + 1023, 2), nullptr);      // starts before
  EXPECT_EQ(g.Find(mem.data() + 2049, 1), nullptr);
  EXPECT_EQ(g.Find(mem.data() + 1024, SIZE_MAX), nullptr);   // no overflow
  g.Add(mem.data() + 1024, 1024, ctx);   // a second comm registers the same range
  g.Remove(mem.data() + 1024, 1024);
  EXPECT_EQ(g.Find(mem.data() + 1100, 10), ctx) << "still registered once";
  g.Remove(mem.data() + 1024, 1024);
  EXPECT_EQ(g.Find(mem.data() + 1100, 10), nullptr);
  EXPECT_EQ(g.ranges(), 0u);
  g.Remove(mem.data(), 1);   // unknown: ignored
}

TEST(Stager, HostBuffersPassThroughUnlessForced) {
  OfferedGuard off(false);
  Stager s(/*force_host=*/false);
  auto src = Bytes(1000, 3);
  EXPECT_EQ(s.Pack(0, src.data(), src.size()), src.data());
  std::vector<uint8_t> dst(1000);
  EXPECT_EQ(s.Divert(0, dst.data(), dst.size()), dst.data());
  EXPECT_TRUE(s.Land(0));
  EXPECT_EQ(s.staged_bytes(), 0u);
}

TEST(Stager, ForcedHostStagingIsByteExact) {
  OfferedGuard off(false);
  Stager s(/*force_host=*/true);
  for (std::size_t n : {1u, 4095u, 65536u, 1000003u}) {
    auto src = Bytes(n, static_cast<uint8_t>(n));
    const uint8_t* slot = s.Pack(7, src.data(), n);
    ASSERT_NE(slot, nullptr);
    EXPECT_NE(slot, src.data());
    EXPECT_EQ(std::memcmp(slot, src.data(), n), 0) << n;
    std::vector<uint8_t> dst(n, 0);
    uint8_t* into = s.Divert(3, dst.data(), n);
    ASSERT_NE(into, dst.data());
    std::memcpy(into, slot, n);   // "the wire"
    EXPECT_TRUE(std::all_of(dst.begin(), dst.end(), [](uint8_t b) { return b == 0; })) << "not placed before Land";
    ASSERT_TRUE(s.Land(3));
    EXPECT_EQ(dst, src) << n;
  }
  EXPECT_GT(s.staged_bytes(), 0u);
  EXPECT_EQ(s.gpu_bytes(), 0u);
}

TEST(Stager, GpuChunkWithoutADriverFailsInsteadOfPassingOn) {
  if (CudaDriver::Get().available()) GTEST_SKIP() << "a CUDA driver works here: the copy would succeed";
  OfferedGuard on(true);
  std::vector<uint8_t> fake_gpu(8192);
  GpuBuffers::Get().Add(fake_gpu.data(), fake_gpu.size(), reinterpret_cast<void*>(0x1));
  Stager s(/*force_host=*/false);
  EXPECT_EQ(s.Pack(0, fake_gpu.data() + 100, 500), nullptr);
  EXPECT_EQ(s.error().code(), rr::Code::kUnhandledCuda);
  EXPECT_NE(s.error().message().find("CUDA unavailable"), std::string::npos) << s.error().message();
  // a host chunk of the same stager still passes through
  std::vector<uint8_t> host(100);
  EXPECT_EQ(s.Pack(1, host.data(), host.size()), host.data());
  Stager r(false);
  ASSERT_NE(r.Divert(5, fake_gpu.data(), 4096), fake_gpu.data());
  EXPECT_FALSE(r.Land(5));
  GpuBuffers::Get().Remove(fake_gpu.data(), fake_gpu.size());
}

TEST(Stager, ACutShortGpuPayloadNeverLandsLater) {
  // A GPU payload diverted into a slot, then its link fails before the payload is complete (no
  // Land). The stream's next payload goes to a host buffer: its Land must not copy the stale slot
  // into the old GPU buffer.
  OfferedGuard on(true);
  std::vector<uint8_t> fake_gpu(4096);
  GpuBuffers::Get().Add(fake_gpu.data(), fake_gpu.size(), reinterpret_cast<void*>(0x1));
  Stager r(false);
  ASSERT_NE(r.Divert(9, fake_gpu.data(), 1024), fake_gpu.data());
  std::vector<uint8_t> host(64);
  EXPECT_EQ(r.Divert(9, host.data(), host.size()), host.data());
  EXPECT_TRUE(r.Land(9)) << r.error().message();
  EXPECT_EQ(r.gpu_bytes(), 0u);
  GpuBuffers::Get().Remove(fake_gpu.data(), fake_gpu.size());
}

TEST(CudaDriver, SaysWhyItIsUnavailable) {
  const CudaDriver& d = CudaDriver::Get();
  if (d.available()) GTEST_SKIP() << "CUDA works here";
  EXPECT_FALSE(d.why().empty());
  EXPECT_FALSE(d.IsDevicePointer(&d));
  void* ctx = &ctx;
  EXPECT_FALSE(d.ContextFor(&d, &ctx).ok());
  EXPECT_EQ(ctx, nullptr);
}

}  // namespace

namespace {
TEST(Stager, PlaceCopiesHostChunksAndRefusesGpuChunksWithoutADriver) {
  OfferedGuard on(true);
  Stager s(false);
  auto src = Bytes(3000, 9);
  std::vector<uint8_t> dst(3000, 0);
  ASSERT_TRUE(s.Place(dst.data(), src.data(), src.size()).ok());
  EXPECT_EQ(dst, src);
  if (CudaDriver::Get().available()) return;
  std::vector<uint8_t> fake_gpu(4096, 0);
  GpuBuffers::Get().Add(fake_gpu.data(), fake_gpu.size(), reinterpret_cast<void*>(0x1));
  rr::Status st = s.Place(fake_gpu.data() + 8, src.data(), 100);
  EXPECT_EQ(st.code(), rr::Code::kUnhandledCuda) << st.message();
  EXPECT_EQ(fake_gpu[8], 0) << "a GPU chunk is never touched by the CPU";
  st = s.Place(dst.data(), fake_gpu.data() + 8, 100);   // the sender's eager copy out of a GPU buffer
  EXPECT_EQ(st.code(), rr::Code::kUnhandledCuda) << st.message();
  GpuBuffers::Get().Remove(fake_gpu.data(), fake_gpu.size());
}
}  // namespace
