// rerail — receive-side message tracking: matching, placement bitmap, duplicate and stale drop.
//
// Pure bookkeeping (no I/O), so every rule is unit-tested without sockets.
//
// Model: receives are posted in order; the k-th Post() expects message seq k. At most kWindow messages
// are posted and not yet Released (NCCL's request limit), so seq → slot is seq % kWindow. A data frame
// is classified before its payload is read:
//   kPlace      read the payload into slot->buf + offset (the slot is posted, the chunk is new);
//   kDrop       read and discard the payload (duplicate chunk, chunk of a completed message, stale epoch);
//   kNotPosted  leave it in the socket until the matching receive is posted (no intermediate copy);
//   kError      protocol violation or a message larger than the posted buffer; *err says which.
// After the payload is in place, Placed() marks its chunk's granules (wire.h: ChunkGranule of the
// sender's chunk size) and reports whether the message completed.
// Thread-safety: none; owned and driven by one thread (NCCL's progress thread).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "wire.h"

namespace rr::net {

class RxTracker {
 public:
  static constexpr int kWindow = 32;

  struct Slot {
    uint64_t seq = 0;
    bool posted = false;
    bool complete = false;
    void* buf = nullptr;
    size_t cap = 0;
    int64_t total = -1;    // message size, -1 until the first chunk arrives
    size_t placed = 0;     // distinct payload bytes placed
    std::vector<uint64_t> bits;  // one bit per granule (offset / granule)
    void* owner = nullptr;       // the request that posted it
    int tag = 0;                 // grouped receives: NCCL's tag of this element
    uint8_t gn = 1, gk = 0;      // element gk of a group of gn (the group's first element has seq - gk)
  };

  enum class Verdict { kPlace, kDrop, kNotPosted, kError };

  RxTracker(uint32_t conn, uint32_t chunk_size) : conn_(conn), chunk_(chunk_size), granule_(ChunkGranule(chunk_size)) {}

  // Posts the next receive. Returns nullptr when kWindow receives are already outstanding.
  Slot* Post(void* buf, size_t cap, void* owner);
  // True when n more Post() calls would all succeed (a grouped receive posts its n elements at once).
  bool CanPost(int n) const;
  // `min_epoch`: frames of an older link epoch are stale.
  Verdict Classify(const Frame& f, uint32_t min_epoch, Slot** slot, std::string* err);
  // Marks f's chunk as placed; true when this completed the message.
  bool Placed(Slot* slot, const Frame& f);
  // The message's request was reported done to NCCL: its slot may be reused.
  void Release(Slot* slot);

  // The posted, incomplete slot of `seq`; nullptr otherwise.
  Slot* Pending(uint64_t seq) {
    Slot& s = slots_[seq % kWindow];
    return seq < next_post_ && s.seq == seq && s.posted && !s.complete ? &s : nullptr;
  }
  // Messages completed in order (every seq below is complete): the cumulative ack value.
  uint64_t completed_prefix() const { return prefix_; }
  uint64_t posted() const { return next_post_; }
  int outstanding() const { return outstanding_; }

 private:
  Slot slots_[kWindow];
  uint32_t conn_;
  uint32_t chunk_;    // a frame's payload is at most this
  uint32_t granule_;  // ... in whole granules of this (the bitmap's unit)
  // The granules [*first, *end) of a well-formed chunk (a message of 0 bytes: granule 0).
  void Granules(const Frame& f, uint64_t* first, uint64_t* end) const {
    *first = f.offset / granule_;
    *end = (f.offset + f.len + granule_ - 1) / granule_;
    if (*end <= *first) *end = *first + 1;
  }
  uint64_t next_post_ = 0;  // seq the next Post() gets
  uint64_t prefix_ = 0;     // all seq < prefix_ complete
  int outstanding_ = 0;
};

}  // namespace rr::net
