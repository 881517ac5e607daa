#include "rerail/sock.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <sstream>

namespace rr::sock {

uint16_t Addr::port() const {
  if (family() == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&ss)->sin_port);
  if (family() == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_port);
  return 0;
}

void Addr::set_port(uint16_t p) {
  if (family() == AF_INET) reinterpret_cast<sockaddr_in*>(&ss)->sin_port = htons(p);
  if (family() == AF_INET6) reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port = htons(p);
}

bool Addr::IsLoopback() const {
  if (family() == AF_INET) {
    return (ntohl(reinterpret_cast<const sockaddr_in*>(&ss)->sin_addr.s_addr) >> 24) == 127;
  }
  if (family() == AF_INET6) return IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_addr);
  return false;
}

std::string Addr::ToString() const {
  char buf[INET6_ADDRSTRLEN] = "?";
  if (family() == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&ss)->sin_addr, buf, sizeof(buf));
    return std::string(buf) + ":" + std::to_string(port());
  }
  if (family() == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_addr, buf, sizeof(buf));
    return "[" + std::string(buf) + "]:" + std::to_string(port());
  }
  return "<no address>";
}

Addr Addr::FromSockaddr(const sockaddr* sa) {
  Addr a;
  if (sa == nullptr) return a;
  if (sa->sa_family == AF_INET) a.len = sizeof(sockaddr_in);
  else if (sa->sa_family == AF_INET6) a.len = sizeof(sockaddr_in6);
  else return a;
  std::memcpy(&a.ss, sa, a.len);
  return a;
}

bool Addr::Parse(const std::string& ip, uint16_t p, Addr* out) {
  Addr a;
  auto* in4 = reinterpret_cast<sockaddr_in*>(&a.ss);
  auto* in6 = reinterpret_cast<sockaddr_in6*>(&a.ss);
  if (inet_pton(AF_INET, ip.c_str(), &in4->sin_addr) == 1) {
    in4->sin_family = AF_INET;
    a.len = sizeof(sockaddr_in);
  } else if (inet_pton(AF_INET6, ip.c_str(), &in6->sin6_addr) == 1) {
    in6->sin6_family = AF_INET6;
    a.len = sizeof(sockaddr_in6);
  } else {
    return false;
  }
  a.set_port(p);
  *out = a;
  return true;
}

namespace {
// Lower rank = preferred address for an interface.
int AddrRank(const sockaddr* sa) {
  if (sa->sa_family == AF_INET) return 0;
  const auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
  return IN6_IS_ADDR_LINKLOCAL(&in6->sin6_addr) ? 2 : 1;
}
}  // namespace

std::vector<Interface> ListInterfaces() {
  std::vector<Interface> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  std::map<std::string, std::pair<int, Interface>> best;  // name -> (rank, iface)
  for (ifaddrs* it = list; it != nullptr; it = it->ifa_next) {
    if (it->ifa_addr == nullptr || !(it->ifa_flags & IFF_UP)) continue;
    if (it->ifa_addr->sa_family != AF_INET && it->ifa_addr->sa_family != AF_INET6) continue;
    int rank = AddrRank(it->ifa_addr);
    auto found = best.find(it->ifa_name);
    if (found != best.end() && found->second.first <= rank) continue;
    Interface ifc;
    ifc.name = it->ifa_name;
    ifc.index = static_cast<int>(if_nametoindex(it->ifa_name));
    ifc.addr = Addr::FromSockaddr(it->ifa_addr);
    ifc.addr.set_port(0);
    ifc.loopback = (it->ifa_flags & IFF_LOOPBACK) != 0;
    best[ifc.name] = {rank, ifc};
  }
  freeifaddrs(list);
  for (auto& kv : best) out.push_back(kv.second.second);
  std::sort(out.begin(), out.end(), [](const Interface& a, const Interface& b) { return a.index < b.index; });
  return out;
}

IfFilter::IfFilter(const std::string& spec) {
  std::string s = spec;
  if (!s.empty() && s[0] == '^') exclude_ = true, s.erase(0, 1);
  if (!s.empty() && s[0] == '=') exact_ = true, s.erase(0, 1);
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    auto colon = item.find(':');
    if (colon != std::string::npos) item.resize(colon);  // "eth0:1234": the port part is NCCL's, ignored
    if (!item.empty()) names_.push_back(item);
  }
}

bool IfFilter::Match(const std::string& ifname) const {
  if (names_.empty()) return true;
  bool hit = false;
  for (const auto& n : names_) {
    hit = exact_ ? (ifname == n) : (ifname.compare(0, n.size(), n) == 0);
    if (hit) break;
  }
  return exclude_ ? !hit : hit;
}

void Close(int* fd) {
  if (*fd >= 0) ::close(*fd);
  *fd = -1;
}

Status SetNonBlocking(int fd) {
  int flags = fcntl(fd, F_GETFL);
  RR_SYSCHECK(flags, "fcntl(F_GETFL)");
  RR_SYSCHECK(fcntl(fd, F_SETFL, flags | O_NONBLOCK), "fcntl(O_NONBLOCK)");
  return Status::Ok();
}

Status SetNoDelay(int fd) {
  int one = 1;
  RR_SYSCHECK(setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)), "setsockopt(TCP_NODELAY)");
  return Status::Ok();
}

Status SetBufSizes(int fd, int bytes) {
  if (bytes <= 0) return Status::Ok();
  RR_SYSCHECK(setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof(bytes)), "setsockopt(SO_SNDBUF)");
  RR_SYSCHECK(setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof(bytes)), "setsockopt(SO_RCVBUF)");
  return Status::Ok();
}

Status SetUserTimeout(int fd, unsigned ms) {
  RR_SYSCHECK(setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &ms, sizeof(ms)), "setsockopt(TCP_USER_TIMEOUT)");
  return Status::Ok();
}

Status Listen(const Addr& local, int backlog, int* fd, Addr* bound) {
  int s = socket(local.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  RR_SYSCHECK(s, "socket()");
  int one = 1;
  setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(s, local.sa(), local.len) != 0 || listen(s, backlog) != 0) {
    Status st = Status::System("bind/listen(" + local.ToString() + ")");
    ::close(s);
    return st;
  }
  Addr b;
  b.len = sizeof(b.ss);
  if (getsockname(s, b.sa(), &b.len) != 0) {
    Status st = Status::System("getsockname()");
    ::close(s);
    return st;
  }
  *fd = s;
  *bound = b;
  return Status::Ok();
}

Status ConnectStart(const Addr& remote, const Addr* local, int* fd, bool* in_progress) {
  int s = socket(remote.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  RR_SYSCHECK(s, "socket()");
  if (local != nullptr && local->family() == remote.family()) {
    Addr src = *local;
    src.set_port(0);
    if (bind(s, src.sa(), src.len) != 0) {
      Status st = Status::System("bind(" + src.ToString() + ")");
      ::close(s);
      return st;
    }
  }
  int rc = ::connect(s, remote.sa(), remote.len);
  if (rc != 0 && errno != EINPROGRESS) {
    Status st = Status::System("connect(" + remote.ToString() + ")");
    ::close(s);
    return st;
  }
  *fd = s;
  *in_progress = (rc != 0);
  return Status::Ok();
}

Status ConnectPoll(int fd, bool* connected) {
  pollfd p{fd, POLLOUT, 0};
  int n = poll(&p, 1, 0);
  RR_SYSCHECK(n, "poll(connect)");
  *connected = false;
  if (n == 0) return Status::Ok();
  int err = 0;
  socklen_t len = sizeof(err);
  RR_SYSCHECK(getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len), "getsockopt(SO_ERROR)");
  if (err != 0) return Status::System("connect", err);
  *connected = true;
  return Status::Ok();
}

Status RaiseNofileLimit(uint64_t* soft_now) {
  rlimit rl{};
  RR_SYSCHECK(getrlimit(RLIMIT_NOFILE, &rl), "getrlimit(RLIMIT_NOFILE)");
  if (rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    RR_SYSCHECK(setrlimit(RLIMIT_NOFILE, &rl), "setrlimit(RLIMIT_NOFILE)");
  }
  *soft_now = rl.rlim_cur;
  return Status::Ok();
}

}  // namespace rr::sock
