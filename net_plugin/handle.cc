#include "handle.h"

#include <arpa/inet.h>
#include <sys/random.h>
#include <xxhash.h>

#include <cstring>

namespace rr::net {
namespace {

constexpr size_t kAddrOff = 24;
constexpr size_t kEntrySize = 20;
constexpr size_t kCheckOff = 124;
static_assert(kAddrOff + kMaxAddrs * kEntrySize <= kCheckOff, "address entries overlap the checksum");

uint32_t Checksum(const uint8_t* p) { return XXH32(p, kCheckOff, kHandleMagic); }

void Put32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint32_t Get32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(p[i]) << (8 * i);
  return v;
}

bool AllZero(const uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (p[i] != 0) return false;
  return true;
}

}  // namespace

Status EncodeHandle(const Handle& h, void* out) {
  if (h.addrs.empty() || h.addrs.size() > static_cast<size_t>(kMaxAddrs)) {
    return Status::InvalidArg("handle needs 1.." + std::to_string(kMaxAddrs) + " addresses, got " +
                              std::to_string(h.addrs.size()));
  }
  uint8_t b[kHandleSize] = {0};
  Put32(b, kHandleMagic);
  b[4] = kHandleVersion;
  b[5] = static_cast<uint8_t>(h.addrs.size());
  std::memcpy(b + 8, h.nonce.data(), h.nonce.size());
  for (size_t i = 0; i < h.addrs.size(); ++i) {
    uint8_t* e = b + kAddrOff + i * kEntrySize;
    const sock::Addr& a = h.addrs[i].addr;
    if (h.addrs[i].rail < 0 || h.addrs[i].rail > 255) return Status::InvalidArg("rail index out of range");
    e[1] = static_cast<uint8_t>(h.addrs[i].rail);
    uint16_t port = htons(a.port());
    std::memcpy(e + 2, &port, 2);
    if (a.family() == AF_INET) {
      e[0] = 4;
      std::memcpy(e + 4, &reinterpret_cast<const sockaddr_in*>(&a.ss)->sin_addr, 4);
    } else if (a.family() == AF_INET6) {
      e[0] = 6;
      std::memcpy(e + 4, &reinterpret_cast<const sockaddr_in6*>(&a.ss)->sin6_addr, 16);
    } else {
      return Status::InvalidArg("handle address " + std::to_string(i) + " is neither IPv4 nor IPv6");
    }
  }
  Put32(b + kCheckOff, Checksum(b));
  std::memcpy(out, b, kHandleSize);
  return Status::Ok();
}

Status DecodeHandle(const void* in, Handle* h) {
  if (in == nullptr) return Status::InvalidArg("listen handle is NULL");
  uint8_t b[kHandleSize];
  std::memcpy(b, in, kHandleSize);
  if (Get32(b) != kHandleMagic) {
    return Status::InvalidArg("not a rerail listen handle (bad magic; was it produced by another plugin?)");
  }
  if (b[4] != kHandleVersion) {
    return Status::InvalidArg("listen handle version " + std::to_string(b[4]) + ", this build speaks " +
                              std::to_string(kHandleVersion));
  }
  if (Get32(b + kCheckOff) != Checksum(b)) {
    return Status::InvalidArg("listen handle checksum mismatch (truncated or corrupted handle)");
  }
  int n = b[5];
  if (n < 1 || n > kMaxAddrs) return Status::InvalidArg("listen handle has " + std::to_string(n) + " addresses");
  Handle out;
  std::memcpy(out.nonce.data(), b + 8, out.nonce.size());
  for (int i = 0; i < n; ++i) {
    const uint8_t* e = b + kAddrOff + i * kEntrySize;
    HandleAddr ha;
    ha.rail = e[1];
    uint16_t port;
    std::memcpy(&port, e + 2, 2);
    port = ntohs(port);
    if (port == 0) return Status::InvalidArg("listen handle address " + std::to_string(i) + " has port 0");
    if (e[0] == 4 && AllZero(e + 8, 12)) {
      auto* in4 = reinterpret_cast<sockaddr_in*>(&ha.addr.ss);
      in4->sin_family = AF_INET;
      std::memcpy(&in4->sin_addr, e + 4, 4);
      ha.addr.len = sizeof(sockaddr_in);
    } else if (e[0] == 6) {
      auto* in6 = reinterpret_cast<sockaddr_in6*>(&ha.addr.ss);
      in6->sin6_family = AF_INET6;
      std::memcpy(&in6->sin6_addr, e + 4, 16);
      ha.addr.len = sizeof(sockaddr_in6);
    } else {
      return Status::InvalidArg("listen handle address " + std::to_string(i) + " has bad family " +
                                std::to_string(e[0]));
    }
    ha.addr.set_port(port);
    out.addrs.push_back(ha);
  }
  *h = out;
  return Status::Ok();
}

Status RandomNonce(Nonce* n) {
  size_t got = 0;
  while (got < n->size()) {
    ssize_t r = getrandom(n->data() + got, n->size() - got, 0);
    if (r < 0 && errno == EINTR) continue;
    RR_SYSCHECK(r, "getrandom()");
    got += static_cast<size_t>(r);
  }
  return Status::Ok();
}

Status RandomU64(uint64_t* v) {
  Nonce n;
  RR_CHECK(RandomNonce(&n));
  std::memcpy(v, n.data(), sizeof(*v));
  return Status::Ok();
}

}  // namespace rr::net
