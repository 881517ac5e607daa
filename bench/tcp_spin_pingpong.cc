// The raw-TCP latency reference of scripts/bench-loopback.sh: two processes on 127.0.0.1 bounce a
// SIZE-byte message over one TCP connection whose ends spin on non-blocking sockets (TCP_NODELAY,
// no poll/epoll), the fastest a byte stream goes between two processes, and the same waiting style
// as a net plugin driven by NCCL's busy-polling proxy thread.
//
//   tcp-spin-pingpong [--size BYTES] [--iters N] [--warmup N] [--two-connections 0|1] [--yield 0|1] [--acks 0|1]
//                     [--quickack 0|1] [--reverse-acks 0|1]
// --two-connections 1: the replies travel on a second connection, as a net plugin's must (NCCL hands it
// one send comm per direction, each its own connection): each direction carries data one way only, so
// no TCP ACK rides on a reply and the receiving kernel sends pure ACKs. The floor of that topology, with
// --size 48 (an 8-byte message and rerail's 40-byte frame header). --yield 1: sched_yield() after each
// empty read, as NCCL's proxy does in an idle pass (and rerail-perf netbench's driver).
// --acks 1 (one connection): each end also writes a 40-byte frame acknowledging what it received, in
// a write of its own after its next message (a receiver's held-back ack, flushed in its next idle
// pass), on the same connection: what both directions of a plugin's traffic cost on one connection
// when acks are not coalesced into the replies (docs/hot-path-latency.md).
// --reverse-acks 1 (two connections): each end, after writing its message, writes a 40-byte ack of the
// message it last received on that message's connection (the reverse direction: a receiver's ack), and
// then makes one non-blocking read of the acks waiting on its own outgoing connection (a send comm
// reading control frames without waiting for them). With --quickack 0 the kernel's ACK of a message
// can ride on that ack instead of going out as a pure ACK while the reader reads the message.
// --quickack V: setsockopt(TCP_QUICKACK, V) on the reading socket after every message read (0: the
// kernel's delayed-ACK "pingpong" mode, which its delayed-ACK timer ends, so it is set again each time;
// the cost of the setsockopt is in the figure).
// Prints one line: "lat_us=<mean one-way> lat_p50_us=<median one-way> iters=N size=BYTES" (one-way =
// round trip / 2, as rerail-perf netbench reports it). Exit 0 on success, 1 on a socket error.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <string>
#include <vector>

#include "rerail/clock.h"

namespace {

bool SetUp(int fd) {
  int one = 1;
  return setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) == 0 &&
         fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) == 0;
}

// Spins until all `len` bytes moved; false on a socket error or EOF.
bool SpinSend(int fd, const char* p, size_t len) {
  while (len > 0) {
    ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
    if (n > 0) p += n, len -= static_cast<size_t>(n);
    else if (n < 0 && errno != EAGAIN && errno != EINTR) return false;
  }
  return true;
}
bool g_yield = false;
int g_quickack = -1;  // >= 0: TCP_QUICKACK set to this after each message read
bool SpinRecv(int fd, char* p, size_t len) {
  while (len > 0) {
    ssize_t n = recv(fd, p, len, 0);
    if (n > 0) p += n, len -= static_cast<size_t>(n);
    else if (n == 0 || (errno != EAGAIN && errno != EINTR)) return false;
    else if (g_yield) sched_yield();
  }
  if (g_quickack >= 0) setsockopt(fd, IPPROTO_TCP, TCP_QUICKACK, &g_quickack, sizeof g_quickack);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  size_t size = 8;
  int iters = 20000, warmup = 1000;
  bool two = false, acks = false, reverse = false;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--size") size = strtoull(argv[i + 1], nullptr, 0);
    else if (a == "--iters") iters = atoi(argv[i + 1]);
    else if (a == "--warmup") warmup = atoi(argv[i + 1]);
    else if (a == "--two-connections") two = atoi(argv[i + 1]) != 0;
    else if (a == "--yield") g_yield = atoi(argv[i + 1]) != 0;
    else if (a == "--acks") acks = atoi(argv[i + 1]) != 0;
    else if (a == "--quickack") g_quickack = atoi(argv[i + 1]);
    else if (a == "--reverse-acks") reverse = atoi(argv[i + 1]) != 0;
    else return fprintf(stderr, "usage: %s [--size BYTES] [--iters N] [--warmup N] [--two-connections 0|1] [--yield 0|1] [--acks 0|1] [--quickack 0|1]\n", argv[0]), 2;
  }
  if (size == 0 || iters <= 0 || warmup < 0) return fprintf(stderr, "size and iters must be > 0\n"), 2;
  if (acks && two) return fprintf(stderr, "--acks needs one connection\n"), 2;
  if (reverse && !two) return fprintf(stderr, "--reverse-acks needs two connections\n"), 2;
  char sink[4096];
  // --reverse-acks: one non-blocking read of whatever acks wait on `fd` (none is waited for).
  auto drain = [&](int fd) { (void)!recv(fd, sink, sizeof sink, 0); };
  char ack[40] = {};
  int ls = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t al = sizeof(a);
  if (ls < 0 || bind(ls, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || listen(ls, 2) != 0 ||
      getsockname(ls, reinterpret_cast<sockaddr*>(&a), &al) != 0) {
    return perror("listen"), 1;
  }
  std::vector<char> buf(size, 'x');
  int total = warmup + iters;
  pid_t child = fork();
  if (child == 0) {  // the echo end: reads on the first connection, answers on the last
    int in = accept(ls, nullptr, nullptr);
    int out = two ? accept(ls, nullptr, nullptr) : in;
    if (in < 0 || out < 0 || !SetUp(in) || !SetUp(out)) _exit(1);
    for (int i = 0; i < total; ++i) {
      // Stream from the pinging end: ping 0, ping 1, ack 0, ping 2, ack 1, ... (an ack follows the next ping).
      if (acks && i >= 2 && !SpinRecv(in, ack, sizeof ack)) _exit(1);
      if (!SpinRecv(in, buf.data(), size) || !SpinSend(out, buf.data(), size)) _exit(1);
      if (acks && !SpinSend(out, ack, sizeof ack)) _exit(1);  // this end's ack of ping i, after pong i
      if (reverse) {  // the ack of ping i on ping's own connection, after pong i; the acks of pongs read lazily
        if (!SpinSend(in, ack, sizeof ack)) _exit(1);
        drain(out);
      }
    }
    _exit(0);
  }
  close(ls);
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || !SetUp(fd)) return perror("connect"), 1;
  int back = fd;
  if (two) {
    back = socket(AF_INET, SOCK_STREAM, 0);
    if (back < 0 || connect(back, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || !SetUp(back)) return perror("connect"), 1;
  }
  std::vector<double> rtt;
  rtt.reserve(iters);
  for (int i = 0; i < total; ++i) {
    uint64_t t0 = rr::NowNs();
    if (!SpinSend(fd, buf.data(), size)) return perror("ping-pong"), 1;
    if (acks && i >= 1 && !SpinSend(fd, ack, sizeof ack)) return perror("ping-pong"), 1;  // ack of pong i-1
    if (acks && i >= 1 && !SpinRecv(back, ack, sizeof ack)) return perror("ping-pong"), 1;  // the echo end's ack of ping i-1
    if (reverse && i >= 1) {  // the ack of pong i-1 on pong's connection, after ping i; acks of pings read lazily
      if (!SpinSend(back, ack, sizeof ack)) return perror("ping-pong"), 1;
      drain(fd);
    }
    if (!SpinRecv(back, buf.data(), size)) return perror("ping-pong"), 1;
    if (i >= warmup) rtt.push_back(static_cast<double>(rr::NowNs() - t0) / 1000.0);
  }
  int st = 0;
  waitpid(child, &st, 0);
  double sum = 0;
  for (double v : rtt) sum += v;
  std::nth_element(rtt.begin(), rtt.begin() + rtt.size() / 2, rtt.end());
  printf("lat_us=%.3f lat_p50_us=%.3f iters=%d size=%zu\n", sum / rtt.size() / 2, rtt[rtt.size() / 2] / 2, iters, size);
  return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}
