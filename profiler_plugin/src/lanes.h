// Lanes: sub-tracks that keep a trace viewer's per-track rule "slices nest perfectly, never overlap".
//
// Perfetto (and the Chrome trace format) require complete events on one track (pid, tid) to nest
// strictly. NCCL runs up to 8 steps of an operation, several operations per channel and several
// connections per rail at once, so one track per rail or channel would hold overlapping spans. Each base
// track therefore has lanes: an event goes on top of its parent's lane when the parent is on the same base
// track and is that lane's innermost open event (strict nesting), else on the first lane that is free at
// its start time, else on a new lane. The trace tid is Tid(base, lane); lane 0 keeps the base track's tid
// and name, so a trace without overlap has exactly one track per rail/channel.
//
// Contract: collector thread only. Place() when an event begins, Leave() when it is written; events of a
// comm must all have left before Forget(ctx).
#pragma once

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "event_model.h"

namespace rr::prof {

class LaneMap {
 public:
  // Sets ev->lane and ev->depth. `parent` may be nullptr.
  void Place(EventRec* ev, const EventRec* parent);
  void Leave(const EventRec& ev);
  void Forget(const Context* ctx);

 private:
  struct Lane {
    std::vector<uint64_t> stack;    // ids of the open events on this lane, outermost first
    std::vector<uint64_t> free_at;  // per nesting depth: end of the last event that left it
  };
  static void Push(Lane* lane, EventRec* ev, int index);
  std::map<std::pair<const Context*, int>, std::vector<Lane>> lanes_;
};

}  // namespace rr::prof
