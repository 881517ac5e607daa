// rerail — TCP transport: rails are network interfaces, links are sets of TCP streams.
//
// Contract
//   * DiscoverTcpDevices applies RERAIL_TCP_IFNAME (NCCL syntax, see rr::sock::IfFilter). Loopback
//     interfaces are used only when the filter names them or when no other interface qualifies.
//     No usable interface → kInvalidUsage naming the filter and what exists.
//   * TcpTransport is created once per plugin context, after discovery; its device table is immutable,
//     so Device()/NumDevices() are safe from any thread. Listen/Connect create independent objects
//     (one thread each at a time; NCCL's proxy service thread).
//   * Every socket is non-blocking, close-on-exec, TCP_NODELAY; SO_SNDBUF/SO_RCVBUF only when
//     RERAIL_TCP_SOCKBUF is set. Sends use MSG_NOSIGNAL (a dead peer is an error, not SIGPIPE).
//   * A stream whose hello does not arrive within connect_timeout_ms is closed with a WARN.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "../../transport.h"
#include "../../wire.h"

namespace rr::net::tcp {

struct TcpConfig {
  int streams = 2;               // RERAIL_TCP_STREAMS
  int sockbuf = 0;               // RERAIL_TCP_SOCKBUF (0: autotune)
  int connect_timeout_ms = 30000;
  unsigned user_timeout_ms = 0;  // TCP_USER_TIMEOUT (0: kernel default)
  std::string secret;            // RERAIL_JOB_SECRET (empty: hellos carry no tag)
};

Status DiscoverTcpDevices(const std::string& filter, std::vector<DeviceInfo>* out);

// Applies the per-stream socket options of `cfg` to a connected socket.
Status TuneStream(int fd, const TcpConfig& cfg);

// What the kernel says about a stream's send side (TCP_INFO).
struct TcpProgress {
  uint32_t unacked = 0;           // segments in flight, not yet acknowledged
  uint64_t bytes_acked = 0;       // cumulative bytes the peer acknowledged (snd_una progress)
  uint32_t notsent_bytes = 0;     // written by the application, not yet sent
  uint32_t outq_bytes = 0;        // written, not yet acknowledged (SIOCOUTQ: unsent + in flight)
  uint32_t min_rtt_us = 0;        // the minimum RTT the kernel measured (0: unknown)
  uint64_t rwnd_limited_us = 0;   // time the peer's receive window was the limit (Linux >= 4.10; else 0)
  uint64_t snd_wnd = UINT64_MAX;  // the peer's advertised receive window (Linux >= 5.4; else UINT64_MAX)
};
// False when TCP_INFO fails or the kernel lacks tcpi_bytes_acked.
bool ReadTcpProgress(int fd, TcpProgress* out);

// An established link: owns its stream descriptors.
class TcpLink final : public Link {
 public:
  TcpLink(std::vector<int> fds, const LinkIdentity& id, std::string desc);
  ~TcpLink() override;
  int streams() const override { return static_cast<int>(fds_.size()); }
  const LinkIdentity& identity() const override { return id_; }
  IoState Writev(int stream, const iovec* iov, int iovcnt, size_t* n, int* err) override;
  IoState Read(int stream, void* buf, size_t len, size_t* n, int* err) override;
  IoState Readv(int stream, const iovec* iov, int iovcnt, size_t* n, int* err) override;
  std::string Describe() const override { return desc_; }
  bool Sample(int stream, StreamSample* out) override;

 private:
  std::vector<int> fds_;
  LinkIdentity id_;
  std::string desc_;
};

class TcpTransport final : public Transport {
 public:
  TcpTransport(std::vector<DeviceInfo> devs, const TcpConfig& cfg) : devs_(std::move(devs)), cfg_(cfg) {}
  const char* name() const override { return "tcp"; }
  int NumDevices() const override { return static_cast<int>(devs_.size()); }
  const DeviceInfo& Device(int dev) const override { return devs_[dev]; }
  const TcpConfig& config() const { return cfg_; }
  Status Listen(int dev, const Nonce& nonce, Handle* h, std::unique_ptr<Listener>* out) override;
  Status Connect(int dev, const sock::Addr& remote, const LinkIdentity& id,
                 std::unique_ptr<Connector>* out) override;

 private:
  std::vector<DeviceInfo> devs_;
  TcpConfig cfg_;
};

// Hello encoding shared by the listener and the connector. With a secret, the hello has kHelloFlagTag
// and *tag (may be NULL without a secret) receives its HMAC (wire.h).
void MakeHello(const LinkIdentity& id, int stream, const std::string& secret, struct Hello* h, uint8_t* tag);
// Validates a received hello against the listener's nonce (constant-time compare) and its secret
// configuration; false with *why on any mismatch. *tag_follows: a tag must be read and checked with
// CheckHelloTag before the stream is trusted.
bool CheckHello(const struct Hello& h, const Nonce& nonce, const std::string& secret, bool* tag_follows,
                std::string* why);
bool CheckHelloTag(const struct Hello& h, const std::string& secret, const uint8_t* tag, std::string* why);
inline void MakeHello(const LinkIdentity& id, int stream, struct Hello* h) { MakeHello(id, stream, std::string(), h, nullptr); }
// Without a secret (the pre-issue-15 signature, kept for parsers/fuzzers of the untagged hello).
inline bool CheckHello(const struct Hello& h, const Nonce& nonce, std::string* why) {
  bool tag_follows = false;
  return CheckHello(h, nonce, std::string(), &tag_follows, why);
}

}  // namespace rr::net::tcp
