// rerail bootstrap — rootless all-gather of small fixed-size blobs (C++ API).
//
// Every rank listens on its planned address (Job::Address(rank, group)) and pulls from its peers at
// theirs: no root, no store, no coordinator. Two patterns (every rank must pick the same):
//   kBruck  dissemination all-gather: in step k (k = 0 .. ceil(log2 N) - 1) rank r pulls, from rank
//           (r + 2^k) mod N, the min(2^k, N - 2^k) blobs that rank holds after its step k - 1.
//           ceil(log2 N) rounds; each rank opens ceil(log2 N) connections and accepts as many.
//   kRing   rank r pulls from r + 1 only, on one connection, whatever r + 1 already holds beyond
//           what r has (streamed, so rounds overlap). One connection out and one in per rank: a
//           host carries about ranks-per-host + 1 connections whatever N is, where a star through
//           one root puts N - 1 on the root's host.
//
// Robustness
//   * A peer that is not listening yet (or restarting) is retried with capped back-off until the
//     deadline. A pull that breaks (peer died) is retried against the peer's next incarnation on the
//     same planned address, so a rank may crash and re-join the SAME group mid-exchange.
//     What a restarted rank contributes must be the same bytes as before (peers that already hold
//     the old blob keep it); use a fresh group when the contribution changes.
//   * Every message carries the per-(job, group) magic (Job::Magic). A server that receives a
//     request with another magic logs a WARN naming the stranger and answers "wrong magic"; a client
//     that meets a server of another job/group keeps retrying (the stale listener may go away) and,
//     at the deadline, fails naming it. Mismatched nranks, blob size or algorithm is refused the
//     same way.
//   * After a rank has everything it keeps serving until each of its pullers said "bye" (or the
//     linger deadline passes), so late or restarted peers still find it.
//
// Threading: Start() binds the listener on the calling thread (bind errors return at once) and runs
// the protocol on one internal thread (poll loop, non-blocking sockets). Wait() and Close() may be
// called from any single thread. An Exchange is not copyable.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "rerail/boot/job.h"
#include "rerail/status.h"

namespace rr::boot {

enum class ExchangeAlgorithm : uint32_t {
  kBruck = 1,  // log2(N) rounds, log2(N) connections per rank
  kRing = 2,   // pipelined ring, 2 connections per rank
};

struct ExchangeOptions {
  uint64_t group = 0;
  ExchangeAlgorithm algorithm = ExchangeAlgorithm::kBruck;
  int rank = 0;
  std::string blob;                 // this rank's contribution; every rank must use the same size
  uint64_t timeout_ms = 120000;     // Wait() fails after this (RERAIL_BOOT_TIMEOUT_MS by default)
  uint64_t linger_ms = 0;           // Close() waits this long for byes; 0: same as timeout_ms
  // Tests/diagnostics only: called on the exchange thread after each completed pull (0, 1, ...).
  std::function<void(int step)> on_step;
};

struct ExchangeStats {
  int steps = 0;              // pulls completed (ceil(log2 N) for kBruck)
  int connects = 0;           // outgoing connections established
  int accepts = 0;            // incoming connections accepted
  int retries = 0;            // failed connection attempts / broken pulls retried
  int strangers = 0;          // requests rejected for a wrong magic or mismatched shape
  std::vector<int> peers_out; // ranks this rank connected to (one per connection)
  uint64_t bytes_in = 0, bytes_out = 0;
  double wait_ms = 0;         // Start() -> everything received
};

class Exchange {
 public:
  // Binds the planned address of opts.rank for opts.group and starts the exchange thread.
  // Errors: kInvalidArgument (rank out of range, empty or > 1 MiB blob), kSystemError (bind: the
  // planned address is in use or not local).
  static Status Start(const Job& job, ExchangeOptions opts, std::unique_ptr<Exchange>* out);
  ~Exchange();  // Close()
  Exchange(const Exchange&) = delete;
  Exchange& operator=(const Exchange&) = delete;

  // Blocks until this rank holds every blob (rank order, all the same size), or the deadline.
  // kRemoteError on timeout, naming the step, the peer and the last reason it failed.
  Status Wait(std::vector<std::string>* blobs);
  // Sends "bye" to the peers this rank pulled from, serves until its own pullers said bye (bounded
  // by linger_ms), then stops the thread and closes every socket. Idempotent.
  void Close();
  ExchangeStats Stats() const;

  class Impl;

 private:
  explicit Exchange(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Start + Wait + Close.
Status AllGather(const Job& job, const ExchangeOptions& opts, std::vector<std::string>* blobs,
                 ExchangeStats* stats = nullptr);

}  // namespace rr::boot
