// Per-thread ring buffers of raw profiler records: the only thing NCCL's threads touch.
//
// Contract
//   * Each thread that calls into the profiler gets its own single-producer/single-consumer ring on first
//     use (ThreadRing()). The producer is that thread; the consumer is the collector thread (Drain()).
//     Neither side ever blocks or takes a lock after the first call of a thread (which registers its ring
//     under a mutex).
//   * Capacity is fixed at creation (RERAIL_PROFILE_RING records, a power of 2, 128 B each). When the ring
//     is full the new record is dropped and counted (Ring::dropped); nothing else is lost or reordered.
//   * Event handles are ids, not pointers: bits 0..35 a per-thread sequence (never 0), 36..55 the ring's
//     thread index, 56..59 log2 of the NCCL event type, bit 60 set for rerail net events. The type and the
//     rerail flag can thus be read back from a handle in stop/recordEventState without any lookup.
//   * A ring whose thread exited is marked abandoned; the collector frees it once it is drained.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace rr::prof {

class Context;

// What a record says happened.
enum class RecOp : uint8_t {
  kBegin = 1,  // startEvent: ts, id, parent, ctx, type, payload = descriptor union (or net descriptor)
  kEnd = 2,    // stopEvent: ts, id
  kState = 3,  // recordEventState: ts, id, state, payload = state args (or net descriptor on update)
};

constexpr size_t kPayloadBytes = 88;  // the descriptor union of v5/v6

struct Record {
  uint64_t ts;      // CLOCK_MONOTONIC ns
  uint64_t id;      // event handle
  uint64_t parent;  // kBegin: parent handle (0 = none)
  Context* ctx;     // kBegin: the communicator context
  uint32_t type;    // kBegin: RR_PROF_* bit
  RecOp op;
  uint8_t pad;
  uint16_t state;  // kState: NCCL state value
  alignas(8) unsigned char payload[kPayloadBytes];
};
static_assert(sizeof(Record) == 128, "records are two cache lines");

namespace handle {
constexpr int kSeqBits = 36;
constexpr int kThreadBits = 20;
constexpr int kTypeShift = 56;
constexpr uint64_t kRerailNet = 1ull << 60;
inline uint64_t Make(uint64_t seq, uint32_t thread, int typeIndex, bool rerailNet) {
  return (seq & ((1ull << kSeqBits) - 1)) |
         (static_cast<uint64_t>(thread & ((1u << kThreadBits) - 1)) << kSeqBits) |
         (static_cast<uint64_t>(typeIndex & 0xf) << kTypeShift) | (rerailNet ? kRerailNet : 0);
}
inline uint32_t TypeBit(uint64_t id) {
  return 1u << ((id >> kTypeShift) & 0xf);
}
inline bool IsRerailNet(uint64_t id) {
  return (id & kRerailNet) != 0;
}
}  // namespace handle

class Ring {
 public:
  Ring(size_t capacity, uint32_t thread_index);
  Ring(const Ring&) = delete;
  Ring& operator=(const Ring&) = delete;

  // Producer side. Claim() returns a slot or nullptr (full: counted as dropped); Publish() makes the
  // claimed slot visible. Exactly one Publish() per successful Claim().
  Record* Claim() {
    uint64_t h = head_.load(std::memory_order_relaxed);
    if (h - tail_cache_ >= cap_) {
      tail_cache_ = tail_.load(std::memory_order_acquire);
      if (h - tail_cache_ >= cap_) {
        dropped_.fetch_add(1, std::memory_order_relaxed);
        return nullptr;
      }
    }
    return &slots_[h & mask_];
  }
  void Publish() { head_.store(head_.load(std::memory_order_relaxed) + 1, std::memory_order_release); }
  uint64_t NextId(int typeIndex, bool rerailNet) {
    return handle::Make(++seq_, thread_, typeIndex, rerailNet);
  }

  // Consumer side: appends every published record to `out`; returns how many.
  size_t Drain(std::vector<Record>* out);

  uint64_t Dropped() const { return dropped_.load(std::memory_order_relaxed); }
  bool Abandoned() const { return abandoned_.load(std::memory_order_acquire); }
  void Abandon() { abandoned_.store(true, std::memory_order_release); }
  bool Empty() const {
    return head_.load(std::memory_order_acquire) == tail_.load(std::memory_order_relaxed);
  }
  size_t Capacity() const { return cap_; }

 private:
  const size_t cap_;
  const uint64_t mask_;
  const uint32_t thread_;
  std::unique_ptr<Record[]> slots_;
  alignas(64) std::atomic<uint64_t> head_{0};
  uint64_t tail_cache_ = 0;
  uint64_t seq_ = 0;
  alignas(64) std::atomic<uint64_t> tail_{0};
  std::atomic<uint64_t> dropped_{0};
  std::atomic<bool> abandoned_{false};
};

// The calling thread's ring (created and registered on first use with `capacity`, rounded up to 2^k).
Ring* ThreadRing(size_t capacity);

// Every registered ring. Called by the collector only.
class RingRegistry {
 public:
  static RingRegistry& Get();
  Ring* Create(size_t capacity);
  // Drains every ring into `out`; frees rings that are abandoned and empty (their dropped counts are kept).
  void DrainAll(std::vector<Record>* out);
  uint64_t TotalDropped();

 private:
  std::mutex mu_;
  std::vector<std::unique_ptr<Ring>> rings_;
  uint32_t next_thread_ = 0;
  uint64_t dropped_of_freed_ = 0;
};

}  // namespace rr::prof
