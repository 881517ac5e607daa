// CopyEngine: moves bytes between a caller's buffer and a staging slot, then stores the slot's ticket
// into its ready flag (release order), so the link's progress path can poll SlotRing::Ready().
//
// Backends, chosen per link (ChooseStaging):
//   * CpuCopyEngine — one helper thread per engine, jobs done in submission order: memcpy for host
//     buffers (runs everywhere; what CI and RERAIL_FORCE_STAGING exercise), and for a job with a
//     cuda_ctx the CUDA driver's copy (CudaDriver::Copy: cuMemcpyAsync + sync of the thread's own
//     stream), which is how GPU buffers reach TCP links today.
//   * CUDA — pack/unpack kernels of librerail-kernels.so on a stream, the driver API opened at run
//     time with dlopen("libcuda.so.1") (CudaDriver); never linked, so the plugin loads without CUDA.
//
// Thread-safety: Submit/AllocHost/Stop from one owner thread; flags are written by the engine's
// thread. Errors: Submit returns InvalidArg for a bad job and InternalError after Stop(); a failed
// copy (CUDA launch error) is sticky and reported by Submit and Error().
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

#include "staging/slot_ring.h"

namespace rr::staging {

struct CopyJob {
  void* dst = nullptr;
  const void* src = nullptr;
  std::size_t bytes = 0;
  std::atomic<uint64_t>* flag = nullptr;  // receives `value` once the bytes are in dst
  uint64_t value = 0;
  void* cuda_ctx = nullptr;  // non-null: src or dst is GPU memory, copied by the CUDA driver in this context
};

class CopyEngine {
 public:
  virtual ~CopyEngine() = default;
  virtual const char* name() const = 0;
  virtual HostMemory AllocHost(std::size_t bytes) = 0;  // ptr == nullptr on failure
  virtual Status Submit(const CopyJob& job) = 0;
  virtual Status Error() const = 0;
  virtual void Stop() = 0;  // finishes queued jobs, then refuses new ones
};

class CpuCopyEngine final : public CopyEngine {
 public:
  CpuCopyEngine();
  ~CpuCopyEngine() override;
  const char* name() const override { return "cpu"; }
  HostMemory AllocHost(std::size_t bytes) override;
  Status Submit(const CopyJob& job) override;
  Status Error() const override;
  void Stop() override;
  uint64_t jobs_done() const { return done_.load(std::memory_order_relaxed); }

 private:
  void Run();
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<CopyJob> queue_;
  bool stopping_ = false;
  std::atomic<uint64_t> done_{0};
  Status error_;   // first failed CUDA copy (sticky), under mu_
  std::thread thread_;
};

// The CUDA driver, resolved at run time. Probe() says whether the CUDA backend can run here and,
// when not, why ("libcuda.so.1: cannot open shared object file", "cuInit: error 100", "no device").
struct CudaProbe {
  bool available = false;
  std::string why;
};
CudaProbe ProbeCuda();

// How one link carries a chunk. gpu_buffer: the chunk lives in GPU memory; link_gpu_direct: the
// link's NIC reads GPU memory itself (GDR); force: RERAIL_FORCE_STAGING (CPU backend for every
// chunk, host buffers included).
enum class StagingMode { kDirect, kCpu, kCuda, kImpossible };
StagingMode ChooseStaging(bool gpu_buffer, bool link_gpu_direct, bool cuda_available, bool force);
const char* StagingModeName(StagingMode m);

}  // namespace rr::staging
