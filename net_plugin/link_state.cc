#include "link_state.h"

#include "rerail/log.h"

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
      state_ = to;
      return true;
    }
  }
  RR_INFO(log::kFlagNet, "%s: ignored %s -> %s (%s)", who_.c_str(), LinkStateName(state_), LinkStateName(to),
          why.c_str());
  return false;
}

}  // namespace rr::net
