// Stager: sends and receives a comm's chunks through host bounce slots when the link cannot carry
// them directly:
//   * GPU buffers (NCCL_PTR_CUDA registrations, see GpuBuffers below): TCP cannot read or write GPU
//     memory, so every chunk of a registered GPU range is copied by the CUDA driver (CudaDriver).
//   * RERAIL_FORCE_STAGING=1: host buffers too, through memcpy into the slots, so the functional
//     and fault suites exercise the staged path on hosts without a GPU.
//   sender:   Pack(key, payload, len) copies the payload into the stream's bounce slot (host memory:
//             memcpy; GPU memory: the CUDA driver, one DMA into a pinned slot from the PinnedPool;
//             both on the calling thread) and returns the slot: the stream writes the
//             frame from there. A stream fetches its next frame only once the previous one is fully
//             written, so its slot is reused only after the wire is done with it. A payload that
//             needs no staging is returned as is.
//   receiver: Divert(key, dst, len) returns the slot the stream reads the payload into and remembers
//             dst; Land(key) unpacks the slot into dst and returns once the bytes are there (the
//             iflush point: the chunk is reported placed only after it).
// `key` names one stream of one link (link index * 256 + stream). One owner thread (the comm's).
// Errors: a failed copy (CUDA error) or a slot that cannot be allocated makes Pack and Divert
// return nullptr and Land false; error() says why.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "rerail/status.h"

namespace rr::staging {

// The GPU ranges NCCL registered with regMr(NCCL_PTR_CUDA), process-wide (a range registered by
// several comms is counted), and whether the plugin offers GPU buffers at all. Thread-safe.
class GpuBuffers {
 public:
  static GpuBuffers& Get();
  // Decided once at init: RERAIL_GPU_BUFFERS=1 or RERAIL_FORCE_STAGING=1, and the CUDA driver works.
  void SetOffered(bool on) { offered_.store(on, std::memory_order_relaxed); }
  bool offered() const { return offered_.load(std::memory_order_relaxed); }
  void Add(const void* base, std::size_t size, void* ctx);
  void Remove(const void* base, std::size_t size);
  // The context of the registered GPU range holding [p, p + len), or nullptr if none does.
  void* Find(const void* p, std::size_t len) const;
  std::size_t ranges() const;

 private:
  struct Range {
    uintptr_t base;
    std::size_t size;
    void* ctx;
    int refs;
  };
  std::atomic<bool> offered_{false};
  mutable std::mutex mu_;
  std::vector<Range> ranges_;
};

// Page-locked bounce slots for GPU chunks, process-wide, pinned once at init (Plugin::Init when GPU
// buffers are offered) and never unpinned. Not at first use: on an H200, cuMemHostRegister from
// NCCL's proxy thread inside a collective never returned (the driver waited for the device, whose
// NCCL kernel spun for the very chunk that thread was about to copy). A stager takes one slot per
// stream of a link it sends or receives GPU chunks on and gives it back when it goes; beyond the
// pool, chunks go through pageable slots (correct, slower). Thread-safe.
class PinnedPool {
 public:
  static PinnedPool& Get();
  // Pins `count` more slots of `bytes` each: one allocation, one cuMemHostRegister through ctx.
  Status Grow(void* ctx, std::size_t bytes, std::size_t count);
  // A free slot of at least len bytes (its size in *cap), or nullptr when none is.
  uint8_t* Take(std::size_t len, std::size_t* cap);
  void Give(uint8_t* p, std::size_t cap);
  std::size_t free_slots() const;

 private:
  mutable std::mutex mu_;
  std::vector<std::pair<uint8_t*, std::size_t>> free_;
};

class Stager {
 public:
  // nullptr unless RERAIL_FORCE_STAGING=1 or GPU buffers are offered.
  static std::unique_ptr<Stager> FromParams();
  explicit Stager(bool force_host) : force_host_(force_host) {}
  ~Stager();
  Stager(const Stager&) = delete;
  Stager& operator=(const Stager&) = delete;

  const uint8_t* Pack(int key, const uint8_t* payload, std::size_t len);
  uint8_t* Divert(int key, uint8_t* dst, std::size_t len);
  bool Land(int key);
  // Copies between the core's own host memory and NCCL's buffer, either of which may be GPU memory
  // (the sender's eager copy at isend; a stashed eager chunk into its posted receive): through the
  // driver when one side is a registered GPU range, else memcpy. Returns once the bytes are there.
  Status Place(void* dst, const void* src, std::size_t len);
  uint64_t staged_bytes() const { return staged_; }
  uint64_t gpu_bytes() const { return gpu_; }
  // Slots taken from the PinnedPool (0 where none was used for GPU memory or the pool was empty).
  std::size_t pinned_slots() const;
  const Status& error() const { return error_; }

 private:
  struct Slot {
    uint8_t* buf = nullptr;   // page-aligned, cap bytes
    std::size_t cap = 0;
    bool pinned = false;      // from the PinnedPool (else aligned_alloc'd, pageable)
    uint8_t* dst = nullptr;   // receiver: the posted buffer the slot lands in
    std::size_t len = 0;
    void* ctx = nullptr;      // receiver: dst is GPU memory of this context
  };
  // The stream's slot with room for len bytes, a pinned one from the pool if gpu_ctx is set and the
  // pool has one; nullptr (error_ says why) when memory runs out.
  Slot* Get(int key, std::size_t len, void* gpu_ctx);
  void Release(Slot& s);
  bool Copy(void* dst, const void* src, std::size_t len, void* ctx);

  bool force_host_;
  std::unordered_map<int, std::unique_ptr<Slot>> slots_;
  std::vector<std::pair<void*, void*>> streams_;   // context -> the stream this stager copies on
  uint64_t staged_ = 0;
  uint64_t gpu_ = 0;
  Status error_;
};

}  // namespace rr::staging
