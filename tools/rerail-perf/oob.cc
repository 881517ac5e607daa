#include "oob.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

#include "rerail/clock.h"

namespace rr::perf {

Status Oob::Barrier() {
  std::vector<std::string> all;
  return AllGather(std::string(1, 'b'), &all);
}

Status Oob::AllGatherDouble(double mine, std::vector<double>* all) {
  std::vector<std::string> blobs;
  RR_CHECK(AllGather(std::string(reinterpret_cast<const char*>(&mine), sizeof(mine)), &blobs));
  all->clear();
  for (const std::string& b : blobs) {
    double v = 0;
    if (b.size() != sizeof(v)) return Status::Internal("oob: malformed double");
    std::memcpy(&v, b.data(), sizeof(v));
    all->push_back(v);
  }
  return Status::Ok();
}

Status Oob::SumU64(uint64_t mine, uint64_t* sum) {
  std::vector<std::string> blobs;
  RR_CHECK(AllGather(std::string(reinterpret_cast<const char*>(&mine), sizeof(mine)), &blobs));
  *sum = 0;
  for (const std::string& b : blobs) {
    uint64_t v = 0;
    if (b.size() != sizeof(v)) return Status::Internal("oob: malformed u64");
    std::memcpy(&v, b.data(), sizeof(v));
    *sum += v;
  }
  return Status::Ok();
}

namespace {

// Address parsing: a path (contains '/') or host:port.
struct Addr {
  sockaddr_storage ss{};
  socklen_t len = 0;
  bool is_unix = false;
};

Status Resolve(const std::string& address, Addr* a) {
  if (address.find('/') != std::string::npos) {
    sockaddr_un un{};
    un.sun_family = AF_UNIX;
    if (address.size() >= sizeof(un.sun_path)) return Status::InvalidUsage("rendezvous path too long: " + address);
    std::memcpy(un.sun_path, address.c_str(), address.size() + 1);
    std::memcpy(&a->ss, &un, sizeof(un));
    a->len = sizeof(un);
    a->is_unix = true;
    return Status::Ok();
  }
  size_t colon = address.rfind(':');
  if (colon == std::string::npos)
    return Status::InvalidUsage("rendezvous '" + address + "' is neither a socket path nor host:port");
  addrinfo hints{}, *res = nullptr;
  hints.ai_socktype = SOCK_STREAM;
  std::string host = address.substr(0, colon);
  if (!host.empty() && host.front() == '[') host = host.substr(1, host.size() - 2);
  int rc = getaddrinfo(host.c_str(), address.substr(colon + 1).c_str(), &hints, &res);
  if (rc != 0) return Status::InvalidUsage("rendezvous '" + address + "': " + gai_strerror(rc));
  std::memcpy(&a->ss, res->ai_addr, res->ai_addrlen);
  a->len = res->ai_addrlen;
  freeaddrinfo(res);
  return Status::Ok();
}

Status WriteAll(int fd, const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return Status::System("oob send");
    c += w, n -= static_cast<size_t>(w);
  }
  return Status::Ok();
}

Status ReadAll(int fd, void* p, size_t n, const Deadline& dl) {
  char* c = static_cast<char*>(p);
  while (n > 0) {
    pollfd pfd{fd, POLLIN, 0};
    int pr = poll(&pfd, 1, 100);
    if (pr == 0) {
      if (dl.Expired()) return Status::Remote("oob: timed out waiting for a peer rank");
      continue;
    }
    ssize_t r = recv(fd, c, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) return Status::Remote("oob: a peer rank exited (connection closed)");
    if (r < 0) return Status::System("oob recv");
    c += r, n -= static_cast<size_t>(r);
  }
  return Status::Ok();
}

Status SendBlob(int fd, const std::string& s) {
  uint64_t n = s.size();
  RR_CHECK(WriteAll(fd, &n, sizeof(n)));
  return WriteAll(fd, s.data(), s.size());
}

Status RecvBlob(int fd, std::string* s, const Deadline& dl) {
  uint64_t n = 0;
  RR_CHECK(ReadAll(fd, &n, sizeof(n), dl));
  if (n > (1ull << 32)) return Status::Remote("oob: implausible blob size");
  s->resize(n);
  return ReadAll(fd, s->data(), n, dl);
}

class SocketOob : public Oob {
 public:
  SocketOob(int rank, int size, int timeout_ms) : rank_(rank), size_(size), timeout_ms_(timeout_ms) {}
  ~SocketOob() override {
    for (int fd : peers_) if (fd >= 0) close(fd);
    if (up_ >= 0) close(up_);
    if (!unlink_path_.empty()) unlink(unlink_path_.c_str());
  }
  int Rank() const override { return rank_; }
  int Size() const override { return size_; }

  Status Start(const std::string& address) {
    Addr a;
    RR_CHECK(Resolve(address, &a));
    Deadline dl = Deadline::AfterMs(static_cast<uint64_t>(timeout_ms_));
    return rank_ == 0 ? Serve(a, address, dl) : Join(a, dl);
  }

  Status AllGather(const std::string& mine, std::vector<std::string>* all) override {
    Deadline dl = Deadline::AfterMs(static_cast<uint64_t>(timeout_ms_));
    all->assign(size_, std::string());
    if (rank_ != 0) {
      RR_CHECK(SendBlob(up_, mine));
      for (int r = 0; r < size_; ++r) RR_CHECK(RecvBlob(up_, &(*all)[r], dl));
      return Status::Ok();
    }
    (*all)[0] = mine;
    for (int r = 1; r < size_; ++r) RR_CHECK(RecvBlob(peers_[r], &(*all)[r], dl));
    for (int r = 1; r < size_; ++r)
      for (int q = 0; q < size_; ++q) RR_CHECK(SendBlob(peers_[r], (*all)[q]));
    return Status::Ok();
  }

 private:
  Status Serve(const Addr& a, const std::string& address, const Deadline& dl) {
    int fd = socket(a.ss.ss_family, SOCK_STREAM, 0);
    RR_SYSCHECK(fd, "oob socket");
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (a.is_unix) unlink(address.c_str()), unlink_path_ = address;
    if (bind(fd, reinterpret_cast<const sockaddr*>(&a.ss), a.len) != 0 || listen(fd, 1024) != 0) {
      Status s = Status::System("oob bind/listen on " + address);
      close(fd);
      return s;
    }
    peers_.assign(size_, -1);
    for (int joined = 1; joined < size_;) {
      pollfd pfd{fd, POLLIN, 0};
      if (poll(&pfd, 1, 100) == 0) {
        if (dl.Expired()) {
          close(fd);
          return Status::Remote("oob: only " + std::to_string(joined) + " of " + std::to_string(size_) + " ranks joined " + address);
        }
        continue;
      }
      int c = accept(fd, nullptr, nullptr);
      if (c < 0) continue;
      int32_t r = -1;
      if (!ReadAll(c, &r, sizeof(r), dl).ok() || r <= 0 || r >= size_ || peers_[r] >= 0) {
        close(c);
        continue;
      }
      setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      peers_[r] = c;
      ++joined;
    }
    close(fd);
    return Status::Ok();
  }

  Status Join(const Addr& a, const Deadline& dl) {
    while (true) {
      int fd = socket(a.ss.ss_family, SOCK_STREAM, 0);
      RR_SYSCHECK(fd, "oob socket");
      if (connect(fd, reinterpret_cast<const sockaddr*>(&a.ss), a.len) == 0) {
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        up_ = fd;
        int32_t r = rank_;
        return WriteAll(up_, &r, sizeof(r));
      }
      close(fd);
      if (dl.Expired()) return Status::Remote("oob: rank " + std::to_string(rank_) + " could not reach rank 0's rendezvous");
      usleep(20000);
    }
  }

  int rank_, size_, timeout_ms_;
  int up_ = -1;
  std::vector<int> peers_;
  std::string unlink_path_;
};

}  // namespace

Status MakeSocketOob(const std::string& address, int rank, int size, int timeout_ms, std::unique_ptr<Oob>* out) {
  auto oob = std::make_unique<SocketOob>(rank, size, timeout_ms);
  if (size > 1) RR_CHECK(oob->Start(address));
  *out = std::move(oob);
  return Status::Ok();
}

}  // namespace rr::perf
