#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <iterator>
#include <map>

#include "../../wire.h"
#include "rerail/auth.h"
#include "rerail/clock.h"
#include "rerail/log.h"
#include "tcp.h"

namespace rr::net::tcp {
namespace {

// An accepted socket whose hello is still arriving.
struct PendingStream {
  int fd = -1;
  sock::Addr peer;
  Hello hello{};
  uint8_t tag[auth::kTagBytes] = {};
  size_t got = 0;   // bytes of hello, then of tag, received
  bool want_tag = false;  // the hello passed and announced a tag: reading it now
  uint64_t deadline_ns = 0;
};

// Streams of one incoming link collected so far, by stream index. A connect attempt whose other
// streams never come (a rail black-holed between two stream connects, a lost SYN) is closed by its
// sender's connector, which retries later with the same conn, link and (after a connect failure)
// epoch: so a partial link is dropped when a stream of it closed, when a hello repeats one of its
// stream indices or names another epoch (a new attempt), and after RERAIL_CONNECT_TIMEOUT_MS.
struct PartialLink {
  LinkIdentity id;
  std::vector<int> fds;
  int have = 0;
  sock::Addr peer;
  uint64_t deadline_ns = 0;
};

class TcpListener final : public Listener {
 public:
  TcpListener(const TcpTransport* t, Nonce nonce) : t_(t), nonce_(nonce) {}
  ~TcpListener() override;
  Status AddSocket(int dev, Handle* h);
  Status Poll(std::unique_ptr<Link>* out) override;

 private:
  void AcceptNew();
  // Reads hello bytes; returns true when `p` is finished (moved into a link group or rejected).
  bool ReadHello(PendingStream& p);
  void Reject(PendingStream& p, const std::string& why);
  void Adopt(PendingStream& p);
  // Why the partial link `pl` cannot take the stream of hello `h` as one more of the same attempt
  // (empty: it can).
  static std::string Stale(const PartialLink& pl, const Hello& h);
  void DropPartial(std::map<std::pair<uint64_t, int>, PartialLink>::iterator it, const std::string& why);

  const TcpTransport* t_;
  Nonce nonce_;
  std::vector<int> listen_fds_;
  std::vector<int> listen_rails_;
  std::vector<PendingStream> pending_;
  std::map<std::pair<uint64_t, int>, PartialLink> partial_;  // (conn_id, link index)
  std::vector<std::unique_ptr<Link>> ready_;
  uint64_t last_poll_ns_ = 0;
};

// A listener that was not polled for this long (its comm was idle: NCCL polls a comm only while it
// has requests) extends its pending hello deadlines by the gap: the connecting side, idle too, has
// not written its hello yet either.
constexpr uint64_t kPollGapNs = 500'000'000;

TcpListener::~TcpListener() {
  for (int& fd : listen_fds_) sock::Close(&fd);
  for (auto& p : pending_) sock::Close(&p.fd);
  for (auto& kv : partial_)
    for (int& fd : kv.second.fds) sock::Close(&fd);
}

Status TcpListener::AddSocket(int dev, Handle* h) {
  const DeviceInfo& d = t_->Device(dev);
  int fd = -1;
  sock::Addr bound;
  RR_CHECK(sock::Listen(d.addr, 128, &fd, &bound));
  listen_fds_.push_back(fd);
  listen_rails_.push_back(dev);
  h->addrs.push_back(HandleAddr{dev, bound});
  return Status::Ok();
}

void TcpListener::AcceptNew() {
  for (int lfd : listen_fds_) {
    for (;;) {
      sock::Addr peer;
      peer.len = sizeof(peer.ss);
      int fd = accept4(lfd, peer.sa(), &peer.len, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED) {
          RR_WARN("accept() on listen socket failed: %s", strerror(errno));
        }
        break;
      }
      PendingStream p;
      p.fd = fd;
      p.peer = peer;
      p.deadline_ns = NowNs() + static_cast<uint64_t>(t_->config().connect_timeout_ms) * 1000000ull;
      pending_.push_back(p);
    }
  }
}

void TcpListener::Reject(PendingStream& p, const std::string& why) {
  RR_WARN("rejected incoming connection from %s: %s", p.peer.ToString().c_str(), why.c_str());
  sock::Close(&p.fd);
}

bool TcpListener::ReadHello(PendingStream& p) {
  for (;;) {
    const size_t need = p.want_tag ? sizeof(Hello) + auth::kTagBytes : sizeof(Hello);
    while (p.got < need) {
      char* dst = p.got < sizeof(Hello) ? reinterpret_cast<char*>(&p.hello) + p.got
                                        : reinterpret_cast<char*>(p.tag) + (p.got - sizeof(Hello));
      ssize_t r = recv(p.fd, dst, need - p.got, MSG_DONTWAIT);
      if (r > 0) {
        p.got += static_cast<size_t>(r);
        continue;
      }
      if (r == 0) return Reject(p, "closed before completing its hello"), true;
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        if (NowNs() > p.deadline_ns) return Reject(p, "no hello within RERAIL_CONNECT_TIMEOUT_MS"), true;
        return false;
      }
      return Reject(p, std::string("recv: ") + strerror(errno)), true;
    }
    std::string why;
    if (p.want_tag) {
      if (!CheckHelloTag(p.hello, t_->config().secret, p.tag, &why)) return Reject(p, why), true;
      break;
    }
    bool tag_follows = false;
    if (!CheckHello(p.hello, nonce_, t_->config().secret, &tag_follows, &why)) return Reject(p, why), true;
    if (!tag_follows) break;
    p.want_tag = true;  // read exactly the tag: data frames may follow it at once
  }
  Adopt(p);
  return true;
}

std::string TcpListener::Stale(const PartialLink& pl, const Hello& h) {
  if (h.epoch != pl.id.epoch) return "a stream of epoch " + std::to_string(h.epoch) + " arrived";
  if (h.stream < pl.fds.size() && pl.fds[h.stream] >= 0) return "stream " + std::to_string(h.stream) + " arrived again";
  for (int fd : pl.fds) {
    if (fd < 0) continue;
    char c;
    ssize_t r = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);  // a sender writes frames once all its streams connected
    if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) return "its sender closed a stream";
  }
  return "";
}

void TcpListener::DropPartial(std::map<std::pair<uint64_t, int>, PartialLink>::iterator it, const std::string& why) {
  RR_INFO(log::kFlagNet, "conn %016lx: dropped %d of %d streams of link %d (epoch %u) from %s: %s",
          static_cast<unsigned long>(it->second.id.conn_id), it->second.have, it->second.id.nstreams, it->second.id.link,
          it->second.id.epoch, it->second.peer.ToString().c_str(), why.c_str());
  for (int& fd : it->second.fds) sock::Close(&fd);
  partial_.erase(it);
}

void TcpListener::Adopt(PendingStream& p) {
  const Hello& h = p.hello;
  auto key = std::make_pair(h.conn_id, static_cast<int>(h.link));
  auto old = partial_.find(key);
  if (old != partial_.end()) {
    std::string why = Stale(old->second, h);
    if (!why.empty()) DropPartial(old, "a new connect attempt (" + why + ")");
  }
  PartialLink& pl = partial_[key];
  if (pl.fds.empty()) {
    pl.deadline_ns = NowNs() + static_cast<uint64_t>(t_->config().connect_timeout_ms) * 1000000ull;
    pl.fds.assign(h.nstreams, -1);
    pl.id.nonce = nonce_;
    pl.id.conn_id = h.conn_id;
    pl.id.chunk_size = h.chunk_size;
    pl.id.rail = h.rail;
    pl.id.link = h.link;
    pl.id.nstreams = h.nstreams;
    pl.id.epoch = h.epoch;
    pl.id.grouped = (h.flags & kHelloFlagGrouped) != 0;
    pl.peer = p.peer;
  }
  if (static_cast<int>(h.nstreams) != pl.id.nstreams || pl.fds[h.stream] >= 0 || h.chunk_size != pl.id.chunk_size) {
    return Reject(p, "hello inconsistent with the other streams of its connection");
  }
  pl.fds[h.stream] = p.fd;
  p.fd = -1;
  if (++pl.have < pl.id.nstreams) return;
  std::string desc = "rail " + t_->Device(pl.id.rail < t_->NumDevices() ? pl.id.rail : 0).name + " from " +
                     pl.peer.ToString() + " (" + std::to_string(pl.id.nstreams) + " streams)";
  for (int fd : pl.fds) {
    Status st = TuneStream(fd, t_->config());
    if (!st.ok()) RR_WARN("tuning accepted stream: %s", st.ToString().c_str());
  }
  ready_.push_back(std::make_unique<TcpLink>(std::move(pl.fds), pl.id, desc));
  partial_.erase(key);
}

Status TcpListener::Poll(std::unique_ptr<Link>* out) {
  uint64_t now = NowNs();
  if (last_poll_ns_ != 0 && now - last_poll_ns_ > kPollGapNs) {
    for (auto& p : pending_) p.deadline_ns += now - last_poll_ns_;
    for (auto& kv : partial_) kv.second.deadline_ns += now - last_poll_ns_;
  }
  last_poll_ns_ = now;
  AcceptNew();
  for (size_t i = 0; i < pending_.size();) {
    if (ReadHello(pending_[i])) {
      pending_[i] = pending_.back();
      pending_.pop_back();
    } else {
      ++i;
    }
  }
  for (auto it = partial_.begin(); it != partial_.end();) {
    auto next = std::next(it);
    if (now > it->second.deadline_ns) DropPartial(it, "the rest did not come within RERAIL_CONNECT_TIMEOUT_MS");
    it = next;
  }
  if (!ready_.empty()) {
    *out = std::move(ready_.front());
    ready_.erase(ready_.begin());
  }
  return Status::Ok();
}

}  // namespace

Status TcpTransport::Listen(int dev, const Nonce& nonce, Handle* h, std::unique_ptr<Listener>* out) {
  if (dev < 0 || dev >= NumDevices()) {
    return Status::Internal("listen on device " + std::to_string(dev) + " but there are " +
                            std::to_string(NumDevices()));
  }
  auto l = std::make_unique<TcpListener>(this, nonce);
  h->nonce = nonce;
  h->addrs.clear();
  RR_CHECK(l->AddSocket(dev, h));
  // The other rails too, so the sender can reach this connection when the primary rail is down at
  // connect time and can re-connect failed rails later (the RecvComm keeps this listener).
  for (int d = 0; d < NumDevices() && static_cast<int>(h->addrs.size()) < kMaxAddrs; ++d) {
    if (d == dev || Device(d).addr.family() != Device(dev).addr.family()) continue;
    Status st = l->AddSocket(d, h);
    if (!st.ok()) RR_INFO(log::kFlagNet, "not listening on standby rail %s: %s", Device(d).name.c_str(), st.ToString().c_str());
  }
  *out = std::move(l);
  return Status::Ok();
}

}  // namespace rr::net::tcp
