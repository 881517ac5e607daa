// Stager on a real GPU (issue 13): chunks of cudaMalloc'd buffers leave through a page-locked host
// slot from the PinnedPool (one DMA, not the driver's own bounce buffers; pageable once the pool is
// empty) and land byte-exact; the copy runs
// on the calling thread, which keeps the CUDA context it had (NCCL's proxy thread has its own
// current; a thread with none keeps none). Every test skips where no CUDA device works (CI).
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

#include "staging/cuda_driver.h"
#include "staging/stager.h"

using rr::staging::CudaDriver;
using rr::staging::GpuBuffers;
using rr::staging::PinnedPool;
using rr::staging::Stager;

namespace {

bool HaveGpu() {
  int n = 0;
  return CudaDriver::Get().available() && cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

// The driver's view of the calling thread's current context (not linked: CI has no libcuda).
void* CurrentContext() {
  static auto get = reinterpret_cast<int (*)(void**)>(dlsym(dlopen("libcuda.so.1", RTLD_NOW), "cuCtxGetCurrent"));
  void* ctx = nullptr;
  if (get == nullptr || get(&ctx) != 0) return reinterpret_cast<void*>(-1);
  return ctx;
}

struct GpuRange {   // cudaMalloc'd bytes registered as NCCL would with regMr(NCCL_PTR_CUDA)
  explicit GpuRange(std::size_t n) : size(n) {
    EXPECT_EQ(cudaMalloc(&p, n), cudaSuccess);
    EXPECT_TRUE(CudaDriver::Get().ContextFor(p, &ctx).ok());
    GpuBuffers::Get().Add(p, n, ctx);
  }
  ~GpuRange() {
    GpuBuffers::Get().Remove(p, size);
    cudaFree(p);
  }
  uint8_t* bytes() const { return static_cast<uint8_t*>(p); }
  void* p = nullptr;
  void* ctx = nullptr;
  std::size_t size;
};

std::vector<uint8_t> Pattern(std::size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 13 + (i >> 9));
  return v;
}

TEST(StagerGpu, ChunksLeaveThroughAPinnedSlotAndLandByteExact) {
  if (!HaveGpu()) GTEST_SKIP() << "no CUDA device: " << CudaDriver::Get().why();
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  GpuBuffers::Get().SetOffered(true);
  constexpr std::size_t kBytes = 3 << 20;
  GpuRange src(kBytes), dst(kBytes);
  auto want = Pattern(kBytes, 7);
  ASSERT_EQ(cudaMemcpy(src.p, want.data(), kBytes, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemset(dst.p, 0, kBytes), cudaSuccess);
  void* ctx = nullptr;
  ASSERT_TRUE(CudaDriver::Get().ContextFor(nullptr, &ctx).ok());
  ASSERT_TRUE(PinnedPool::Get().Grow(ctx, 1 << 20, 3).ok());   // as Plugin::Init pins them
  ASSERT_EQ(PinnedPool::Get().free_slots(), 3u);
  Stager tx(false), rx(false);
  // chunks of varying size and offset, as the scheduler cuts them (a slot grows and is re-pinned)
  std::size_t sizes[] = {1, 4096, 131072, 65537, 1 << 20, 3};
  std::size_t off = 0;
  for (int round = 0; off < kBytes; ++round) {
    std::size_t n = std::min(sizes[round % 6], kBytes - off);
    const uint8_t* slot = tx.Pack(round % 2, src.bytes() + off, n);
    ASSERT_NE(slot, nullptr) << tx.error().message();
    ASSERT_NE(slot, src.bytes() + off) << "a GPU chunk must leave through a host slot";
    ASSERT_EQ(std::memcmp(slot, want.data() + off, n), 0) << "packed bytes, chunk at " << off;
    cudaPointerAttributes a{};
    ASSERT_EQ(cudaPointerGetAttributes(&a, slot), cudaSuccess);
    EXPECT_EQ(a.type, cudaMemoryTypeHost) << "the slot is page-locked for the driver";
    uint8_t* into = rx.Divert(3, dst.bytes() + off, n);
    ASSERT_NE(into, nullptr) << rx.error().message();
    ASSERT_NE(into, dst.bytes() + off);
    std::memcpy(into, slot, n);   // "the wire"
    ASSERT_TRUE(rx.Land(3)) << rx.error().message();
    off += n;
  }
  std::vector<uint8_t> got(kBytes);
  ASSERT_EQ(cudaMemcpy(got.data(), dst.p, kBytes, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(got, want);
  EXPECT_EQ(tx.gpu_bytes(), kBytes);
  EXPECT_EQ(rx.gpu_bytes(), kBytes);
  EXPECT_EQ(tx.pinned_slots(), 2u);
  EXPECT_EQ(rx.pinned_slots(), 1u);
  EXPECT_EQ(PinnedPool::Get().free_slots(), 0u);
  {  // the pool is empty: a chunk still goes through, from a pageable slot
    Stager more(false);
    const uint8_t* slot = more.Pack(0, src.bytes() + 9, 70000);
    ASSERT_NE(slot, nullptr) << more.error().message();
    EXPECT_EQ(std::memcmp(slot, want.data() + 9, 70000), 0);
    EXPECT_EQ(more.pinned_slots(), 0u);
  }
  // the eager path: core host memory <-> GPU buffer
  std::vector<uint8_t> eager(1000);
  ASSERT_TRUE(tx.Place(eager.data(), src.bytes() + 5, eager.size()).ok());
  EXPECT_EQ(std::memcmp(eager.data(), want.data() + 5, eager.size()), 0);
  GpuBuffers::Get().SetOffered(false);
}

TEST(StagerGpu, SlotsGoBackToThePoolWithTheirStager) {
  if (!HaveGpu()) GTEST_SKIP() << "no CUDA device: " << CudaDriver::Get().why();
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  GpuBuffers::Get().SetOffered(true);
  GpuRange src(1 << 20);
  std::size_t before = PinnedPool::Get().free_slots();
  void* ctx = nullptr;
  ASSERT_TRUE(CudaDriver::Get().ContextFor(nullptr, &ctx).ok());
  ASSERT_TRUE(PinnedPool::Get().Grow(ctx, 256 << 10, 2).ok());
  {
    Stager s(false);
    ASSERT_NE(s.Pack(0, src.bytes(), 4096), nullptr) << s.error().message();
    ASSERT_NE(s.Pack(1, src.bytes(), 8192), nullptr) << s.error().message();
    EXPECT_EQ(s.pinned_slots(), 2u);
    EXPECT_EQ(PinnedPool::Get().free_slots(), before);
  }
  EXPECT_EQ(PinnedPool::Get().free_slots(), before + 2);
  GpuBuffers::Get().SetOffered(false);
}

TEST(StagerGpu, TheCallingThreadKeepsItsContext) {
  if (!HaveGpu()) GTEST_SKIP() << "no CUDA device: " << CudaDriver::Get().why();
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  GpuBuffers::Get().SetOffered(true);
  GpuRange src(1 << 20);
  ASSERT_EQ(cudaMemset(src.p, 0x5a, src.size), cudaSuccess);
  // a thread with no current context (as a helper thread of NCCL's may be) keeps none
  std::thread t([&] {
    ASSERT_EQ(CurrentContext(), nullptr);
    Stager s(false);
    const uint8_t* slot = s.Pack(0, src.bytes(), 4096);
    ASSERT_NE(slot, nullptr) << s.error().message();
    EXPECT_EQ(slot[4095], 0x5a);
    EXPECT_EQ(CurrentContext(), nullptr) << "the copy left its context current on the caller";
  });
  t.join();
  // a thread with the device's context current (NCCL's proxy thread) keeps it
  void* before = CurrentContext();
  ASSERT_NE(before, nullptr);
  Stager s(false);
  ASSERT_NE(s.Pack(0, src.bytes() + 1, 4096), nullptr) << s.error().message();
  EXPECT_EQ(CurrentContext(), before);
  GpuBuffers::Get().SetOffered(false);
}

}  // namespace
