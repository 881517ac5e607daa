// SlotRing: the bounce slots of one link's staging path.
//
// Contract:
//   * N slots of S bytes in one host allocation, each with a 64-byte-aligned ready flag in the same
//     allocation (for the CUDA backend the allocation is pinned and device-mapped, so a kernel can
//     write both the slot and its flag).
//   * Life of a slot:  free --Acquire--> filling --copy engine stores Ticket()--> ready
//                      --MarkOnWire--> on_wire --Release (wire done)--> done --> free again.
//     Acquire hands slots out strictly in ring order and only reuses a slot once it and every older
//     slot are done (releases may come out of order; reclamation is in order), so a slot is never
//     overwritten while its bytes may still be on the wire.
//   * Ready(i) is an acquire load of the flag compared with the slot's current ticket: the progress
//     path polls it without synchronising any stream or thread. Tickets grow by one per use, so a
//     stale flag from the previous use never reads as ready.
//   * Not thread-safe: one owner (the link's progress path) calls everything; only the copy engine
//     writes the flags, through the pointers Flag() hands out.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "rerail/status.h"

namespace rr::staging {

// Host memory from a backend: CPU = aligned_alloc, CUDA = cuMemHostAlloc(DEVICEMAP).
struct HostMemory {
  void* ptr = nullptr;
  std::function<void(void*)> release;
};

class SlotRing {
 public:
  enum class State : uint8_t {
    kFree,     // owned by the ring
    kFilling,  // handed out; a copy into (or out of) it is queued or running
    kOnWire,   // ready; its bytes are being sent / were received and are being unpacked
    kDone,     // released by the wire; reclaimed once every older slot is done too
  };

  // Bytes a backend must allocate for a ring of `nslots` x `slot_bytes`.
  static std::size_t AllocBytes(std::size_t slot_bytes, unsigned nslots);

  // Takes ownership of mem (at least AllocBytes() bytes, 64-byte aligned).
  SlotRing(std::size_t slot_bytes, unsigned nslots, HostMemory mem);
  ~SlotRing();
  SlotRing(const SlotRing&) = delete;
  SlotRing& operator=(const SlotRing&) = delete;

  // The next slot in ring order, or -1 when it is still in use (back-pressure: try again later).
  int Acquire();
  unsigned char* Data(int i) const { return base_ + std::size_t(i) * slot_bytes_; }
  std::atomic<uint64_t>* Flag(int i) const { return flags_ + std::size_t(i) * kFlagStride; }
  uint64_t Ticket(int i) const { return tickets_[i]; }
  bool Ready(int i) const { return Flag(i)->load(std::memory_order_acquire) == tickets_[i]; }
  State state(int i) const { return state_[i]; }

  // filling -> on_wire; InternalError unless the slot is filling and Ready().
  Status MarkOnWire(int i);
  // on_wire -> done (the wire has finished with the bytes); reclaims done slots in ring order.
  Status Release(int i);
  // filling/on_wire -> done without sending (a failed link's slot); same reclamation. The caller
  // must know the copy engine no longer touches the slot (it is Ready, or the engine was stopped).
  Status Abandon(int i);

  std::size_t slot_bytes() const { return slot_bytes_; }
  unsigned nslots() const { return unsigned(state_.size()); }
  unsigned in_use() const { return in_use_; }

 private:
  static constexpr std::size_t kFlagStride = 64 / sizeof(std::atomic<uint64_t>);
  void Reclaim();

  std::size_t slot_bytes_;
  HostMemory mem_;
  unsigned char* base_;
  std::atomic<uint64_t>* flags_;
  std::vector<uint64_t> tickets_;
  std::vector<State> state_;
  unsigned head_ = 0;     // next slot Acquire hands out
  unsigned tail_ = 0;     // oldest slot not yet free
  unsigned in_use_ = 0;
};

}  // namespace rr::staging
