// A raw-TCP throughput reference with a chosen memory footprint (scripts/bench-loopback.sh): two
// processes on 127.0.0.1, one connection, TCP_NODELAY. The sender writes --count
// messages of --size bytes, each from the next of --buffers buffers (cycling); the receiver reads each
// message whole into the next of its own --buffers buffers. No framing, no plugin: the kernel's two
// copies and nothing else.
//
//   tcp-stream [--size BYTES] [--count N] [--buffers W] [--write BYTES] [--spin 0|1]
//
// iperf3 writes 128 KiB blocks from one buffer (at most 1 MiB: `-l 64M` is refused), so both of its
// copies stay in the caches. `--size 64M --buffers 8` moves the bytes between the buffers rerail-perf
// netbench gives the plugin (64 MiB messages, a window of 8: 512 MiB per side, beyond any cache): the
// same kernel path with the same memory traffic, what the plugin could reach at best with those
// buffers. --write caps each send()/recv() call (default: the whole message, as rerail does). --spin 1:
// non-blocking sockets retried at once on EAGAIN, the plugin's way of waiting (default: blocking).
// Prints one line: "bw_GBps=<GB/s> size=BYTES count=N buffers=W". Exit 0 on success, 1 on a socket
// error.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "rerail/clock.h"

namespace {

bool g_spin = false;  // non-blocking sockets, retried at once on EAGAIN (as the plugin's driver spins)
bool Move(int fd, char* p, size_t len, size_t cap, bool out) {
  while (len > 0) {
    size_t want = len < cap ? len : cap;
    ssize_t n = out ? send(fd, p, want, MSG_NOSIGNAL) : recv(fd, p, want, 0);
    if (n > 0) p += n, len -= static_cast<size_t>(n);
    else if (n == 0 || (errno != EINTR && !(g_spin && errno == EAGAIN))) return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  size_t size = 64u << 20, write_cap = 0;
  long count = 32, buffers = 8;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--size") size = strtoull(argv[i + 1], nullptr, 0);
    else if (a == "--count") count = atol(argv[i + 1]);
    else if (a == "--buffers") buffers = atol(argv[i + 1]);
    else if (a == "--write") write_cap = strtoull(argv[i + 1], nullptr, 0);
    else if (a == "--spin") g_spin = atoi(argv[i + 1]) != 0;
    else return fprintf(stderr, "usage: %s [--size BYTES] [--count N] [--buffers W] [--write BYTES] [--spin 0|1]\n", argv[0]), 2;
  }
  if (size == 0 || count <= 0 || buffers <= 0 || buffers > 64) {
    return fprintf(stderr, "tcp-stream: size and count must be > 0, buffers 1..64\n"), 2;
  }
  if (write_cap == 0) write_cap = size;
  int ls = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t al = sizeof(a);
  if (ls < 0 || bind(ls, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || listen(ls, 1) != 0 ||
      getsockname(ls, reinterpret_cast<sockaddr*>(&a), &al) != 0) {
    return perror("tcp-stream: listen"), 1;
  }
  // Both ends touch every page of their buffers before the first byte moves, as netbench does.
  const size_t total = size * static_cast<size_t>(buffers);
  std::unique_ptr<char[]> buf(new char[total]);
  std::memset(buf.get(), 0x3c, total);
  const int one = 1;
  pid_t child = fork();
  if (child < 0) return perror("tcp-stream: fork"), 1;
  if (child == 0) {  // the receiver
    int fd = accept(ls, nullptr, nullptr);
    if (fd < 0 || (g_spin && fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) != 0)) _exit(1);
    for (long m = 0; m < count; ++m) {
      if (!Move(fd, buf.get() + (m % buffers) * size, size, write_cap, false)) _exit(1);
    }
    char done = 1;
    _exit(Move(fd, &done, 1, 1, true) ? 0 : 1);
  }
  close(ls);
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0 ||
      (g_spin && fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) != 0)) {
    return perror("tcp-stream: connect"), 1;
  }
  const uint64_t t0 = rr::NowNs();
  for (long m = 0; m < count; ++m) {
    if (!Move(fd, buf.get() + (m % buffers) * size, size, write_cap, true)) return perror("tcp-stream: send"), 1;
  }
  char done = 0;  // the receiver has every byte when it answers
  if (!Move(fd, &done, 1, 1, false)) return perror("tcp-stream: recv"), 1;
  const double s = static_cast<double>(rr::NowNs() - t0) / 1e9;
  int st = 0;
  waitpid(child, &st, 0);
  printf("bw_GBps=%.4f size=%zu count=%ld buffers=%ld\n", static_cast<double>(size) * count / s / 1e9, size, count,
         buffers);
  return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}
