#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "../../wire.h"
#include "rerail/auth.h"
#include "rerail/clock.h"
#include "rerail/log.h"
#include "tcp.h"

namespace rr::net::tcp {
namespace {

// Retry delay after a refused/unreachable attempt (the listener may not be up yet on a busy host).
constexpr uint64_t kRetryNs = 20 * 1000000ull;

struct OutStream {
  int fd = -1;
  bool connected = false;
  unsigned char wire[sizeof(Hello) + auth::kTagBytes] = {};  // the hello, then its tag (when a secret is set)
  size_t len = sizeof(Hello);
  size_t sent = 0;
  uint64_t retry_at_ns = 0;
};

class TcpConnector final : public Connector {
 public:
  TcpConnector(const TcpTransport* t, int dev, const sock::Addr& remote, const LinkIdentity& id)
      : t_(t), dev_(dev), remote_(remote), id_(id), streams_(id.nstreams) {
    deadline_ns_ = NowNs() + static_cast<uint64_t>(t->config().connect_timeout_ms) * 1000000ull;
    for (int i = 0; i < id.nstreams; ++i) {
      OutStream& o = streams_[i];
      Hello h;
      MakeHello(id, i, t->config().secret, &h, o.wire + sizeof(Hello));
      std::memcpy(o.wire, &h, sizeof(h));
      o.len = sizeof(Hello) + (t->config().secret.empty() ? 0 : auth::kTagBytes);
    }
  }
  ~TcpConnector() override {
    for (auto& s : streams_) sock::Close(&s.fd);
  }
  Status Poll(std::unique_ptr<Link>* out) override;

 private:
  // Advances one stream; sets *done when its hello is fully written.
  Status Step(OutStream& s, bool* done);

  const TcpTransport* t_;
  int dev_;
  sock::Addr remote_;
  LinkIdentity id_;
  std::vector<OutStream> streams_;
  uint64_t deadline_ns_;
};

Status TcpConnector::Step(OutStream& s, bool* done) {
  *done = false;
  if (s.fd < 0) {
    if (NowNs() < s.retry_at_ns) return Status::Ok();
    bool in_progress = false;
    RR_CHECK(sock::ConnectStart(remote_, &t_->Device(dev_).addr, &s.fd, &in_progress));
    s.connected = !in_progress;
  }
  if (!s.connected) {
    Status st = sock::ConnectPoll(s.fd, &s.connected);
    if (!st.ok()) {
      sock::Close(&s.fd);
      if (NowNs() > deadline_ns_) return Status::Remote("connect to " + remote_.ToString() + ": " + st.message());
      s.retry_at_ns = NowNs() + kRetryNs;  // refused or unreachable for now: try again
      return Status::Ok();
    }
    if (!s.connected) return Status::Ok();
    RR_CHECK(TuneStream(s.fd, t_->config()));
  }
  while (s.sent < s.len) {
    ssize_t r = send(s.fd, s.wire + s.sent, s.len - s.sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (r > 0) {
      s.sent += static_cast<size_t>(r);
      continue;
    }
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return Status::Ok();
    return Status::System("sending hello to " + remote_.ToString());
  }
  *done = true;
  return Status::Ok();
}

Status TcpConnector::Poll(std::unique_ptr<Link>* out) {
  int done_count = 0;
  for (auto& s : streams_) {
    bool done = false;
    RR_CHECK(Step(s, &done));
    done_count += done;
  }
  if (done_count < static_cast<int>(streams_.size())) {
    if (NowNs() > deadline_ns_) {
      return Status::Remote("connect to " + remote_.ToString() + " timed out after RERAIL_CONNECT_TIMEOUT_MS=" +
                            std::to_string(t_->config().connect_timeout_ms));
    }
    return Status::Ok();
  }
  std::vector<int> fds;
  for (auto& s : streams_) fds.push_back(s.fd), s.fd = -1;
  std::string desc = "rail " + t_->Device(dev_).name + " to " + remote_.ToString() + " (" +
                     std::to_string(id_.nstreams) + " streams)";
  *out = std::make_unique<TcpLink>(std::move(fds), id_, desc);
  return Status::Ok();
}

}  // namespace

Status TcpTransport::Connect(int dev, const sock::Addr& remote, const LinkIdentity& id,
                             std::unique_ptr<Connector>* out) {
  if (dev < 0 || dev >= NumDevices()) {
    return Status::Internal("connect on device " + std::to_string(dev) + " but there are " +
                            std::to_string(NumDevices()));
  }
  if (id.nstreams < 1 || id.nstreams > kMaxStreams) return Status::InvalidUsage("bad stream count");
  *out = std::make_unique<TcpConnector>(this, dev, remote, id);
  return Status::Ok();
}

}  // namespace rr::net::tcp
