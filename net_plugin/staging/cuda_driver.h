// CudaDriver: the few CUDA driver calls the staging path needs, resolved at run time with
// dlopen("libcuda.so.1") so the plugin never links CUDA and loads on hosts without it.
//
// Get() loads once (thread-safe) and never unloads: the driver must outlive every context.
// available() is false with why() saying so ("libcuda.so.1: cannot open shared object file",
// "cuInit: error 100 (no CUDA-capable device is detected)", "no CUDA device").
//
// Copy() moves bytes under unified addressing (any mix of GPU, pinned and pageable memory): `ctx`
// made current on the calling thread, cuMemcpyAsync on a non-blocking stream of that thread's own,
// then cuStreamSynchronize of that stream alone, so it returns once the bytes are in dst (a plain
// cuMemcpy from pageable memory may return before the DMA lands) and never waits for NCCL's kernels.
// The caller owns the stream (`*stream`, created on first use, freed with DestroyStream) and may be
// any thread: the calling thread's current context is put back before Copy returns, so NCCL's proxy
// thread keeps its own.
// PinHost() page-locks host memory for every context (cuMemHostRegister, PORTABLE) for good: a copy
// between GPU memory and pinned memory is one DMA, while pageable memory goes through the driver's
// own bounce buffers (0.52 vs 0.80 of host buffers on an H200). Never from a thread that NCCL's
// running kernels wait on (staging::PinnedPool).
// ContextFor() finds the context to copy a GPU buffer with: the caller's current context (NCCL's
// proxy threads have the device's context current), else the primary context of the device the
// pointer lives on (also right for cuMem*/VMM allocations, which carry no context attribute); ptr
// nullptr: device 0's.
#pragma once

#include <cstddef>
#include <string>

#include "rerail/status.h"

namespace rr::staging {

class CudaDriver {
 public:
  static CudaDriver& Get();
  bool available() const { return available_; }
  const std::string& why() const { return why_; }

  // True if ptr is GPU (device) memory; false for host memory or when the driver does not know it.
  bool IsDevicePointer(const void* ptr) const;
  Status ContextFor(const void* ptr, void** ctx) const;
  Status Copy(void* ctx, void** stream, void* dst, const void* src, std::size_t bytes) const;
  void DestroyStream(void* ctx, void* stream) const;
  Status PinHost(void* ctx, void* p, std::size_t bytes) const;

 private:
  CudaDriver();
  std::string Error(const char* call, int code) const;

  bool available_ = false;
  std::string why_;
  using CUresult = int;
  using CUdeviceptr = unsigned long long;
  CUresult (*init_)(unsigned) = nullptr;
  CUresult (*device_count_)(int*) = nullptr;
  CUresult (*ctx_get_current_)(void**) = nullptr;
  CUresult (*ctx_set_current_)(void*) = nullptr;
  CUresult (*primary_ctx_retain_)(void**, int) = nullptr;
  CUresult (*pointer_get_attribute_)(void*, int, CUdeviceptr) = nullptr;
  CUresult (*memcpy_async_)(CUdeviceptr, CUdeviceptr, std::size_t, void*) = nullptr;
  CUresult (*stream_create_)(void**, unsigned) = nullptr;
  CUresult (*stream_synchronize_)(void*) = nullptr;
  CUresult (*stream_destroy_)(void*) = nullptr;
  CUresult (*host_register_)(void*, std::size_t, unsigned) = nullptr;
  CUresult (*get_error_string_)(CUresult, const char**) = nullptr;
};

}  // namespace rr::staging
