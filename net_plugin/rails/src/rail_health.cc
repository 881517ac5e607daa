// rerail — rail-health state machine (see rail_health.h for the table and the contract).
#include "rerail/rails/rail_health.h"

#include <algorithm>

#include "rerail/log.h"
#include "rerail/rails/board.h"

namespace rr::rails {
namespace {

using S = RailState;
using E = RailEvent;
constexpr int kNo = -1;  // the event leaves the state unchanged

constexpr int St(S s) { return static_cast<int>(s); }

// kTable[event][state] = next state, or kNo. Rows in RailEvent order, columns in RailState order:
// healthy, suspect, failed, recovering, permanently-failed.
constexpr int kTable[kRailEventCount][kRailStateCount] = {
    /* none         */ {kNo, kNo, kNo, kNo, kNo},
    /* link-up      */ {kNo, kNo, St(S::kRecovering), kNo, kNo},
    /* link-down    */ {St(S::kFailed), St(S::kFailed), kNo, St(S::kFailed), kNo},
    /* link-removed */ {St(S::kPermanentlyFailed), St(S::kPermanentlyFailed), St(S::kPermanentlyFailed),
                        St(S::kPermanentlyFailed), kNo},
    /* error        */ {St(S::kFailed), St(S::kFailed), kNo, St(S::kFailed), kNo},
    /* stall        */ {St(S::kSuspect), kNo, kNo, kNo, kNo},
    /* progress     */ {kNo, St(S::kHealthy), kNo, kNo, kNo},
    /* probe-start  */ {kNo, kNo, St(S::kRecovering), kNo, kNo},
    /* probe-ok     */ {kNo, St(S::kHealthy), St(S::kHealthy), St(S::kHealthy), kNo},
    /* probe-fail   */ {kNo, St(S::kFailed), kNo, St(S::kFailed), kNo},
    /* disable      */ {St(S::kPermanentlyFailed), St(S::kPermanentlyFailed), St(S::kPermanentlyFailed),
                        St(S::kPermanentlyFailed), kNo},
};

constexpr const char* kStateNames[kRailStateCount] = {"healthy", "suspect", "failed", "recovering",
                                                      "permanently-failed"};
constexpr const char* kEventNames[kRailEventCount] = {
    "none",  "link-up",  "link-down",   "link-removed", "error",  "stall",
    "progress", "probe-start", "probe-ok", "probe-fail", "disable"};

}  // namespace

const char* StateName(RailState s) {
  auto i = static_cast<uint32_t>(s);
  return i < kRailStateCount ? kStateNames[i] : "?";
}

const char* EventName(RailEvent e) {
  auto i = static_cast<uint32_t>(e);
  return i < kRailEventCount ? kEventNames[i] : "?";
}

std::optional<RailState> NextState(RailState from, RailEvent ev) {
  auto s = static_cast<uint32_t>(from), e = static_cast<uint32_t>(ev);
  if (s >= kRailStateCount || e >= kRailEventCount || kTable[e][s] == kNo) return std::nullopt;
  return static_cast<RailState>(kTable[e][s]);
}

ProbeBackoff::ProbeBackoff(uint64_t min_ms, uint64_t max_ms)
    : min_ms_(std::max<uint64_t>(min_ms, 1)), max_ms_(std::max(max_ms, min_ms_)), next_ms_(min_ms_) {}

uint64_t ProbeBackoff::NextDelayMs() {
  uint64_t d = next_ms_;
  next_ms_ = std::min(max_ms_, next_ms_ * 2);
  return d;
}

void ProbeBackoff::Reset() { next_ms_ = min_ms_; }

RailHealth::RailHealth(int rail, std::string ifname, BoardWriter* board, int board_slot)
    : rail_(rail), ifname_(std::move(ifname)), board_(board), board_slot_(board_slot) {}

bool RailHealth::OnEvent(RailEvent ev, const char* why) {
  std::lock_guard<std::mutex> lock(mu_);
  RailState from = state_.load(std::memory_order_relaxed);
  std::optional<RailState> to = NextState(from, ev);
  if (!to) {
    RR_TRACE(log::kFlagNet, "rail %d (%s) %s: %s ignored (%s)", rail_, ifname_.c_str(), StateName(from),
             EventName(ev), why ? why : "");
    return false;
  }
  transition(from, *to, ev, why);
  return true;
}

void RailHealth::transition(RailState from, RailState to, RailEvent ev, const char* why) {
  state_.store(to, std::memory_order_release);
  transitions_.fetch_add(1, std::memory_order_relaxed);
  if (board_ != nullptr && board_slot_ >= 0) {
    board_->SetState(board_slot_, to, ev);
    if (to == RailState::kHealthy && (from == RailState::kFailed || from == RailState::kRecovering))
      board_->CountFailback(board_slot_);  // re-admitted after a failure
  }
  if (to == RailState::kFailed || to == RailState::kPermanentlyFailed) {
    RR_WARN("rail %d (%s) %s -> %s on %s: %s", rail_, ifname_.c_str(), StateName(from), StateName(to),
            EventName(ev), why ? why : "");
  } else {
    RR_INFO(log::kFlagNet, "rail %d (%s) %s -> %s on %s: %s", rail_, ifname_.c_str(), StateName(from),
            StateName(to), EventName(ev), why ? why : "");
  }
}

}  // namespace rr::rails
