#include "link_state.h"

#include "rerail/log.h"
#include "rerail/prof_net_event.h"

namespace rr::net {
namespace {

struct Edge {
  LinkState from, to;
};
constexpr Edge kAllowed[] = {
    {LinkState::kConnecting, LinkState::kHealthy},  // handshake done
    {LinkState::kConnecting, LinkState::kFailed},   // connect refused / timed out / rail down
    {LinkState::kHealthy, LinkState::kFailed},      // error, link-down event, stall, peer notice
    {LinkState::kFailed, LinkState::kProbing},      // back-off timer or link-up event
    {LinkState::kProbing, LinkState::kHealthy},     // probe answered: re-admitted (failback)
    {LinkState::kProbing, LinkState::kFailed},      // probe failed: back off further
};

int ProfRailState(LinkState s) {
  switch (s) {
    case LinkState::kHealthy: return RR_PROF_RAIL_HEALTHY;
    case LinkState::kFailed: return RR_PROF_RAIL_FAILED;
    case LinkState::kConnecting:
    case LinkState::kProbing: return RR_PROF_RAIL_RECOVERING;
  }
  return RR_PROF_RAIL_FAILED;
}

}  // namespace

const char* LinkStateName(LinkState s) {
  switch (s) {
    case LinkState::kConnecting: return "connecting";
    case LinkState::kHealthy: return "healthy";
    case LinkState::kFailed: return "failed";
    case LinkState::kProbing: return "probing";
  }
  return "?";
}

bool LinkFsm::Transition(LinkState to, const std::string& why) {
  for (const Edge& e : kAllowed) {
    if (e.from == state_ && e.to == to) {
      RR_INFO(log::kFlagNet, "%s: %s -> %s (%s)", who_.c_str(), LinkStateName(state_), LinkStateName(to),
              why.c_str());
      if (prof_ != nullptr && state_ != LinkState::kConnecting) {
        auto ev = prof::MakeNetEvent(RR_PROF_NET_EV_RAIL_STATE, rail_, why.c_str());
        ev.prevState = ProfRailState(state_);
        ev.state = ProfRailState(to);
        prof_->Post(ev);
      }
      state_ = to;
      return true;
    }
  }
  RR_INFO(log::kFlagNet, "%s: ignored %s -> %s (%s)", who_.c_str(), LinkStateName(state_), LinkStateName(to),
          why.c_str());
  return false;
}

}  // namespace rr::net
