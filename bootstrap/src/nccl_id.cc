// Store-less ids and the interface checks NCCL applies to NCCL_COMM_ID (rerail/boot/nccl.h).
#include <ifaddrs.h>
#include <net/if.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "rerail/boot/nccl.h"

namespace rr::boot {
namespace {

bool SameSubnet(const ifaddrs& ifa, const SockAddr& remote) {
  int family = ifa.ifa_addr->sa_family;
  if (family != remote.u.sa.sa_family || ifa.ifa_netmask == nullptr) return false;
  if (family == AF_INET) {
    uint32_t local = reinterpret_cast<const sockaddr_in*>(ifa.ifa_addr)->sin_addr.s_addr;
    uint32_t mask = reinterpret_cast<const sockaddr_in*>(ifa.ifa_netmask)->sin_addr.s_addr;
    return (local & mask) == (remote.u.sin.sin_addr.s_addr & mask);
  }
  const auto* local = reinterpret_cast<const sockaddr_in6*>(ifa.ifa_addr);
  const auto* mask = reinterpret_cast<const sockaddr_in6*>(ifa.ifa_netmask);
  for (int i = 0; i < 16; ++i)
    if ((local->sin6_addr.s6_addr[i] ^ remote.u.sin6.sin6_addr.s6_addr[i]) & mask->sin6_addr.s6_addr[i]) return false;
  // Link-local addresses of different interfaces share a prefix; NCCL compares the scope too.
  return local->sin6_scope_id == remote.u.sin6.sin6_scope_id;
}

}  // namespace

Status BuildNcclId(const std::string& comm_id, uint64_t magic, unsigned char out[kNcclIdBytes]) {
  SockAddr a;
  RR_CHECK(ParseHostPort(comm_id, &a));
  std::memset(out, 0, kNcclIdBytes);
  std::memcpy(out, &magic, sizeof(magic));         // host order, as NCCL stores it
  static_assert(sizeof(a.u) == 28, "NCCL's socket address union is 28 bytes");
  std::memcpy(out + 8, &a.u, sizeof(a.u));          // family, port (network order), address
  return Status::Ok();
}

Status JobNcclId(const Job& job, uint64_t group, bool job_magic, unsigned char out[kNcclIdBytes]) {
  return BuildNcclId(job.CommIdString(0, group), job_magic ? job.Magic(group) : kNcclCommIdMagic, out);
}

Status FindInterfaceOnSubnet(const SockAddr& addr, std::string* ifname) {
  ifaddrs* list = nullptr;
  RR_SYSCHECK(getifaddrs(&list), "getifaddrs");
  std::string seen;
  for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6)) continue;
    if (SameSubnet(*i, addr)) {
      *ifname = i->ifa_name;
      freeifaddrs(list);
      return Status::Ok();
    }
    if (seen.find(i->ifa_name) == std::string::npos) seen += std::string(seen.empty() ? "" : ",") + i->ifa_name;
  }
  freeifaddrs(list);
  return Status::InvalidUsage("no local interface is on the subnet of " + addr.ToString() + " (interfaces: " + seen +
                              "): with NCCL_COMM_ID set NCCL requires one and fails every init otherwise");
}

bool IsLocalAddress(const SockAddr& addr) {
  // Binding is the kernel's own answer (127.0.0.2 is local although no interface lists it).
  SockAddr a = addr;
  if (a.u.sa.sa_family == AF_INET) a.u.sin.sin_port = 0;
  else a.u.sin6.sin6_port = 0;
  int fd = socket(a.u.sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  bool ok = bind(fd, &a.u.sa, a.len) == 0;
  close(fd);
  return ok;
}

}  // namespace rr::boot
