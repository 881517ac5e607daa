// rerail-perf — one rank process: set up the communicator, sweep sizes for each collective, time,
// verify, and (rank 0) print the nccl-tests table, the -J file and the timeline.
//
// Contract
//   * Options must carry rank, nranks and a rendezvous address (the launcher or mpirun provides them).
//   * Blocking; returns the process exit code: 0 success, 1 wrong values, 2 error (printed through
//     rr::log with the rank, e.g. a plugin call that failed, a peer that vanished, the deadline).
//   * Rank 0 prints a progress line on stderr every 5 s of a long run (unless --no-progress).
#pragma once

#include "options.h"

namespace rr::perf {

int RankMain(const Options& o);

}  // namespace rr::perf
