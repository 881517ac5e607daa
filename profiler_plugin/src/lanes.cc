#include "lanes.h"

#include <algorithm>

namespace rr::prof {

void LaneMap::Push(Lane* lane, EventRec* ev, int index) {
  ev->lane = index;
  ev->depth = static_cast<int>(lane->stack.size());
  lane->stack.push_back(ev->id);
  if (lane->free_at.size() <= lane->stack.size()) lane->free_at.resize(lane->stack.size() + 1, 0);
}

void LaneMap::Place(EventRec* ev, const EventRec* parent) {
  std::vector<Lane>& lanes = lanes_[{ev->ctx, ev->track}];
  if (parent != nullptr && parent->track == ev->track && parent->lane >= 0 &&
      static_cast<size_t>(parent->lane) < lanes.size()) {
    Lane& l = lanes[static_cast<size_t>(parent->lane)];
    size_t depth = l.stack.size();
    if (depth > 0 && l.stack.back() == parent->id &&
        (depth >= l.free_at.size() || l.free_at[depth] <= ev->begin_ns)) {
      Push(&l, ev, parent->lane);
      return;
    }
  }
  for (size_t i = 0; i < lanes.size(); ++i) {
    Lane& l = lanes[i];
    if (l.stack.empty() && (l.free_at.empty() || l.free_at[0] <= ev->begin_ns)) {
      Push(&l, ev, static_cast<int>(i));
      return;
    }
  }
  lanes.emplace_back();
  Push(&lanes.back(), ev, static_cast<int>(lanes.size() - 1));
}

void LaneMap::Leave(const EventRec& ev) {
  if (ev.lane < 0) return;
  auto it = lanes_.find({ev.ctx, ev.track});
  if (it == lanes_.end() || static_cast<size_t>(ev.lane) >= it->second.size()) return;
  Lane& l = it->second[static_cast<size_t>(ev.lane)];
  // Normally the innermost event; a forced close at finalize may take one out of the middle.
  auto pos = std::find(l.stack.begin(), l.stack.end(), ev.id);
  if (pos == l.stack.end()) return;
  size_t depth = static_cast<size_t>(pos - l.stack.begin());
  l.stack.erase(pos);
  if (l.free_at.size() <= depth) l.free_at.resize(depth + 1, 0);
  l.free_at[depth] = std::max(l.free_at[depth], ev.last_ns);
}

void LaneMap::Forget(const Context* ctx) {
  for (auto it = lanes_.begin(); it != lanes_.end();) {
    if (it->first.first == ctx)
      it = lanes_.erase(it);
    else
      ++it;
  }
}

}  // namespace rr::prof
