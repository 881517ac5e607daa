// rerail — life cycle of one link (one rail) inside a resilient connection.
//
// Table-driven: kAllowed lists every legal (from, to) change; LinkFsm::Transition() applies one,
// logs it (INFO; WARN when the link stops carrying traffic) and refuses anything else (logged as a
// bug, state unchanged). Failback probing never gives up; only a give-up of the whole connection
// (no link at all for RERAIL_GIVEUP_MS) ends it.
//
// Thread-safety: none; owned by the connection's driving thread.
#pragma once

#include <cstdint>
#include <string>

namespace rr::net {

enum class LinkState : uint8_t {
  kConnecting,  // first connection attempt in progress (standby links are connected eagerly)
  kHealthy,     // carries chunks, acks and heartbeats
  kFailed,      // dead: its unacked chunks were re-queued; waiting for the back-off timer to re-probe
  kProbing,     // reconnecting after a failure; re-admitted once the peer answers on it
};
const char* LinkStateName(LinkState s);

class LinkFsm {
 public:
  LinkFsm(std::string who) : who_(std::move(who)) {}
  LinkState state() const { return state_; }
  bool usable() const { return state_ == LinkState::kHealthy; }
  // Applies from→to if the table allows it; returns false (and logs) otherwise.
  bool Transition(LinkState to, const std::string& why);
  void set_who(std::string who) { who_ = std::move(who); }

 private:
  LinkState state_ = LinkState::kConnecting;
  std::string who_;  // "conn 1a2b.. link 1 (rail eth1)"
};

}  // namespace rr::net
