// The parts of the core both sides share: connection state, give-up clock, completions, stall ages.
#include <algorithm>

#include <cstring>

#include "core.h"
#include "rerail/log.h"

namespace rr::net {

const char* ConnStateName(ConnState s) {
  switch (s) {
    case ConnState::kActive: return "active";
    case ConnState::kPeerClosed: return "peer-closed";
    case ConnState::kFailed: return "failed";
  }
  return "?";
}

FailCause CauseOf(const std::string& why) {
  if (why.rfind("stall", 0) == 0) return FailCause::kStall;
  return why == "link-down event" ? FailCause::kLinkDown : FailCause::kOther;
}

const char* ShortReason(const std::string& why) {
  switch (CauseOf(why)) {
    case FailCause::kStall: return "stall";
    case FailCause::kLinkDown: return "link-down";
    case FailCause::kOther: break;
  }
  return why.c_str();
}

bool CoreBase::NextCompletion(Completion* out) {
  if (done_.empty()) return false;
  *out = done_.front();
  done_.pop_front();
  return true;
}

void CoreBase::Transition(ConnState to, const std::string& why) {
  if (state_ == to || state_ == ConnState::kFailed) return;  // failure is final
  RR_INFO(log::kFlagNet, "conn %016lx: %s -> %s (%s)", static_cast<unsigned long>(conn_id_), ConnStateName(state_),
          ConnStateName(to), why.c_str());
  if (to == ConnState::kFailed) RR_WARN("connection %016lx failed: %s", static_cast<unsigned long>(conn_id_), why.c_str());
  state_ = to;
  if (to != ConnState::kActive) Ended();
}

Status CoreBase::Copy(void* dst, const void* src, size_t len) {
  if (len == 0) return Status::Ok();
  if (copier_) return copier_(dst, src, len);
  std::memcpy(dst, src, len);
  return Status::Ok();
}

Status CoreBase::Fail(Code code, const std::string& why) {
  Transition(ConnState::kFailed, why);
  if (failure_.ok()) failure_ = Status(code, why);
  return failure_;
}

bool CoreBase::GiveUpDue(bool in_use, int working, uint64_t now, uint64_t giveup_ns) {
  if (!in_use || working > 0) {
    no_link_since_ns_ = 0;
    return false;
  }
  if (no_link_since_ns_ == 0) no_link_since_ns_ = now;
  return now - no_link_since_ns_ > giveup_ns;
}

// Per stream: the time since its acknowledgement last advanced while bytes were in flight (the first
// sample after an idle spell starts the clock). A slow but alive peer keeps it near zero (its
// transport acknowledges; a closed window leaves nothing in flight); a black hole makes it grow.
void StallTracker::Sample(const LinkSample& s, uint64_t now) {
  uint64_t worst = 0;
  for (int i = 0; i < s.streams && i < kMaxStreams; ++i) {
    const StreamSample& x = s.s[i];
    if (x.in_flight == 0) {
      since_ns[i] = 0;
    } else if (since_ns[i] == 0 || x.acked_bytes != acked[i]) {
      since_ns[i] = now;
    }
    acked[i] = x.acked_bytes;
    if (since_ns[i] != 0) worst = std::max(worst, now - since_ns[i]);
  }
  age_ns = worst;
}

}  // namespace rr::net
