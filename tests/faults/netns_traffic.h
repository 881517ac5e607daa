// rerail fault tests — small real-traffic probes between simulated hosts (see netns_fixture.h).
//
// Contract
//   * TcpTransfer() moves `bytes` of a position-dependent pattern from host `from` to host `to` over
//     rail r (a real TCP connection between the two namespaces) and verifies every byte on arrival.
//     Every step is bounded by timeout_ms (SO_SNDTIMEO/SO_RCVTIMEO and poll), so a dead or
//     black-holed rail returns an error instead of hanging. Returns "" on success, else what failed.
//   * `bind_dev` (optional) pins the client socket to that interface (SO_BINDTODEVICE), used to show
//     that a rail cannot reach another rail's subnet.
//   * IperfRate() measures TCP throughput with iperf3 (bits/s) from `from` to `to` over rail r; a
//     negative value when iperf3 failed (the message goes to *err). Bounded by `seconds` + 15 s.
//   * TcpStream: a long-lived verified stream for mid-stream faults (see the class).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstring>
#include <atomic>
#include <future>
#include <mutex>
#include <string>
#include <vector>

#include "netns_fixture.h"

namespace rr::testing {

inline uint8_t PatternByte(size_t i) { return static_cast<uint8_t>((i * 131u + (i >> 8)) & 0xff); }

namespace detail {
inline void SetTimeouts(int fd, int ms) {
  timeval tv{ms / 1000, (ms % 1000) * 1000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}
inline std::string Err(const char* what) { return std::string(what) + ": " + strerror(errno); }

// Server half: accepts one connection on `lfd`, reads `bytes` and checks the pattern.
inline std::string Receive(int lfd, size_t bytes, int timeout_ms) {
  pollfd p{lfd, POLLIN, 0};
  if (poll(&p, 1, timeout_ms) != 1) return "accept: timed out";
  int fd = accept(lfd, nullptr, nullptr);
  if (fd < 0) return Err("accept");
  SetTimeouts(fd, timeout_ms);
  std::vector<uint8_t> buf(65536);
  size_t got = 0;
  std::string err;
  while (got < bytes && err.empty()) {
    ssize_t n = recv(fd, buf.data(), buf.size(), 0);
    if (n <= 0) {
      err = n == 0 ? "recv: peer closed early" : Err("recv");
      break;
    }
    for (ssize_t i = 0; i < n; ++i)
      if (buf[i] != PatternByte(got + i)) err = "corrupt byte at offset " + std::to_string(got + i);
    got += static_cast<size_t>(n);
  }
  close(fd);
  return err;
}

inline std::string Send(const std::string& addr, int port, size_t bytes, int timeout_ms, const std::string& dev) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Err("socket");
  SetTimeouts(fd, timeout_ms);
  if (!dev.empty() && setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, dev.c_str(), dev.size()) != 0) {
    std::string e = Err("SO_BINDTODEVICE");
    close(fd);
    return e;
  }
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, addr.c_str(), &sa.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    std::string e = Err("connect");
    close(fd);
    return e;
  }
  std::vector<uint8_t> buf(65536);
  std::string err;
  for (size_t off = 0; off < bytes && err.empty();) {
    size_t n = std::min(buf.size(), bytes - off);
    for (size_t i = 0; i < n; ++i) buf[i] = PatternByte(off + i);
    ssize_t w = send(fd, buf.data(), n, MSG_NOSIGNAL);
    if (w <= 0) err = Err("send");
    else off += static_cast<size_t>(w);  // partial sends resend from the new offset
  }
  close(fd);
  return err;
}
}  // namespace detail

inline std::string TcpTransfer(NetnsTopology& t, int from, int to, int r, size_t bytes, int timeout_ms,
                               const std::string& bind_dev = "") {
  std::string to_addr = t.Addr(to, r);
  if (to_addr.empty()) return "no address for host " + std::to_string(to) + " rail " + std::to_string(r);
  std::promise<int> port_p;
  std::future<int> port_f = port_p.get_future();
  std::string server_err;
  std::thread server = t.SpawnInHost(to, [&] {
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    inet_pton(AF_INET, to_addr.c_str(), &sa.sin_addr);
    socklen_t len = sizeof sa;
    if (lfd < 0 || bind(lfd, reinterpret_cast<sockaddr*>(&sa), len) != 0 || listen(lfd, 4) != 0 ||
        getsockname(lfd, reinterpret_cast<sockaddr*>(&sa), &len) != 0) {
      server_err = detail::Err("listen");
      port_p.set_value(-1);
      if (lfd >= 0) close(lfd);
      return;
    }
    port_p.set_value(ntohs(sa.sin_port));
    server_err = detail::Receive(lfd, bytes, timeout_ms);
    close(lfd);
  });
  int port = port_f.get();
  std::string client_err;
  if (port > 0) client_err = t.InHost(from, [&] { return detail::Send(to_addr, port, bytes, timeout_ms, bind_dev); });
  server.join();
  if (!client_err.empty()) return "client: " + client_err;
  if (!server_err.empty()) return "server: " + server_err;
  return "";
}

inline double IperfRate(NetnsTopology& t, int from, int to, int r, int seconds, std::string* err) {
  static int next_port = 5201;  // a fresh port per run: a finishing one-off server may still hold the last
  std::string addr = t.Addr(to, r), port = std::to_string(next_port++);
  // One-off server, detached from our pipe, killed by timeout(1) if the client never comes.
  t.Exec(to, "timeout " + std::to_string(seconds + 15) + " iperf3 -s -1 -B " + addr + " -p " + port +
                 " >/dev/null 2>&1 &");
  CmdResult c;
  for (int attempt = 0; attempt < 50; ++attempt) {
    c = t.Exec(from, "timeout " + std::to_string(seconds + 10) + " iperf3 -J -c " + addr + " -p " + port + " -t " +
                         std::to_string(seconds));
    if (c.out.find("Connection refused") == std::string::npos) break;
    usleep(100 * 1000);  // the server is still starting
  }
  try {
    auto j = nlohmann::json::parse(c.out);
    if (j.contains("error")) {
      *err = "iperf3: " + j["error"].get<std::string>();
      return -1;
    }
    return j.at("end").at("sum_received").at("bits_per_second").get<double>();
  } catch (const std::exception& e) {
    *err = "iperf3 rc=" + std::to_string(c.rc) + ": " + e.what() + ": " + c.out.substr(0, 600);
    return -1;
  }
}

// A continuous, verified TCP stream from host `from` to host `to` over rail r, to watch what a fault
// does to a connection in flight (stall, resume, reset). Start() connects (bounded by timeout_ms);
// received() counts verified bytes (thread-safe); Stop() ends both threads within ~250 ms and returns
// the first error seen ("" when none). The destructor stops it.
class TcpStream {
 public:
  TcpStream(NetnsTopology& t, int from, int to, int r) : t_(t), from_(from), to_(to), r_(r) {}
  ~TcpStream() { (void)Stop(); }

  std::string Start(int timeout_ms) {
    std::string addr = t_.Addr(to_, r_);
    std::promise<int> port_p;
    std::future<int> port_f = port_p.get_future();
    receiver_ = t_.SpawnInHost(to_, [this, addr, timeout_ms, &port_p] {
      int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in sa{};
      sa.sin_family = AF_INET;
      inet_pton(AF_INET, addr.c_str(), &sa.sin_addr);
      socklen_t len = sizeof sa;
      if (lfd < 0 || bind(lfd, reinterpret_cast<sockaddr*>(&sa), len) != 0 || listen(lfd, 1) != 0 ||
          getsockname(lfd, reinterpret_cast<sockaddr*>(&sa), &len) != 0) {
        Fail(detail::Err("listen"));
        port_p.set_value(-1);
        if (lfd >= 0) close(lfd);
        return;
      }
      port_p.set_value(ntohs(sa.sin_port));
      pollfd p{lfd, POLLIN, 0};
      int fd = poll(&p, 1, timeout_ms) == 1 ? accept(lfd, nullptr, nullptr) : -1;
      close(lfd);
      if (fd < 0) return Fail("accept failed or timed out");
      ReceiveLoop(fd);
      close(fd);
    });
    int port = port_f.get();
    if (port <= 0) return Stop();
    sender_ = t_.SpawnInHost(from_, [this, addr, port, timeout_ms] {
      int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      detail::SetTimeouts(fd, timeout_ms);
      sockaddr_in sa{};
      sa.sin_family = AF_INET;
      sa.sin_port = htons(static_cast<uint16_t>(port));
      inet_pton(AF_INET, addr.c_str(), &sa.sin_addr);
      if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
        Fail(detail::Err("connect"));
      } else {
        connected_ = true;
        SendLoop(fd);
      }
      close(fd);
    });
    for (int i = 0; i < timeout_ms / 10 && !connected_ && error().empty(); ++i) usleep(10000);
    return connected_ ? "" : (error().empty() ? "connect timed out" : error());
  }

  uint64_t received() const { return received_.load(); }
  uint64_t sent() const { return sent_.load(); }
  std::string error() const {
    std::lock_guard<std::mutex> l(mu_);
    return err_;
  }
  std::string Stop() {
    stop_ = true;
    if (sender_.joinable()) sender_.join();
    if (receiver_.joinable()) receiver_.join();
    return error();
  }

 private:
  void Fail(const std::string& e) {
    if (stop_) return;  // tearing down: one side's close resets the other; not a fault result
    std::lock_guard<std::mutex> l(mu_);
    if (err_.empty()) err_ = e;
  }
  void SendLoop(int fd) {
    detail::SetTimeouts(fd, 200);  // wake up to notice Stop() while the rail is dead
    std::vector<uint8_t> buf(65536);
    uint64_t off = 0;
    while (!stop_) {
      for (size_t i = 0; i < buf.size(); ++i) buf[i] = PatternByte(off + i);
      ssize_t w = send(fd, buf.data(), buf.size(), MSG_NOSIGNAL);
      if (w < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      if (w <= 0) return Fail(detail::Err("send"));
      off += static_cast<uint64_t>(w);
      sent_ = off;
    }
  }
  void ReceiveLoop(int fd) {
    detail::SetTimeouts(fd, 200);
    std::vector<uint8_t> buf(65536);
    uint64_t got = 0;
    while (!stop_) {
      ssize_t n = recv(fd, buf.data(), buf.size(), 0);
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      if (n <= 0) return Fail(n == 0 ? "receiver: peer closed" : detail::Err("recv"));
      for (ssize_t i = 0; i < n; ++i)
        if (buf[i] != PatternByte(got + i)) return Fail("corrupt byte at offset " + std::to_string(got + i));
      got += static_cast<uint64_t>(n);
      received_ = got;
    }
  }

  NetnsTopology& t_;
  const int from_, to_, r_;
  std::thread sender_, receiver_;
  std::atomic<bool> stop_{false}, connected_{false};
  std::atomic<uint64_t> received_{0}, sent_{0};
  mutable std::mutex mu_;
  std::string err_;
};

}  // namespace rr::testing
