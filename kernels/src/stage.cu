// Staging kernels: the per-thread work lives in index_math.h (shared with the host emulation test);
// this file only maps grid coordinates onto it and launches.
#include "rerail/kernels/stage.h"

#include <cuda_runtime.h>

#include "rerail/kernels/index_math.h"

namespace rerail::kernels {
namespace {

__device__ __forceinline__ uint64_t Tid() { return uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ __forceinline__ uint64_t Nthreads() { return uint64_t(gridDim.x) * blockDim.x; }

__global__ void CopyKernel(CopyPlan plan, const unsigned char* src, unsigned char* dst) {
  CopyThread(plan, Tid(), Nthreads(), src, dst);
  __threadfence_system();   // the copied bytes are visible system-wide before the flag kernel runs
}

__global__ void ChecksumKernel(const unsigned char* data, uint64_t bytes, uint64_t seed, uint64_t* seg) {
  ChecksumThread(Tid(), Nthreads(), data, bytes, seed, seg);
  __threadfence_system();
}

// Runs after the copy (and checksum) kernels on the same stream: one thread.
__global__ void FinishKernel(const uint64_t* seg, uint64_t nseg, uint64_t seed, uint64_t* checksum_out,
                             uint64_t* flag, uint64_t flag_value) {
  if (checksum_out) *reinterpret_cast<volatile uint64_t*>(checksum_out) = ChecksumCombine(seg, nseg, seed);
  __threadfence_system();
  if (flag) *reinterpret_cast<volatile uint64_t*>(flag) = flag_value;
}

unsigned Blocks(std::size_t units, LaunchShape s) {
  if (s.blocks) return s.blocks;
  static int sms = [] {
    int dev = 0, n = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev))
      return 80;
    return n;
  }();
  std::size_t want = (units + s.threads - 1) / s.threads;
  std::size_t cap = std::size_t(sms) * 4;
  return unsigned(want == 0 ? 1 : (want < cap ? want : cap));
}

int Copy(const void* src, void* dst, std::size_t bytes, cudaStream_t st, LaunchShape shape) {
  if (bytes == 0) return 0;
  CopyPlan plan = MakeCopyPlan(uintptr_t(src), uintptr_t(dst), bytes);
  std::size_t units = plan.nvec ? plan.nvec : plan.head;
  CopyKernel<<<Blocks(units, shape), shape.threads, 0, st>>>(
      plan, static_cast<const unsigned char*>(src), static_cast<unsigned char*>(dst));
  return int(cudaGetLastError());
}

}  // namespace

int Checksum(const void* data, std::size_t bytes, uint64_t seed, uint64_t* out, uint64_t* seg_scratch,
             void* stream, LaunchShape shape) {
  auto st = static_cast<cudaStream_t>(stream);
  uint64_t nseg = ChecksumSegments(bytes);
  ChecksumKernel<<<Blocks(nseg, shape), shape.threads, 0, st>>>(static_cast<const unsigned char*>(data), bytes,
                                                                  seed, seg_scratch);
  if (int e = int(cudaGetLastError())) return e;
  FinishKernel<<<1, 1, 0, st>>>(seg_scratch, nseg, seed, out, nullptr, 0);
  return int(cudaGetLastError());
}

int Pack(const void* gpu_src, void* host_slot, std::size_t bytes, uint64_t* ready_flag, uint64_t flag_value,
         uint64_t* checksum_out, uint64_t* seg_scratch, uint64_t seed, void* stream, LaunchShape shape) {
  auto st = static_cast<cudaStream_t>(stream);
  if (int e = Copy(gpu_src, host_slot, bytes, st, shape)) return e;
  uint64_t nseg = ChecksumSegments(bytes);
  if (checksum_out) {
    ChecksumKernel<<<Blocks(nseg, shape), shape.threads, 0, st>>>(static_cast<const unsigned char*>(gpu_src),
                                                                    bytes, seed, seg_scratch);
    if (int e = int(cudaGetLastError())) return e;
  }
  FinishKernel<<<1, 1, 0, st>>>(seg_scratch, nseg, seed, checksum_out, ready_flag, flag_value);
  return int(cudaGetLastError());
}

int Unpack(const void* host_slot, void* gpu_dst, std::size_t bytes, uint64_t* done_flag, uint64_t flag_value,
           void* stream, LaunchShape shape) {
  auto st = static_cast<cudaStream_t>(stream);
  if (int e = Copy(host_slot, gpu_dst, bytes, st, shape)) return e;
  if (!done_flag) return 0;
  FinishKernel<<<1, 1, 0, st>>>(nullptr, 0, 0, nullptr, done_flag, flag_value);
  return int(cudaGetLastError());
}

const char* Error(int code) { return cudaGetErrorString(static_cast<cudaError_t>(code)); }

const char* Architectures() { return RERAIL_KERNEL_ARCHS; }

}  // namespace rerail::kernels
