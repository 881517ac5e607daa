// rerail — per-rail health state machine (modelled on NCCL's IB resiliency device states).
//
// A rail is one NIC of this process. Its health decides whether the scheduler may put chunks on it:
//
//   event \ state    healthy     suspect     failed       recovering   permanently-failed
//   link-down        failed      failed      -            failed       -
//   link-removed     perm-failed perm-failed perm-failed  perm-failed  -
//   error            failed      failed      -            failed       -
//   stall            suspect     -           -            -            -
//   progress         -           healthy     -            -            -
//   link-up          -           -           recovering   -            -
//   probe-start      -           -           recovering   -            -
//   probe-ok         -           healthy     healthy      healthy      -
//   probe-fail       -           failed      -            failed       -
//   disable          perm-failed perm-failed perm-failed  perm-failed  -
//   ("-": the event does not change the state; it is ignored and logged at TRACE.)
//
// A failed rail is never given up on: probing continues with capped exponential back-off
// (RERAIL_FAILBACK_MIN_MS .. RERAIL_FAILBACK_MAX_MS); only a successful probe re-admits it. Only a
// removed interface or an explicit disable makes it permanently failed.
//
// Contract
//   * Every change goes through one private transition(from, to, event, why) that logs: WARN when the
//     rail becomes unusable (failed / permanently-failed), INFO otherwise, with rail index, interface
//     name, both state names and the reason. The same function publishes to the board when one is
//     attached (BoardWriter::SetState, and CountFailback when a failed/recovering rail becomes
//     healthy again); the other board counters (bytes, failovers, retransmits, link-down events)
//     belong to the data path and are the caller's to update.
//   * Thread-safe: OnEvent() serialises on an internal mutex; state() / Usable() are lock-free atomic
//     loads, safe from any thread (e.g. the link-monitor thread writes, the proxy thread reads).
//   * Never blocks beyond the mutex; never fails.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>

namespace rr::rails {

class BoardWriter;

enum class RailState : uint32_t {
  kHealthy = 0,            // carrying traffic; no fault seen since it was (re)admitted
  kSuspect = 1,            // no progress or missed heartbeats; still a link, being probed, gets no new chunks
  kFailed = 2,             // error or link down; its unacknowledged chunks were re-sent elsewhere
  kRecovering = 3,         // a heal event or back-off timer started a probe; not carrying traffic yet
  kPermanentlyFailed = 4,  // interface removed or rail disabled; never probed again
};
constexpr uint32_t kRailStateCount = 5;

enum class RailEvent : uint32_t {
  kNone = 0,         // no event (the board's initial reason)
  kLinkUp = 1,       // rtnetlink / port event: link is running again
  kLinkDown = 2,     // rtnetlink / port event: admin down or carrier lost
  kLinkRemoved = 3,  // the interface disappeared
  kError = 4,        // transport error on a link of this rail (RST, EPIPE, WC error)
  kStall = 5,        // bytes pending and no progress for RERAIL_STALL_MS, or heartbeats missed
  kProgress = 6,     // bytes moved again on a suspect rail
  kProbeStart = 7,   // the failback timer fired and a probe was sent
  kProbeOk = 8,      // a probe was answered: the rail works end to end
  kProbeFail = 9,    // a probe timed out or failed
  kDisable = 10,     // operator or configuration took the rail out for good
};
constexpr uint32_t kRailEventCount = 11;

const char* StateName(RailState s);   // "healthy", "suspect", "failed", "recovering", "permanently-failed"
const char* EventName(RailEvent e);   // "link-down", ...; "?" for values out of range

// The transition table above: the next state, or nullopt when the event leaves `from` unchanged.
std::optional<RailState> NextState(RailState from, RailEvent ev);

// True when the scheduler may put new chunks on a rail in this state (healthy only).
inline bool Carries(RailState s) { return s == RailState::kHealthy; }

// Capped exponential back-off for re-probing a failed rail; never gives up.
// Not thread-safe (owned by whoever runs the probes).
class ProbeBackoff {
 public:
  ProbeBackoff(uint64_t min_ms, uint64_t max_ms);
  uint64_t NextDelayMs();  // min, 2·min, 4·min, … capped at max
  void Reset();            // after a successful probe
 private:
  uint64_t min_ms_, max_ms_, next_ms_;
};

class RailHealth {
 public:
  // `board` may be null; when set it must outlive this object and `board_slot` must be a rail index
  // returned by board->AddRail().
  RailHealth(int rail, std::string ifname, BoardWriter* board = nullptr, int board_slot = -1);
  RailHealth(const RailHealth&) = delete;
  RailHealth& operator=(const RailHealth&) = delete;

  RailState state() const { return state_.load(std::memory_order_acquire); }
  bool Usable() const { return Carries(state()); }
  int rail() const { return rail_; }
  const std::string& ifname() const { return ifname_; }
  uint64_t transitions() const { return transitions_.load(std::memory_order_relaxed); }

  // Applies `ev` per the table; returns true when the state changed. `why` is free text for the log
  // (e.g. "carrier lost on rail1"); may be null.
  bool OnEvent(RailEvent ev, const char* why);

 private:
  void transition(RailState from, RailState to, RailEvent ev, const char* why);

  const int rail_;
  const std::string ifname_;
  BoardWriter* const board_;
  const int board_slot_;
  std::mutex mu_;
  std::atomic<RailState> state_{RailState::kHealthy};
  std::atomic<uint64_t> transitions_{0};
};

}  // namespace rr::rails
