// rerail-perf — the launcher: starts the N rank processes and injects the --fault schedule.
//
// Contract
//   * Launch() creates a private temporary directory (rendezvous socket + fault log), then forks N
//     children that re-execute this binary with --rank/--rendezvous/--t0-ns/--events added; with
//     --hosts H, rank r runs on simulated host r*H/N through `ip netns exec <prefix>-h<host>`
//     (the namespaces scripts/netns-rails.sh makes with RERAIL_NETNS_PREFIX=<prefix>).
//   * Children die with the launcher (PR_SET_PDEATHSIG) and are killed when --timeout passes, when
//     the launcher gets SIGINT/SIGTERM, or 3 s after a rank failed (its peers would wait for it until
//     their own deadlines); the temporary directory is always removed.
//   * Faults: at each fault's time (relative to t0) the launcher runs
//     `RERAIL_NETNS_PREFIX=<prefix> bash <rails-script> fail|blackhole|slow|heal HOST RAIL [RATE]`, appends
//     "<t_s>\t<fault text> (rc N)" to the fault log, which rank 0 folds into the timeline.
//   * Returns the exit code for the process: the worst of the ranks' codes (0 ok, 1 wrong values,
//     2 error), or 2 when a rank was killed or the launcher itself failed (message on stderr).
//   * Blocking; call from main() only.
#pragma once

#include "options.h"

namespace rr::perf {

int Launch(const Options& o, int argc, char** argv);

}  // namespace rr::perf
