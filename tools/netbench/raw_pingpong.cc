// The raw TCP ping-pong reference (raw_pingpong.h).
#include "raw_pingpong.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>
#include <vector>

#include "rerail/clock.h"

namespace rr::netbench {
namespace {

// Owns a descriptor (closed on scope exit).
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) close(fd);
  }
};

bool Tune(int fd) {
  int one = 1;
  if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) < 0) return false;
  int fl = fcntl(fd, F_GETFL);
  return fl >= 0 && fcntl(fd, F_SETFL, fl | O_NONBLOCK) == 0;
}

// Moves exactly n bytes, spinning on EAGAIN: 0, or the errno that ended it (ETIMEDOUT past `dl`,
// EPIPE when the peer closed).
int Spin(int fd, char* buf, size_t n, bool out, const Deadline& dl) {
  size_t done = 0;
  for (uint64_t spins = 0; done < n; ++spins) {
    ssize_t r = out ? send(fd, buf + done, n - done, MSG_NOSIGNAL) : recv(fd, buf + done, n - done, 0);
    if (r > 0) {
      done += static_cast<size_t>(r);
      continue;
    }
    if (r == 0) return EPIPE;
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return errno;
    if ((spins & 0xfffff) == 0xfffff && dl.Expired()) return ETIMEDOUT;
  }
  return 0;
}

// The child: connect, then echo every message. Only system calls: it runs after fork().
[[noreturn]] void Echo(uint16_t port, size_t size, uint64_t rounds, uint64_t timeout_ms) {
  Deadline dl = Deadline::AfterMs(timeout_ms);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) < 0 || !Tune(fd)) _exit(2);
  std::vector<char> buf(size);
  for (uint64_t m = 0; m < rounds; ++m)
    if (Spin(fd, buf.data(), size, false, dl) != 0 || Spin(fd, buf.data(), size, true, dl) != 0) _exit(3);
  _exit(0);
}

}  // namespace

Status RawTcpPingPong(size_t size, uint64_t warmup, uint64_t iters, uint64_t timeout_ms, RttStats* rtt) {
  if (size == 0) return Status::InvalidArg("raw ping-pong needs at least 1 byte per message");
  Fd lis;
  lis.fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  RR_SYSCHECK(lis.fd, "raw ping-pong: socket");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t alen = sizeof a;
  RR_SYSCHECK(bind(lis.fd, reinterpret_cast<sockaddr*>(&a), sizeof a), "raw ping-pong: bind 127.0.0.1");
  RR_SYSCHECK(listen(lis.fd, 1), "raw ping-pong: listen");
  RR_SYSCHECK(getsockname(lis.fd, reinterpret_cast<sockaddr*>(&a), &alen), "raw ping-pong: getsockname");
  pid_t child = fork();
  RR_SYSCHECK(child, "raw ping-pong: fork");
  if (child == 0) Echo(ntohs(a.sin_port), size, warmup + iters, timeout_ms);

  Deadline dl = Deadline::AfterMs(timeout_ms);
  Status st;
  Fd conn;
  pollfd p{lis.fd, POLLIN, 0};
  int pr = poll(&p, 1, static_cast<int>(std::min<uint64_t>(timeout_ms, 30000)));
  if (pr <= 0) st = Status::Internal("raw ping-pong: the child never connected");
  if (st.ok()) {
    conn.fd = accept4(lis.fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (conn.fd < 0 || !Tune(conn.fd)) st = Status::System("raw ping-pong: accept");
  }
  std::vector<char> buf(size, 0x5a);
  std::vector<uint64_t> rtts;
  rtts.reserve(iters);
  uint64_t t0 = 0, tm = 0;
  for (uint64_t m = 0; st.ok() && m < warmup + iters; ++m) {
    uint64_t now = NowNs();
    if (m == warmup) t0 = now;
    if (m > warmup) rtts.push_back(now - tm);
    tm = now;
    int e = Spin(conn.fd, buf.data(), size, true, dl);
    if (e == 0) e = Spin(conn.fd, buf.data(), size, false, dl);
    if (e != 0) st = Status::System("raw ping-pong: round trip " + std::to_string(m), e);
  }
  uint64_t end = NowNs();
  if (conn.fd >= 0) shutdown(conn.fd, SHUT_RDWR);
  if (!st.ok()) kill(child, SIGKILL);
  int ws = 0;
  while (waitpid(child, &ws, 0) < 0 && errno == EINTR) {
  }
  if (st.ok() && !(WIFEXITED(ws) && WEXITSTATUS(ws) == 0))
    st = Status::Internal("raw ping-pong: the echoing child failed (status " + std::to_string(ws) + ")");
  RR_CHECK(st);
  rtts.push_back(end - tm);
  *rtt = SummariseRtts(t0, end, iters, &rtts);
  return Status::Ok();
}

}  // namespace rr::netbench
