// rerail — in-process rail health for the tuner, published by the net plugin when both live in one
// library (NCCL then finds the tuner symbols in the net plugin's .so, reference §1.3).
//
// Contract
//   * A publisher (the net plugin) calls RegisterRailSource(commId, fn, arg) from its per-comm init
//     (commId = NCCL's commHash, the same value the tuner's init receives) or with commId 0 for
//     "every communicator of this process", and UnregisterRailSource(commId) before `arg` dies.
//   * fn(arg, states, max) writes up to `max` rail states (rr::rails::RailState values, one per NCCL
//     net device) and returns how many it wrote; it must not block and is called with the registry
//     lock held, at most once per tuner refresh interval per communicator.
//   * The tuner asks ReadRailSource(commId, ...) first for its own commId, then for 0. In two separate
//     libraries (RTLD_LOCAL) each has its own registry: the tuner's stays empty and it reads the
//     shared-memory board instead.
//   * Thread-safe (one process-wide mutex); never fails, never throws.
#pragma once

#include <cstdint>

namespace rr::tuner {

using RailStatesFn = int (*)(void* arg, uint32_t* states, int max);

void RegisterRailSource(uint64_t comm_id, RailStatesFn fn, void* arg);
void UnregisterRailSource(uint64_t comm_id);

// Fills states[0..n) from the source registered for comm_id (or, failing that, for 0); returns n,
// or -1 when no source is registered.
int ReadRailSource(uint64_t comm_id, uint32_t* states, int max);

// True when any source is registered: the net plugin shares this library (the tuner then leaves the
// RERAIL_* parameters as the net plugin loaded them instead of re-reading the environment).
bool HasRailSources();

}  // namespace rr::tuner
