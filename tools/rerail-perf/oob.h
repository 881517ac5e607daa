// rerail-perf — out-of-band exchange between rank processes (listen handles, timings, results).
//
// Contract
//   * Oob is the small interface the rest of rerail-perf uses; two implementations: SocketOob (below)
//     and BootOob (the bootstrap's rootless all-gather). Every call is collective: all ranks must make the same
//     calls in the same order. Calls block until every rank has taken part or the deadline passes.
//   * SocketOob: rank 0 listens on the rendezvous address, the others connect to it (retrying until
//     the deadline). The address is either a filesystem path (a Unix socket: works across network
//     namespaces on one host) or "host:port" (TCP; for mpirun/srun over real nodes).
//   * Errors (peer gone, deadline) come back as Status with a message naming the rank and the call.
//   * Not thread-safe: one thread per process uses it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "rerail/status.h"

namespace rr::perf {

class Oob {
 public:
  virtual ~Oob() = default;
  virtual int Rank() const = 0;
  virtual int Size() const = 0;
  // Every rank contributes `mine`; on return all[r] is rank r's blob (sizes may differ per rank).
  virtual Status AllGather(const std::string& mine, std::vector<std::string>* all) = 0;

  Status Barrier();
  // Typed helpers over AllGather.
  Status AllGatherDouble(double mine, std::vector<double>* all);
  Status SumU64(uint64_t mine, uint64_t* sum);
};

// Connects (rank > 0) or listens (rank 0) within timeout_ms.
Status MakeSocketOob(const std::string& address, int rank, int size, int timeout_ms, std::unique_ptr<Oob>* out);

// The bootstrap's rootless all-gather (bootstrap/: rerail/boot/exchange.h) over the job described by
// RERAIL_HOSTS / RERAIL_PORT_BASE / RERAIL_RANKS_PER_HOST (or their Slurm/HPCT aliases): no shared
// filesystem and no rank-0 server needed, for mpirun/srun over real nodes ("--rendezvous boot").
// Each call is two exchanges on fresh groups (sizes, then padded blobs).
Status MakeBootOob(int rank, int size, int timeout_ms, std::unique_ptr<Oob>* out);

}  // namespace rr::perf
