// rerail-stage-bench: GPU -> pinned host staging throughput, the rerail kernels (Pack: copy + fenced
// flag in one stream) against cudaMemcpyAsync followed by a stream-ordered flag write
// (cuStreamWriteValue64 is driver API; cudaMemcpyAsync of the flag value is the runtime equivalent).
// Both wait on the host by polling the flag, as the progress path does. Prints one row per size.
// Usage: rerail-stage-bench [max_bytes] [iters]. Needs a GPU; exits 2 with a message without one.
#include <cuda_runtime.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "rerail/kernels/stage.h"

namespace {
#define CK(x)                                                                   \
  do {                                                                          \
    cudaError_t e_ = (x);                                                       \
    if (e_ != cudaSuccess) {                                                    \
      std::fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_));             \
      std::exit(1);                                                             \
    }                                                                           \
  } while (0)

void Wait(volatile uint64_t* flag, uint64_t v) {
  while (__atomic_load_n(const_cast<uint64_t*>(flag), __ATOMIC_ACQUIRE) != v) {
  }
}
double Now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
}  // namespace

int main(int argc, char** argv) {
  std::size_t max_bytes = argc > 1 ? std::strtoull(argv[1], nullptr, 0) : (64u << 20);
  int iters = argc > 2 ? std::atoi(argv[2]) : 50;
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::fprintf(stderr, "rerail-stage-bench: no CUDA device\n");
    return 2;
  }
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("# device %s (sm_%d%d), kernels built for %s\n", prop.name, prop.major, prop.minor,
              rerail::kernels::Architectures());
  void *dsrc, *hslot, *dback;
  uint64_t *flag, *scratch, *sum;
  CK(cudaMalloc(&dsrc, max_bytes));
  CK(cudaMalloc(&dback, max_bytes));
  CK(cudaMalloc(&scratch, (max_bytes / 65536 + 2) * 8));
  CK(cudaHostAlloc(&hslot, max_bytes, cudaHostAllocMapped));
  CK(cudaHostAlloc(reinterpret_cast<void**>(&flag), 64, cudaHostAllocMapped));
  CK(cudaHostAlloc(reinterpret_cast<void**>(&sum), 64, cudaHostAllocMapped));
  CK(cudaMemset(dsrc, 0x5A, max_bytes));
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  uint64_t* hval;
  CK(cudaHostAlloc(reinterpret_cast<void**>(&hval), 64, 0));
  uint64_t seq = 0;
  std::printf("%12s %12s %12s %12s %12s  %s\n", "bytes", "pack GB/s", "memcpy GB/s", "unpack GB/s",
              "pack+xxh GB/s", "check");
  for (std::size_t b = 4096; b <= max_bytes; b *= 4) {
    double t0 = Now();
    for (int i = 0; i < iters; ++i) {
      int e = rerail::kernels::Pack(dsrc, hslot, b, flag, ++seq, nullptr, nullptr, 0, st);
      if (e) { std::fprintf(stderr, "Pack: %s\n", rerail::kernels::Error(e)); return 1; }
      Wait(flag, seq);
    }
    double tk = (Now() - t0) / iters;
    t0 = Now();
    for (int i = 0; i < iters; ++i) {
      CK(cudaMemcpyAsync(hslot, dsrc, b, cudaMemcpyDeviceToHost, st));
      *hval = ++seq;
      CK(cudaMemcpyAsync(flag, hval, 8, cudaMemcpyHostToHost, st));
      Wait(flag, seq);
    }
    double tm = (Now() - t0) / iters;
    t0 = Now();
    for (int i = 0; i < iters; ++i) {
      int e = rerail::kernels::Unpack(hslot, dback, b, flag, ++seq, st);
      if (e) { std::fprintf(stderr, "Unpack: %s\n", rerail::kernels::Error(e)); return 1; }
      Wait(flag, seq);
    }
    double tu = (Now() - t0) / iters;
    t0 = Now();
    for (int i = 0; i < iters; ++i) {
      int e = rerail::kernels::Pack(dsrc, hslot, b, flag, ++seq, sum, scratch, 7, st);
      if (e) { std::fprintf(stderr, "Pack: %s\n", rerail::kernels::Error(e)); return 1; }
      Wait(flag, seq);
    }
    double tx = (Now() - t0) / iters;
    bool ok = true;
    for (std::size_t i = 0; i < b; ++i) ok &= static_cast<unsigned char*>(hslot)[i] == 0x5A;
    std::printf("%12zu %12.2f %12.2f %12.2f %12.2f  %s\n", b, b / tk / 1e9, b / tm / 1e9, b / tu / 1e9,
                b / tx / 1e9, ok ? "ok" : "WRONG");
    if (!ok) return 1;
  }
  return 0;
}
