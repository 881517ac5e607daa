#include "rx_tracker.h"

namespace rr::net {

RxTracker::Slot* RxTracker::Post(void* buf, size_t cap, void* owner) {
  // Also bounded by the in-order prefix: a slot is reused only once every older message completed,
  // so a completed-but-unacknowledged record is never overwritten.
  if (outstanding_ >= kWindow || next_post_ >= prefix_ + kWindow) return nullptr;
  Slot& s = slots_[next_post_ % kWindow];
  if (s.posted) return nullptr;  // previous occupant not released yet
  s.seq = next_post_++;
  s.posted = true;
  s.complete = false;
  s.buf = buf;
  s.cap = cap;
  s.total = -1;
  s.placed = 0;
  s.owner = owner;
  s.tag = 0;
  s.gn = 1;
  s.gk = 0;
  ++outstanding_;
  return &s;
}

bool RxTracker::CanPost(int n) const {
  if (outstanding_ + n > kWindow || next_post_ + n > prefix_ + kWindow) return false;
  for (int i = 0; i < n; ++i) {
    if (slots_[(next_post_ + i) % kWindow].posted) return false;
  }
  return true;
}

RxTracker::Verdict RxTracker::Classify(const Frame& f, uint32_t min_epoch, Slot** slot, std::string* err) {
  *slot = nullptr;
  if (!FrameValid(f) || TypeOf(f) != FrameType::kData) {
    *err = "unexpected frame type/magic 0x" + std::to_string(f.magic_type);
    return Verdict::kError;
  }
  if (f.conn != conn_) {
    *err = "frame of another connection (conn " + std::to_string(f.conn) + ")";
    return Verdict::kError;
  }
  if (f.offset > f.total || f.len > f.total - f.offset || (f.len == 0 && f.total != 0) ||
      f.offset % granule_ != 0 || f.len > chunk_ || (f.len % granule_ != 0 && f.offset + f.len != f.total)) {
    *err = "malformed chunk (offset " + std::to_string(f.offset) + " len " + std::to_string(f.len) +
           " total " + std::to_string(f.total) + ")";
    return Verdict::kError;
  }
  if (f.epoch < min_epoch) return Verdict::kDrop;      // sent on a link incarnation since failed
  if (f.seq < prefix_) return Verdict::kDrop;          // message already complete
  if (f.seq >= prefix_ + kWindow) {
    *err = "chunk of message " + std::to_string(f.seq) + " beyond the window (" + std::to_string(prefix_) + ")";
    return Verdict::kError;
  }
  if (f.seq >= next_post_) return Verdict::kNotPosted;
  Slot& s = slots_[f.seq % kWindow];
  if (s.seq != f.seq) return Verdict::kNotPosted;  // unreachable: the window gives each seq its own slot
  // Complete, possibly released already (NCCL was told; its buffer is NCCL's again) while an older
  // message is still incomplete: a late duplicate is dropped. Calling it "not posted" parked it at
  // the head of its stream for good, and the older message's missing chunk behind it.
  if (s.complete) return Verdict::kDrop;
  if (!s.posted) return Verdict::kNotPosted;
  if (s.total < 0) {
    if (f.total > s.cap) {
      *err = "message " + std::to_string(f.seq) + " of " + std::to_string(f.total) +
             " bytes is larger than the posted receive buffer (" + std::to_string(s.cap) + " bytes)";
      return Verdict::kError;
    }
    s.total = static_cast<int64_t>(f.total);
    size_t granules = f.total == 0 ? 1 : (f.total + granule_ - 1) / granule_;
    s.bits.assign((granules + 63) / 64, 0);
  } else if (static_cast<uint64_t>(s.total) != f.total) {
    *err = "chunks of message " + std::to_string(f.seq) + " disagree on its size";
    return Verdict::kError;
  }
  // A chunk is placed whole or not at all, and a re-sent one is the same range (wire.h): all of its
  // granules placed is a duplicate, some of them a sender that cut the message two ways.
  uint64_t first = 0, end = 0, set = 0;
  Granules(f, &first, &end);
  for (uint64_t i = first; i < end; ++i) set += (s.bits[i / 64] >> (i % 64)) & 1;
  if (set == end - first) return Verdict::kDrop;  // duplicate
  if (set != 0) {
    *err = "chunk at offset " + std::to_string(f.offset) + " of message " + std::to_string(f.seq) +
           " overlaps a placed one (len " + std::to_string(f.len) + ")";
    return Verdict::kError;
  }
  *slot = &s;
  return Verdict::kPlace;
}

bool RxTracker::Placed(Slot* s, const Frame& f) {
  uint64_t first = 0, end = 0;
  Granules(f, &first, &end);
  if (s->bits[first / 64] & (1ull << (first % 64))) return false;  // Classify: placed whole or not at all
  for (uint64_t i = first; i < end; ++i) s->bits[i / 64] |= 1ull << (i % 64);
  s->placed += f.len;
  if (s->placed < static_cast<size_t>(s->total)) return false;
  s->complete = true;
  while (prefix_ < next_post_) {
    const Slot& p = slots_[prefix_ % kWindow];
    if (!(p.seq == prefix_ && p.complete)) break;
    ++prefix_;
  }
  return true;
}

void RxTracker::Release(Slot* s) {
  if (!s->posted) return;
  s->posted = false;
  --outstanding_;
}

}  // namespace rr::net
