#include "staging/copy_engine.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

#include "staging/cuda_driver.h"

namespace rr::staging {

CpuCopyEngine::CpuCopyEngine() : thread_([this] { Run(); }) {}

CpuCopyEngine::~CpuCopyEngine() {
  Stop();
  if (thread_.joinable()) thread_.join();
}

HostMemory CpuCopyEngine::AllocHost(std::size_t bytes) {
  void* p = std::aligned_alloc(64, (bytes + 63) & ~std::size_t(63));
  return HostMemory{p, [](void* q) { std::free(q); }};
}

Status CpuCopyEngine::Submit(const CopyJob& job) {
  if (!job.flag || (job.bytes > 0 && (!job.dst || !job.src)))
    return Status::InvalidArg("staging: copy job without buffers or flag");
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (stopping_) return Status::Internal("staging: copy submitted to a stopped cpu engine");
    queue_.push_back(job);
  }
  cv_.notify_one();
  return Status::Ok();
}

Status CpuCopyEngine::Error() const {
  std::lock_guard<std::mutex> lk(mu_);
  return error_;
}

void CpuCopyEngine::Stop() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stopping_ = true;
  }
  cv_.notify_one();
}

void CpuCopyEngine::Run() {
  std::vector<std::pair<void*, void*>> streams;   // context -> this thread's stream
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    cv_.wait(lk, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) {   // stopping and drained
      for (auto& [ctx, stream] : streams) CudaDriver::Get().DestroyStream(ctx, stream);
      return;
    }
    CopyJob j = queue_.front();
    queue_.pop_front();
    lk.unlock();
    Status st;
    if (j.cuda_ctx != nullptr) {
      auto it = std::find_if(streams.begin(), streams.end(), [&](const auto& e) { return e.first == j.cuda_ctx; });
      if (it == streams.end()) it = streams.insert(streams.end(), {j.cuda_ctx, nullptr});
      st = CudaDriver::Get().Copy(j.cuda_ctx, &it->second, j.dst, j.src, j.bytes);
    } else if (j.bytes) {
      std::memcpy(j.dst, j.src, j.bytes);
    }
    lk.lock();
    if (!st.ok() && error_.ok()) error_ = st;   // set before the flag: a waiter that sees it sees the error
    lk.unlock();
    j.flag->store(j.value, std::memory_order_release);
    done_.fetch_add(1, std::memory_order_relaxed);
    lk.lock();
  }
}

CudaProbe ProbeCuda() {
  const CudaDriver& d = CudaDriver::Get();
  return CudaProbe{d.available(), d.why()};
}

StagingMode ChooseStaging(bool gpu_buffer, bool link_gpu_direct, bool cuda_available, bool force) {
  if (force && !gpu_buffer) return StagingMode::kCpu;   // memcpy cannot read GPU memory
  if (!gpu_buffer || (link_gpu_direct && !force)) return StagingMode::kDirect;
  return cuda_available ? StagingMode::kCuda : StagingMode::kImpossible;
}

const char* StagingModeName(StagingMode m) {
  switch (m) {
    case StagingMode::kDirect: return "direct";
    case StagingMode::kCpu: return "cpu";
    case StagingMode::kCuda: return "cuda";
    case StagingMode::kImpossible: return "impossible";
  }
  return "?";
}

}  // namespace rr::staging
