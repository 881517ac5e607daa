// Non-blocking socket helpers of the rootless exchange.
#include "exchange_wire.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

namespace rr::boot::wire {

void SetNoDelay(int fd) {
  int one = 1;
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

Status Listen(const SockAddr& addr, int* fd) {
  int s = socket(addr.u.sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  RR_SYSCHECK(s, "socket");
  int one = 1;
  // A restarted rank must re-bind its planned port while old connections sit in TIME_WAIT.
  (void)setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(s, &addr.u.sa, addr.len) != 0) {
    int err = errno;
    close(s);
    std::string why = err == EADDRINUSE ? " (another process, or a stale socket of an older group, holds it)"
                      : err == EADDRNOTAVAIL ? " (the address is not on this host: wrong host list or rank?)"
                                             : "";
    return Status::System("bind(" + addr.ToString() + ")" + why, err);
  }
  if (listen(s, 1024) != 0) {
    int err = errno;
    close(s);
    return Status::System("listen(" + addr.ToString() + ")", err);
  }
  *fd = s;
  return Status::Ok();
}

Status ConnectStart(const SockAddr& addr, int* fd) {
  int s = socket(addr.u.sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  RR_SYSCHECK(s, "socket");
  SetNoDelay(s);
  if (connect(s, &addr.u.sa, addr.len) != 0 && errno != EINPROGRESS) {
    int err = errno;
    close(s);
    return Status::System("connect(" + addr.ToString() + ")", err);
  }
  *fd = s;
  return Status::Ok();
}

Status ConnectFinish(int fd, const SockAddr& addr) {
  int err = 0;
  socklen_t len = sizeof(err);
  if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
  if (err != 0) return Status::System("connect(" + addr.ToString() + ")", err);
  return Status::Ok();
}

Status ReadSome(int fd, char* buf, size_t want, size_t* have, bool* eof) {
  *eof = false;
  while (*have < want) {
    ssize_t n = recv(fd, buf + *have, want - *have, 0);
    if (n > 0) {
      *have += static_cast<size_t>(n);
      continue;
    }
    if (n == 0) {
      *eof = true;
      return Status::Ok();
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK) return Status::Ok();
    if (errno == EINTR) continue;
    return Status::System("recv from " + PeerName(fd));
  }
  return Status::Ok();
}

Status WriteSome(int fd, const std::string& out, size_t* off) {
  while (*off < out.size()) {
    ssize_t n = send(fd, out.data() + *off, out.size() - *off, MSG_NOSIGNAL);
    if (n > 0) {
      *off += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return Status::Ok();
    if (n < 0 && errno == EINTR) continue;
    return Status::System("send to " + PeerName(fd));
  }
  return Status::Ok();
}

std::string PeerName(int fd) {
  SockAddr a;
  a.len = sizeof(a.u);
  if (getpeername(fd, &a.u.sa, &a.len) != 0) return "<unknown peer>";
  return a.ToString();
}

}  // namespace rr::boot::wire
