#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cstring>

#include "../../wire.h"
#include "rerail/auth.h"
#include "tcp.h"

namespace rr::net::tcp {

TcpLink::TcpLink(std::vector<int> fds, const LinkIdentity& id, std::string desc)
    : fds_(std::move(fds)), id_(id), desc_(std::move(desc)) {}

TcpLink::~TcpLink() {
  for (int& fd : fds_) sock::Close(&fd);
}

// One buffer goes through send()/recv(): sendmsg()/recvmsg() copy a msghdr and an iovec array in
// from user space first (~0.2 us a call here, on every frame and every empty read).
IoState TcpLink::Writev(int stream, const iovec* iov, int iovcnt, size_t* n, int* err) {
  msghdr msg{};
  msg.msg_iov = const_cast<iovec*>(iov);
  msg.msg_iovlen = static_cast<size_t>(iovcnt);
  for (;;) {
    ssize_t r = iovcnt == 1 ? send(fds_[stream], iov[0].iov_base, iov[0].iov_len, MSG_NOSIGNAL | MSG_DONTWAIT)
                            : sendmsg(fds_[stream], &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (r >= 0) {
      *n = static_cast<size_t>(r);
      return IoState::kOk;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return IoState::kAgain;
    *err = errno;
    return IoState::kError;
  }
}

IoState TcpLink::Read(int stream, void* buf, size_t len, size_t* n, int* err) {
  if (len == 0) return IoState::kAgain;  // nothing asked: not a closed stream
  iovec iov{buf, len};
  return Readv(stream, &iov, 1, n, err);
}

IoState TcpLink::Readv(int stream, const iovec* iov, int iovcnt, size_t* n, int* err) {
  msghdr msg{};
  msg.msg_iov = const_cast<iovec*>(iov);
  msg.msg_iovlen = static_cast<size_t>(iovcnt);
  for (;;) {
    ssize_t r = iovcnt == 1 ? recv(fds_[stream], iov[0].iov_base, iov[0].iov_len, MSG_DONTWAIT)
                            : recvmsg(fds_[stream], &msg, MSG_DONTWAIT);
    if (r > 0) {
      *n = static_cast<size_t>(r);
      return IoState::kOk;
    }
    if (r == 0) return IoState::kClosed;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return IoState::kAgain;
    *err = errno;
    return IoState::kError;
  }
}

bool TcpLink::Sample(int stream, StreamSample* out) {
  TcpProgress tp;
  if (!ReadTcpProgress(fds_[stream], &tp)) return false;
  out->acked_bytes = tp.bytes_acked;
  out->in_flight = tp.unacked;  // segments: only "zero or not" matters
  out->notsent = tp.notsent_bytes;
  out->outq = tp.outq_bytes;
  out->min_rtt_ns = static_cast<uint64_t>(tp.min_rtt_us) * 1000;
  out->rwnd_limited_ns = tp.rwnd_limited_us * 1000;
  out->peer_window = tp.snd_wnd;
  return true;
}

void MakeHello(const LinkIdentity& id, int stream, const std::string& secret, Hello* h, uint8_t* tag) {
  std::memset(h, 0, sizeof(*h));
  h->magic = kHelloMagic;
  h->version = kWireVersion;
  h->stream = static_cast<uint8_t>(stream);
  h->nstreams = static_cast<uint8_t>(id.nstreams);
  std::memcpy(h->nonce, id.nonce.data(), sizeof(h->nonce));
  h->conn_id = id.conn_id;
  h->chunk_size = id.chunk_size;
  h->rail = static_cast<uint8_t>(id.rail);
  h->link = static_cast<uint8_t>(id.link);
  h->flags = static_cast<uint16_t>((secret.empty() ? 0 : kHelloFlagTag) | (id.grouped ? kHelloFlagGrouped : 0));
  h->epoch = id.epoch;
  h->check = XXH32(h, offsetof(Hello, check), kHelloMagic);
  if (!secret.empty()) {
    auth::Tag t{};
    (void)auth::Hmac(secret, kHelloTagContext, h, sizeof(*h), &t);  // a failure yields a tag the peer rejects
    std::memcpy(tag, t.data(), t.size());
  }
}

bool CheckHello(const Hello& h, const Nonce& nonce, const std::string& secret, bool* tag_follows, std::string* why) {
  *tag_follows = false;
  if (h.magic != kHelloMagic) return *why = "not a rerail hello (bad magic)", false;
  if (h.check != XXH32(&h, offsetof(Hello, check), kHelloMagic)) return *why = "corrupted hello", false;
  if (h.version != kWireVersion) return *why = "wire version " + std::to_string(h.version), false;
  if (!auth::ConstantTimeEqual(h.nonce, nonce.data(), sizeof(h.nonce))) return *why = "wrong nonce", false;
  if (h.nstreams < 1 || h.nstreams > kMaxStreams || h.stream >= h.nstreams) {
    return *why = "bad stream " + std::to_string(h.stream) + "/" + std::to_string(h.nstreams), false;
  }
  if (h.chunk_size < 4096 || h.chunk_size > (64u << 20)) return *why = "bad chunk size", false;
  if ((h.flags & ~(kHelloFlagTag | kHelloFlagGrouped)) != 0) return *why = "unknown hello flags " + std::to_string(h.flags), false;
  const bool tagged = (h.flags & kHelloFlagTag) != 0;
  if (!secret.empty() && !tagged) return *why = "no RERAIL_JOB_SECRET tag (this job requires one)", false;
  if (secret.empty() && tagged) return *why = "peer uses RERAIL_JOB_SECRET but this process has none", false;
  *tag_follows = tagged;
  return true;
}

bool CheckHelloTag(const Hello& h, const std::string& secret, const uint8_t* tag, std::string* why) {
  if (auth::VerifyHmac(secret, kHelloTagContext, &h, sizeof(h), tag)) return true;
  *why = "bad RERAIL_JOB_SECRET tag (wrong secret or forged hello)";
  return false;
}

}  // namespace rr::net::tcp
