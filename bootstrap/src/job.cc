// Job description, port checks and the symmetric address plan (rerail/boot/job.h).
#include "rerail/boot/job.h"

#include <arpa/inet.h>
#include <net/if.h>
#include <netdb.h>
#include <xxhash.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "rerail/params.h"

namespace rr::boot {
namespace {

const char* EnvOrNull(const char* name) {
  const char* v = std::getenv(name);  // documented aliases only (HPCT_*, SLURM_*, N_PROC_PER_NODE)
  return (v != nullptr && *v != '\0') ? v : nullptr;
}

Status ParsePositive(const char* name, const char* text, int lo, int hi, int* out) {
  char* end = nullptr;
  long v = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || v < lo || v > hi)
    return Status::InvalidUsage(std::string(name) + "='" + text + "' is not an integer in " + std::to_string(lo) +
                                ".." + std::to_string(hi));
  *out = static_cast<int>(v);
  return Status::Ok();
}

bool IsIpv6Literal(const std::string& host) { return host.find(':') != std::string::npos; }

bool PortReserved(const EphemeralPorts& eph, int port) {
  for (const auto& r : eph.reserved)
    if (port >= r.first && port <= r.second) return true;
  return false;
}

}  // namespace

Status JobSpecFromEnv(JobSpec* out, bool require_hosts) {
  RR_CHECK(Params::Load());
  JobSpec spec;
  std::string hosts = Params::Str(ParamId::Hosts);
  if (hosts.empty() && EnvOrNull("SLURM_JOB_NODELIST")) hosts = EnvOrNull("SLURM_JOB_NODELIST");
  if (hosts.empty() && require_hosts) return Status::InvalidUsage("no hosts: set RERAIL_HOSTS (or run under Slurm)");
  if (!hosts.empty()) RR_CHECK(ExpandHostList(hosts, &spec.hosts));
  if (Params::IsSet(ParamId::RanksPerHost)) {
    spec.ranks_per_host = static_cast<int>(Params::Int(ParamId::RanksPerHost));
  } else if (const char* v = EnvOrNull("N_PROC_PER_NODE")) {
    RR_CHECK(ParsePositive("N_PROC_PER_NODE", v, 1, 65536, &spec.ranks_per_host));
  }
  if (spec.ranks_per_host == 0) spec.ranks_per_host = 1;
  if (Params::IsSet(ParamId::PortBase)) {
    spec.port_base = static_cast<int>(Params::Int(ParamId::PortBase));
  } else if (const char* v = EnvOrNull("HPCT_PORT_BASE")) {
    RR_CHECK(ParsePositive("HPCT_PORT_BASE", v, 1, 65535, &spec.port_base));
  }
  spec.port_span = static_cast<int>(Params::Int(ParamId::PortSpan));
  spec.job_id = Params::Str(ParamId::JobId);
  if (spec.job_id.empty() && EnvOrNull("SLURM_JOB_ID")) spec.job_id = EnvOrNull("SLURM_JOB_ID");
  *out = std::move(spec);
  return Status::Ok();
}

bool RootlessRequested() {
  if (!Params::Load().ok()) return false;
  if (Params::IsSet(ParamId::Rootless)) return Params::Bool(ParamId::Rootless);
  const char* v = EnvOrNull("HPCT_USE_ROOTLESS");
  return v != nullptr && std::strcmp(v, "0") != 0;
}

Status ReadEphemeralPorts(EphemeralPorts* out, const char* range_path, const char* reserved_path) {
  EphemeralPorts eph;
  std::ifstream range(range_path);
  if (!(range >> eph.lo >> eph.hi) || eph.lo < 1 || eph.hi > 65535 || eph.lo > eph.hi)
    return Status::System(std::string("cannot read the ephemeral port range from ") + range_path, EINVAL);
  std::ifstream reserved(reserved_path);
  std::string list;
  if (reserved && std::getline(reserved, list)) {
    std::stringstream ss(list);
    std::string item;
    while (std::getline(ss, item, ',')) {
      int a = 0, b = 0;
      if (std::sscanf(item.c_str(), "%d-%d", &a, &b) == 2) eph.reserved.emplace_back(a, b);
      else if (std::sscanf(item.c_str(), "%d", &a) == 1) eph.reserved.emplace_back(a, a);
    }
  }
  *out = std::move(eph);
  return Status::Ok();
}

Status CheckPorts(const JobSpec& spec, const EphemeralPorts& eph) {
  if (spec.port_base < 1 || spec.port_base > 65535)
    return Status::InvalidUsage("port base " + std::to_string(spec.port_base) +
                                " is out of range 1..65535 (set RERAIL_PORT_BASE or HPCT_PORT_BASE)");
  if (spec.port_span < 1) return Status::InvalidUsage("port span must be >= 1");
  int last = spec.port_base + spec.port_span - 1;
  if (last > 65535)
    return Status::InvalidUsage("planned ports " + std::to_string(spec.port_base) + "-" + std::to_string(last) +
                                " run past 65535: lower RERAIL_PORT_BASE or RERAIL_PORT_SPAN");
  if (spec.ranks_per_host < 1 || spec.port_span < spec.ranks_per_host)
    return Status::InvalidUsage("port span " + std::to_string(spec.port_span) + " is smaller than " +
                                std::to_string(spec.ranks_per_host) + " ranks per host: two ranks would share a port");
  int first_bad = -1, nbad = 0;
  for (int p = spec.port_base; p <= last; ++p) {
    if (p >= eph.lo && p <= eph.hi && !PortReserved(eph, p)) {
      if (first_bad < 0) first_bad = p;
      ++nbad;
    }
  }
  if (nbad > 0)
    return Status::InvalidUsage(
        "planned ports " + std::to_string(spec.port_base) + "-" + std::to_string(last) + " overlap the ephemeral range " +
        std::to_string(eph.lo) + "-" + std::to_string(eph.hi) + " (" + std::to_string(nbad) + " ports from " +
        std::to_string(first_bad) + "): any outgoing socket may take a planned port. Put the plan below " +
        std::to_string(eph.lo) + " (RERAIL_PORT_BASE), or move the range (sysctl net.ipv4.ip_local_port_range), "
        "or reserve the ports (net.ipv4.ip_local_reserved_ports)");
  return Status::Ok();
}

std::string SockAddr::ToString() const {
  char host[INET6_ADDRSTRLEN] = "?";
  if (u.sa.sa_family == AF_INET) {
    inet_ntop(AF_INET, &u.sin.sin_addr, host, sizeof(host));
    return std::string(host) + ":" + std::to_string(ntohs(u.sin.sin_port));
  }
  if (u.sa.sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &u.sin6.sin6_addr, host, sizeof(host));
    std::string scope;
    if (u.sin6.sin6_scope_id != 0) {
      char ifname[IF_NAMESIZE] = {0};
      scope = std::string("%") + (if_indextoname(u.sin6.sin6_scope_id, ifname) ? ifname : "?");
    }
    return "[" + std::string(host) + scope + "]:" + std::to_string(ntohs(u.sin6.sin6_port));
  }
  return "<unset>";
}

Status ParseHostPort(const std::string& text, SockAddr* out) {
  SockAddr a;
  std::string host, port;
  if (!text.empty() && text[0] == '[') {
    size_t close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':')
      return Status::InvalidUsage("'" + text + "' is not [<ipv6>]:<port>");
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    size_t colon = text.rfind(':');
    if (colon == std::string::npos || colon == 0 || text.find(':') != colon)
      return Status::InvalidUsage("'" + text + "' is not <ipv4-or-name>:<port> (IPv6 needs [addr]:port)");
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  int p = 0;
  RR_CHECK(ParsePositive(("port of '" + text + "'").c_str(), port.c_str(), 1, 65535, &p));
  if (text[0] == '[') {
    std::string ip = host, ifname;
    size_t pct = host.find('%');
    if (pct != std::string::npos) ip = host.substr(0, pct), ifname = host.substr(pct + 1);
    a.u.sin6.sin6_family = AF_INET6;
    if (inet_pton(AF_INET6, ip.c_str(), &a.u.sin6.sin6_addr) != 1)
      return Status::InvalidUsage("'" + ip + "' in '" + text + "' is not an IPv6 address");
    if (!ifname.empty() && (a.u.sin6.sin6_scope_id = if_nametoindex(ifname.c_str())) == 0)
      return Status::InvalidUsage("unknown interface '" + ifname + "' in '" + text + "'");
    a.u.sin6.sin6_port = htons(static_cast<uint16_t>(p));
    a.len = sizeof(sockaddr_in6);
    *out = a;
    return Status::Ok();
  }
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0) return Status::InvalidUsage("unknown host '" + host + "': " + gai_strerror(rc));
  if (res->ai_family == AF_INET) {
    std::memcpy(&a.u.sin, res->ai_addr, sizeof(sockaddr_in));
    a.u.sin.sin_port = htons(static_cast<uint16_t>(p));
    a.len = sizeof(sockaddr_in);
  } else if (res->ai_family == AF_INET6) {
    std::memcpy(&a.u.sin6, res->ai_addr, sizeof(sockaddr_in6));
    a.u.sin6.sin6_port = htons(static_cast<uint16_t>(p));
    a.u.sin6.sin6_flowinfo = 0;
    a.u.sin6.sin6_scope_id = 0;  // NCCL forces global scope for names
    a.len = sizeof(sockaddr_in6);
  }
  freeaddrinfo(res);
  if (a.len == 0) return Status::InvalidUsage("host '" + host + "' has no IPv4/IPv6 address");
  *out = a;
  return Status::Ok();
}

Status Job::Create(const JobSpec& spec, std::unique_ptr<Job>* out) {
  EphemeralPorts eph;
  RR_CHECK(ReadEphemeralPorts(&eph));
  return Create(spec, eph, out);
}

Status Job::Create(const JobSpec& spec, const EphemeralPorts& eph, std::unique_ptr<Job>* out) {
  if (spec.hosts.empty()) return Status::InvalidUsage("the job has no hosts");
  RR_CHECK(CheckPorts(spec, eph));
  long max_ranks = static_cast<long>(spec.hosts.size()) * spec.ranks_per_host;
  if (spec.nranks < 0 || spec.nranks > max_ranks)
    return Status::InvalidUsage("nranks " + std::to_string(spec.nranks) + " does not fit " +
                                std::to_string(spec.hosts.size()) + " hosts x " + std::to_string(spec.ranks_per_host) +
                                " ranks per host");
  if (max_ranks > (1 << 24)) return Status::InvalidUsage("more than 16M ranks");
  auto job = std::unique_ptr<Job>(new Job());
  job->spec_ = spec;
  job->nranks_ = spec.nranks > 0 ? spec.nranks : static_cast<int>(max_ranks);
  for (size_t h = 0; h < spec.hosts.size(); ++h) {
    SockAddr a;
    std::string hp = (IsIpv6Literal(spec.hosts[h]) ? "[" + spec.hosts[h] + "]" : spec.hosts[h]) + ":1";
    Status s = ParseHostPort(hp, &a);
    if (!s.ok()) return Status(s.code(), "host entry " + std::to_string(h) + " ('" + spec.hosts[h] + "'): " + s.message());
    job->addrs_.push_back(a);
  }
  *out = std::move(job);
  return Status::Ok();
}

int Job::Port(int rank, uint64_t group) const {
  uint64_t slot = group * static_cast<uint64_t>(spec_.ranks_per_host) + static_cast<uint64_t>(LocalRankOf(rank));
  return spec_.port_base + static_cast<int>(slot % static_cast<uint64_t>(spec_.port_span));
}

SockAddr Job::Address(int rank, uint64_t group) const {
  SockAddr a = addrs_[HostOf(rank)];
  uint16_t port = htons(static_cast<uint16_t>(Port(rank, group)));
  if (a.u.sa.sa_family == AF_INET) a.u.sin.sin_port = port;
  else a.u.sin6.sin6_port = port;
  return a;
}

std::string Job::CommIdString(int rank, uint64_t group) const {
  const std::string& h = spec_.hosts[HostOf(rank)];
  std::string host = IsIpv6Literal(h) ? "[" + h + "]" : h;
  return host + ":" + std::to_string(Port(rank, group));
}

uint64_t Job::Magic(uint64_t group) const {
  std::string key = "rerail-bootstrap/" + (spec_.job_id.empty() ? std::string("rerail") : spec_.job_id) + "/" +
                    std::to_string(group);
  uint64_t m = XXH64(key.data(), key.size(), 0x52455241494cull);
  return m == kNcclCommIdMagic ? m + 1 : m;
}

}  // namespace rr::boot
