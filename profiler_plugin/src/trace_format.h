// Turning one completed event into a Chrome/Perfetto trace event (JSON object). Collector thread only.
//
//   * Spans are complete events ("ph":"X", ts and dur in µs); rerail point events (failover, migration,
//     failback, retransmit, rail-state) are thread-scoped instant events ("ph":"i","s":"t") at the time
//     the net plugin stamped in the descriptor, on the track of the rail they concern.
//   * pid = rank, tid = track (track::*). args always hold "id" (trace id within the comm) and "parent"
//     (trace id of the nearest recorded ancestor, 0 for roots), plus the descriptor fields of the type.
#pragma once

#include <cstdint>
#include <functional>

#include <nlohmann/json.hpp>

#include "event_model.h"
#include "rerail/prof_net_event.h"

namespace rr::prof {

// `us` converts a CLOCK_MONOTONIC ns value to trace µs.
nlohmann::json EventJson(const EventRec& ev, const std::function<double(uint64_t)>& us);

// Copies the rerail net descriptor held in an event's payload; false unless ev.rerail_net.
bool NetDescr(const EventRec& ev, rrProfNetEvent_v1_t* out);
const char* NetKindName(int kind);
const char* RailStateName(int state);

}  // namespace rr::prof
