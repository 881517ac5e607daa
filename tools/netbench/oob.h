// rerail-netbench — out-of-band channel and peer processes for tools and tests that drive a net plugin.
//
// NCCL exchanges the 128-byte listen handle through its own bootstrap, never through the plugin. The
// benchmark and the conformance suite do the same over a Unix socketpair between a parent and a peer
// process it fork+execs (Peer::Spawn), so two real processes load the plugin independently.
//
// Contract
//   * Oob owns one connected stream socket (closed by the destructor). Frames are a 4-byte length
//     followed by the bytes. Send() blocks until written; Recv() waits at most timeout_ms and returns
//     an error Status naming what timed out or that the peer closed the channel (it died).
//   * Peer::Spawn forks and execs `exe args...`; the child gets its end of the channel as fd 3, the
//     extra environment entries, and dies with its parent (PR_SET_PDEATHSIG). Nothing is run between
//     fork and exec except async-signal-safe calls, so a parent with threads may spawn.
//   * Peer::Kill sends SIGKILL; Wait reaps within a bound and kills first when the bound expires, so
//     no peer outlives the object (the destructor kills and reaps).
//   * Not thread-safe: one thread uses an Oob or a Peer at a time.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "rerail/status.h"

namespace rr::netbench {

class Oob {
 public:
  Oob() = default;
  explicit Oob(int fd) : fd_(fd) {}
  ~Oob();
  Oob(Oob&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Oob& operator=(Oob&& o) noexcept;
  Oob(const Oob&) = delete;
  Oob& operator=(const Oob&) = delete;

  int fd() const { return fd_; }
  Status Send(const void* data, size_t size);
  Status Send(const std::string& s) { return Send(s.data(), s.size()); }
  Status Recv(std::string* out, uint64_t timeout_ms);

 private:
  int fd_ = -1;
};

class Peer {
 public:
  Peer() = default;
  ~Peer();
  Peer(const Peer&) = delete;
  Peer& operator=(const Peer&) = delete;

  // env: extra "NAME=value" entries added to (or replacing in) the inherited environment.
  Status Spawn(const std::string& exe, const std::vector<std::string>& args,
               const std::vector<std::string>& env);
  Oob& oob() { return oob_; }
  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0; }
  void Kill();
  // Reaps the peer; kills it first if it has not exited within timeout_ms. Returns the raw wait status
  // (or -1 if no peer). Idempotent.
  int Wait(uint64_t timeout_ms);

 private:
  pid_t pid_ = -1;
  Oob oob_;
};

// Number of entries in /proc/self/fd and /proc/self/task (open descriptors and threads).
int CountOpenFds();
int CountThreads();

}  // namespace rr::netbench
