// rerail bootstrap — job description and the symmetric address plan (C++ API).
//
// A job is a list of hosts, a number of ranks per host, a port base and a span. From it every rank
// computes, without talking to anybody, the address where any rank listens for any group:
//
//     address(rank, group) = host[rank / ranksPerHost] : base + (group * ranksPerHost + localRank) % span
//
// A "group" is a counter the application bumps for every communicator (and every recovery), so a
// re-created communicator listens on fresh ports and never meets a stale socket of its previous life.
// Rank r lives on host r / ranksPerHost (block layout), so rank 0 is on the first host, as the NCCL
// root must be (see rerail/bootstrap.h).
//
// Contract
//   * JobSpec is plain input; Job::Create validates it (ports, span, ephemeral range, host names) and
//     resolves every host once with getaddrinfo(AF_UNSPEC), keeping the first answer — the rule NCCL
//     applies to NCCL_COMM_ID — so every rank gets the same addresses. A Job is immutable afterwards
//     and safe to share between threads.
//   * Errors come back as rr::Status with a message naming the bad input (entry, value, what is
//     accepted); nothing is logged by the validators themselves except through the returned Status.
//   * Nothing here blocks except name resolution in Job::Create.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "rerail/status.h"

namespace rr::boot {

// What the user describes. Zero/empty fields mean "not given".
struct JobSpec {
  std::vector<std::string> hosts;  // expanded host list (names, IPv4, IPv6 with or without [])
  int ranks_per_host = 1;          // >= 1
  int nranks = 0;                  // 0: hosts.size() * ranks_per_host; else 1..that
  int port_base = 0;               // first planned port (required, 1..65535)
  int port_span = 1024;            // ports the plan wraps within (>= ranks_per_host)
  std::string job_id;              // identity mixed into per-(job, group) magics
};

// Expands a Slurm-style node list: "gpu[001-004,010],login1,rack[1-2]-n[1-2]". Brackets hold ranges
// "lo-hi" and single numbers separated by commas; zero padding follows the width of "lo". Several
// bracket groups in one name multiply. Errors (unbalanced brackets, reversed or empty ranges,
// non-digits, more than max_hosts hosts) name the offending text. max_hosts bounds the work and memory
// any text can cause, including inside one bracket (tests and the fuzzer pass smaller bounds).
constexpr size_t kMaxHosts = 65536;
Status ExpandHostList(const std::string& text, std::vector<std::string>* out, size_t max_hosts = kMaxHosts);

// Fills a JobSpec from RERAIL_HOSTS, RERAIL_RANKS_PER_HOST, RERAIL_PORT_BASE, RERAIL_PORT_SPAN,
// RERAIL_JOB_ID (rr::Params). Documented aliases, used when the RERAIL_ variable is not set:
// HPCT_PORT_BASE for the port base, N_PROC_PER_NODE for ranks per host, SLURM_JOB_NODELIST for the
// hosts and SLURM_JOB_ID for the job id. With require_hosts false a missing host list is not an
// error (the caller supplies hosts itself).
Status JobSpecFromEnv(JobSpec* out, bool require_hosts = true);

// True when rootless init is requested: RERAIL_ROOTLESS, or its alias HPCT_USE_ROOTLESS.
bool RootlessRequested();

// The kernel's ephemeral port range ("lo hi" in /proc/sys/net/ipv4/ip_local_port_range) and the
// ports reserved from it (ip_local_reserved_ports: "a,b-c"). Paths are parameters for tests.
struct EphemeralPorts {
  int lo = 32768, hi = 60999;
  std::vector<std::pair<int, int>> reserved;  // inclusive ranges
};
Status ReadEphemeralPorts(EphemeralPorts* out,
                          const char* range_path = "/proc/sys/net/ipv4/ip_local_port_range",
                          const char* reserved_path = "/proc/sys/net/ipv4/ip_local_reserved_ports");

// Checks base/span against 1..65535, span >= ranks per host, and that no planned port can be handed
// out as an ephemeral port (inside [lo, hi] and not reserved) — the collision HyperPod avoids with
// its sysctl. The error says which ports overlap and how to fix it.
Status CheckPorts(const JobSpec& spec, const EphemeralPorts& eph);

// A resolved socket address (IPv4 or IPv6).
struct SockAddr {
  union {
    sockaddr sa;
    sockaddr_in sin;
    sockaddr_in6 sin6;
  } u{};
  socklen_t len = 0;
  std::string ToString() const;  // "10.0.0.1:5000" / "[fd00::2]:5000"
};

// Parses "<ipv4|name>:<port>" or "[<ipv6>(%if)]:<port>" the way NCCL parses NCCL_COMM_ID (first
// getaddrinfo answer for names; IPv6 flowinfo and scope 0 unless "%if" is given), but strictly:
// a missing or out-of-range port or an unresolvable name is an error.
Status ParseHostPort(const std::string& text, SockAddr* out);

class Job {
 public:
  // Validates spec (CheckPorts against `eph`, host list non-empty, nranks) and resolves every host.
  static Status Create(const JobSpec& spec, const EphemeralPorts& eph, std::unique_ptr<Job>* out);
  // Same, reading the ephemeral range of this machine.
  static Status Create(const JobSpec& spec, std::unique_ptr<Job>* out);

  int nranks() const { return nranks_; }
  int nhosts() const { return static_cast<int>(spec_.hosts.size()); }
  int ranks_per_host() const { return spec_.ranks_per_host; }
  const JobSpec& spec() const { return spec_; }
  int HostOf(int rank) const { return rank / spec_.ranks_per_host; }
  int LocalRankOf(int rank) const { return rank % spec_.ranks_per_host; }
  const SockAddr& HostAddr(int host) const { return addrs_[host]; }

  // Planned port / address of `rank` for `group`. rank must be in [0, nranks).
  int Port(int rank, uint64_t group) const;
  SockAddr Address(int rank, uint64_t group) const;
  // "host:port" exactly as NCCL_COMM_ID takes it, with the host written as the user wrote it (a
  // name stays a name, so NCCL resolves it itself; IPv6 gets brackets).
  std::string CommIdString(int rank, uint64_t group) const;
  // 64-bit magic for (job id, group): xxh64 of both; never equal to NCCL's constant magic.
  uint64_t Magic(uint64_t group) const;

 private:
  JobSpec spec_;
  int nranks_ = 0;
  std::vector<SockAddr> addrs_;
};

// Magic NCCL uses for ids built from NCCL_COMM_ID (reference §7.1).
constexpr uint64_t kNcclCommIdMagic = 0x0280028002800280ull;

}  // namespace rr::boot
