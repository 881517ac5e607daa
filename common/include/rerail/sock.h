// rerail — socket and interface helpers shared by the TCP transport, bootstrap and tools.
//
// Contract
//   * Addr is a value type wrapping sockaddr_storage (IPv4 or IPv6). No allocation except ToString().
//   * ListInterfaces() enumerates local interfaces that are up and carry an address (getifaddrs), one
//     entry per interface: its first global IPv4 address, else its first global IPv6 address, else a
//     link-local IPv6 address (with scope id). Order follows the kernel's interface index.
//   * IfFilter implements NCCL's interface-list syntax (NCCL_SOCKET_IFNAME): a comma list of name
//     prefixes; a leading '^' turns it into an exclude list; '=' after it (or alone) means exact names.
//     An optional ":port" suffix on an element is accepted and ignored. Empty filter matches everything.
//   * Socket helpers return Status with errno text; they never block unless documented.
//   * Thread-safety: every function is reentrant; no shared state.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <vector>

#include "rerail/status.h"

namespace rr::sock {

struct Addr {
  sockaddr_storage ss{};
  socklen_t len = 0;

  int family() const { return ss.ss_family; }
  uint16_t port() const;  // host byte order; 0 when unset
  void set_port(uint16_t port);
  const sockaddr* sa() const { return reinterpret_cast<const sockaddr*>(&ss); }
  sockaddr* sa() { return reinterpret_cast<sockaddr*>(&ss); }
  bool IsLoopback() const;
  // "10.0.0.2:5000", "[fd00::2]:5000"
  std::string ToString() const;

  static Addr FromSockaddr(const sockaddr* sa);  // family AF_INET or AF_INET6; else empty (len 0)
  // Parses a numeric IPv4/IPv6 address (no port). False on garbage.
  static bool Parse(const std::string& ip, uint16_t port, Addr* out);
};

struct Interface {
  std::string name;   // e.g. "eth0"
  int index = 0;      // kernel ifindex
  Addr addr;          // chosen address, port 0
  bool loopback = false;
};

std::vector<Interface> ListInterfaces();

class IfFilter {
 public:
  IfFilter() = default;
  explicit IfFilter(const std::string& spec);
  bool Match(const std::string& ifname) const;
  bool empty() const { return names_.empty(); }
  // True if the filter names this interface explicitly (prefix or exact, not by exclusion).
  bool Selects(const std::string& ifname) const { return !exclude_ && !names_.empty() && Match(ifname); }

 private:
  std::vector<std::string> names_;
  bool exclude_ = false;
  bool exact_ = false;
};

// fd helpers. Close() ignores fd < 0 and resets it to -1.
void Close(int* fd);
Status SetNonBlocking(int fd);
Status SetNoDelay(int fd);
// bytes == 0 keeps the kernel's autotuning.
Status SetBufSizes(int fd, int bytes);
// TCP_USER_TIMEOUT in ms (0 = kernel default).
Status SetUserTimeout(int fd, unsigned ms);

// Creates a non-blocking listening socket bound to `local` (port 0 = ephemeral) and reports the bound
// address in *bound.
Status Listen(const Addr& local, int backlog, int* fd, Addr* bound);
// Starts a non-blocking connect, from `local` (port 0) when it is non-null so the traffic leaves through
// that rail. *fd is set on success; *in_progress says whether the connect is still pending (ConnectPoll).
Status ConnectStart(const Addr& remote, const Addr* local, int* fd, bool* in_progress);
// Non-blocking check of a pending connect: *connected=false while it runs, true once established;
// an error Status when it failed (e.g. ECONNREFUSED).
Status ConnectPoll(int fd, bool* connected);

// Raises the soft RLIMIT_NOFILE to the hard limit; reports the new soft value.
Status RaiseNofileLimit(uint64_t* soft_now);

}  // namespace rr::sock
