#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cstring>

#include "../../wire.h"
#include "tcp.h"

namespace rr::net::tcp {

TcpLink::TcpLink(std::vector<int> fds, const LinkIdentity& id, std::string desc)
    : fds_(std::move(fds)), id_(id), desc_(std::move(desc)) {}

TcpLink::~TcpLink() {
  for (int& fd : fds_) sock::Close(&fd);
}

IoState TcpLink::Writev(int stream, const iovec* iov, int iovcnt, size_t* n, int* err) {
  msghdr msg{};
  msg.msg_iov = const_cast<iovec*>(iov);
  msg.msg_iovlen = static_cast<size_t>(iovcnt);
  for (;;) {
    ssize_t r = sendmsg(fds_[stream], &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
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
  for (;;) {
    ssize_t r = recv(fds_[stream], buf, len, MSG_DONTWAIT);
    if (r > 0) {
      *n = static_cast<size_t>(r);
      return IoState::kOk;
    }
    if (r == 0) return len == 0 ? IoState::kAgain : IoState::kClosed;
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
  return true;
}

void MakeHello(const LinkIdentity& id, int stream, Hello* h) {
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
  h->epoch = id.epoch;
  h->check = XXH32(h, offsetof(Hello, check), kHelloMagic);
}

bool CheckHello(const Hello& h, const Nonce& nonce, std::string* why) {
  if (h.magic != kHelloMagic) return *why = "not a rerail hello (bad magic)", false;
  if (h.check != XXH32(&h, offsetof(Hello, check), kHelloMagic)) return *why = "corrupted hello", false;
  if (h.version != kWireVersion) return *why = "wire version " + std::to_string(h.version), false;
  if (std::memcmp(h.nonce, nonce.data(), sizeof(h.nonce)) != 0) return *why = "wrong nonce", false;
  if (h.nstreams < 1 || h.nstreams > kMaxStreams || h.stream >= h.nstreams) {
    return *why = "bad stream " + std::to_string(h.stream) + "/" + std::to_string(h.nstreams), false;
  }
  if (h.chunk_size < 4096 || h.chunk_size > (64u << 20)) return *why = "bad chunk size", false;
  return true;
}

}  // namespace rr::net::tcp
