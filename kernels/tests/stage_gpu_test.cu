// rerail-kernels-gpu-test: runs the staging kernels on a real GPU and checks them byte-exact against
// the host: Pack (GPU -> mapped host slot, checksum, fenced flag), Unpack (host -> GPU, done flag) and
// Checksum, for sizes 0..9 MiB+5, mutually misaligned source/destination offsets and several launch
// shapes. The checksum reference is the host build of index_math.h (tied to libxxhash's XXH64 by
// tests/unit/kernels/kernels_emu_test.cc). Exit 0: all checked; 1: a mismatch or a CUDA error;
// 77: no CUDA device (ctest SKIP_RETURN_CODE), so the test skips on machines without a GPU.
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "rerail/kernels/index_math.h"
#include "rerail/kernels/stage.h"

namespace rk = rerail::kernels;

namespace {
int g_fail = 0;
long g_checks = 0;

#define CK(x)                                                                        \
  do {                                                                               \
    cudaError_t e_ = (x);                                                            \
    if (e_ != cudaSuccess) {                                                         \
      std::fprintf(stderr, "FAIL: %s: %s\n", #x, cudaGetErrorString(e_));            \
      std::exit(1);                                                                  \
    }                                                                                \
  } while (0)

void Expect(bool ok, const char* what, std::size_t n, std::size_t so, std::size_t dof, unsigned blocks) {
  ++g_checks;
  if (ok) return;
  if (++g_fail <= 20)
    std::printf("FAIL: %s bytes=%zu src_off=%zu dst_off=%zu blocks=%u\n", what, n, so, dof, blocks);
}

// Waits for *flag == v with a timeout, as the progress path polls (no stream synchronisation).
bool Wait(const uint64_t* flag, uint64_t v) {
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (__atomic_load_n(flag, __ATOMIC_ACQUIRE) != v)
    if (std::chrono::steady_clock::now() > until) return false;
  return true;
}

uint64_t HostChecksum(const unsigned char* p, uint64_t n, uint64_t seed) {
  uint64_t nseg = rk::ChecksumSegments(n);
  std::vector<uint64_t> seg(nseg);
  rk::ChecksumThread(0, 1, p, n, seed, seg.data());
  return rk::ChecksumCombine(seg.data(), nseg, seed);
}
}  // namespace

int main() {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);   // lines reach a log file even if the process dies
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    std::printf("SKIP: no CUDA device\n");
    return 77;
  }
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device %s (sm_%d%d), kernels built for %s\n", prop.name, prop.major, prop.minor, rk::Architectures());

  const std::size_t kMax = (9u << 20) + 5, kPad = 64;
  std::vector<unsigned char> src(kMax + kPad);
  std::mt19937_64 rng(20261126);
  for (auto& b : src) b = static_cast<unsigned char>(rng());

  unsigned char *dsrc, *dback, *hslot;
  uint64_t *flag, *sum, *scratch;
  CK(cudaMalloc(&dsrc, kMax + kPad));
  CK(cudaMalloc(&dback, kMax + kPad));
  CK(cudaMalloc(&scratch, (rk::ChecksumSegments(kMax) + 2) * 8));
  CK(cudaHostAlloc(&hslot, kMax + kPad, cudaHostAllocMapped));
  CK(cudaHostAlloc(&flag, 64, cudaHostAllocMapped));
  CK(cudaHostAlloc(&sum, 64, cudaHostAllocMapped));
  CK(cudaMemcpy(dsrc, src.data(), src.size(), cudaMemcpyHostToDevice));
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  std::vector<unsigned char> back(kMax + kPad);

  const std::size_t sizes[] = {0, 1, 7, 15, 16, 17, 255, 4095, 65535, 65536, 65537, (1u << 20) + 3, kMax};
  const std::size_t offs[][2] = {{0, 0}, {1, 0}, {0, 5}, {3, 11}, {8, 8}, {15, 1}};
  const rk::LaunchShape shapes[] = {{}, {1, 32}, {3, 96}, {200, 1024}};
  uint64_t seq = 0;
  for (std::size_t n : sizes) {
    for (auto& o : offs) {
      for (const auto& shape : shapes) {
        if (n > (1u << 20) && shape.blocks == 1) continue;   // one warp over 9 MiB: slow, nothing new
        const std::size_t so = o[0], dof = o[1];
        const uint64_t seed = n * 31 + so;
        std::memset(hslot, 0xEE, n + kPad);
        *sum = 0;
        int e = rk::Pack(dsrc + so, hslot + dof, n, flag, ++seq, sum, scratch, seed, st, shape);
        if (e) { std::printf("FAIL: Pack: %s\n", rk::Error(e)); return 1; }
        bool arrived = Wait(flag, seq);
        Expect(arrived, "pack flag never arrived", n, so, dof, shape.blocks);
        if (!arrived) { CK(cudaStreamSynchronize(st)); continue; }
        Expect(std::memcmp(hslot + dof, src.data() + so, n) == 0, "pack bytes", n, so, dof, shape.blocks);
        bool guard = true;   // nothing written past the chunk
        for (std::size_t i = 0; i < 16; ++i) guard &= hslot[dof + n + i] == 0xEE;
        Expect(guard, "pack wrote past the chunk", n, so, dof, shape.blocks);
        Expect(*sum == HostChecksum(src.data() + so, n, seed), "pack checksum", n, so, dof, shape.blocks);

        CK(cudaMemsetAsync(dback, 0, n + kPad, st));
        e = rk::Unpack(hslot + dof, dback + so, n, flag, ++seq, st, shape);
        if (e) { std::printf("FAIL: Unpack: %s\n", rk::Error(e)); return 1; }
        arrived = Wait(flag, seq);
        Expect(arrived, "unpack flag never arrived", n, so, dof, shape.blocks);
        CK(cudaStreamSynchronize(st));
        CK(cudaMemcpy(back.data(), dback, n + kPad, cudaMemcpyDeviceToHost));
        Expect(std::memcmp(back.data() + so, src.data() + so, n) == 0, "unpack bytes", n, so, dof, shape.blocks);
        bool clean = true;
        for (std::size_t i = 0; i < so; ++i) clean &= back[i] == 0;
        for (std::size_t i = so + n; i < n + kPad; ++i) clean &= back[i] == 0;
        Expect(clean, "unpack wrote outside the chunk", n, so, dof, shape.blocks);

        *sum = 0;
        e = rk::Checksum(dsrc + so, n, seed ^ 1, sum, scratch, st, shape);
        if (e) { std::printf("FAIL: Checksum: %s\n", rk::Error(e)); return 1; }
        CK(cudaStreamSynchronize(st));
        Expect(*sum == HostChecksum(src.data() + so, n, seed ^ 1), "checksum (device memory)", n, so, dof, shape.blocks);
      }
    }
  }
  // A flipped bit on the GPU side changes the checksum.
  CK(cudaMemcpy(dsrc + 1000, "\x01", 1, cudaMemcpyHostToDevice));
  *sum = 0;
  if (int e = rk::Checksum(dsrc, 65536, 5, sum, scratch, st)) { std::printf("FAIL: Checksum: %s\n", rk::Error(e)); return 1; }
  CK(cudaStreamSynchronize(st));
  src[1000] = 1;
  Expect(*sum == HostChecksum(src.data(), 65536, 5), "checksum after a flipped byte", 65536, 0, 0, 0);
  std::printf("%s: %ld checks, %d failed\n", g_fail ? "FAIL" : "PASS", g_checks, g_fail);
  return g_fail ? 1 : 0;
}
