#include "staging/slot_ring.h"

#include <new>
#include <string>

namespace rr::staging {

std::size_t SlotRing::AllocBytes(std::size_t slot_bytes, unsigned nslots) {
  std::size_t data = (slot_bytes * nslots + 63) & ~std::size_t(63);
  return data + std::size_t(nslots) * 64;
}

SlotRing::SlotRing(std::size_t slot_bytes, unsigned nslots, HostMemory mem)
    : slot_bytes_(slot_bytes), mem_(std::move(mem)), tickets_(nslots, 0), state_(nslots, State::kFree) {
  base_ = static_cast<unsigned char*>(mem_.ptr);
  std::size_t data = (slot_bytes * nslots + 63) & ~std::size_t(63);
  flags_ = reinterpret_cast<std::atomic<uint64_t>*>(base_ + data);
  for (unsigned i = 0; i < nslots; ++i) new (Flag(int(i))) std::atomic<uint64_t>(0);
}

SlotRing::~SlotRing() {
  if (mem_.release) mem_.release(mem_.ptr);
}

int SlotRing::Acquire() {
  if (in_use_ == state_.size()) return -1;
  int i = int(head_);
  head_ = (head_ + 1) % unsigned(state_.size());
  ++in_use_;
  ++tickets_[i];
  state_[i] = State::kFilling;
  return i;
}

Status SlotRing::MarkOnWire(int i) {
  if (i < 0 || unsigned(i) >= state_.size() || state_[i] != State::kFilling || !Ready(i))
    return Status::Internal("staging: slot " + std::to_string(i) + " marked on the wire before it was ready");
  state_[i] = State::kOnWire;
  return Status::Ok();
}

Status SlotRing::Release(int i) {
  if (i < 0 || unsigned(i) >= state_.size() || state_[i] != State::kOnWire)
    return Status::Internal("staging: slot " + std::to_string(i) + " released while not on the wire");
  state_[i] = State::kDone;
  Reclaim();
  return Status::Ok();
}

Status SlotRing::Abandon(int i) {
  if (i < 0 || unsigned(i) >= state_.size() || (state_[i] != State::kFilling && state_[i] != State::kOnWire))
    return Status::Internal("staging: slot " + std::to_string(i) + " abandoned while not in use");
  state_[i] = State::kDone;
  Reclaim();
  return Status::Ok();
}

void SlotRing::Reclaim() {
  while (in_use_ > 0 && state_[tail_] == State::kDone) {
    state_[tail_] = State::kFree;
    tail_ = (tail_ + 1) % unsigned(state_.size());
    --in_use_;
  }
}

}  // namespace rr::staging
