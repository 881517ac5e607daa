// fakeverbs — FAKEVERBS_CONTROL=<path>: faults injected into a running process from outside, on a
// schedule a test script owns (tests/faults/ib_fake_faults.sh), with the semantics of the in-process
// control API (fakeverbs.h). Contract in fake_fabric.h (class Control).
//
// Why a FIFO held open O_RDWR: `echo down fake1 > $ctl` from a shell must neither block (there is always
// a reader) nor end the stream for the fake (there is always a writer), and commands written while
// the HCA thread is stopped wait in the pipe until it runs again. Why <path>.applied: the command takes
// effect on the HCA thread's next wake-up, not when the shell's write returns; a script that measures
// what happens after a fault waits for its line there.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "fake_fabric.h"
#include "fakeverbs.h"

namespace fakeverbs {

Control* Control::Open(Fabric& f, int host) {
  const char* v = getenv("FAKEVERBS_CONTROL");
  if (!v || !*v) return nullptr;
  std::string path = v;
  struct stat st;
  if (stat(path.c_str(), &st) != 0 && mkfifo(path.c_str(), 0600) != 0 && errno != EEXIST) {
    fprintf(stderr, "fakeverbs: FAKEVERBS_CONTROL=%s: mkfifo: %s\n", v, strerror(errno));
    abort();
  }
  if (stat(path.c_str(), &st) != 0 || !S_ISFIFO(st.st_mode)) {
    fprintf(stderr, "fakeverbs: FAKEVERBS_CONTROL=%s: not a FIFO\n", v);
    abort();
  }
  int fd = open(path.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    fprintf(stderr, "fakeverbs: FAKEVERBS_CONTROL=%s: %s\n", v, strerror(errno));
    abort();
  }
  fprintf(stderr, "fakeverbs: host %d reads control commands from %s\n", host, v);
  return new Control(f, host, path, fd);
}

void Control::OnReadable() {
  char buf[512];
  for (;;) {
    ssize_t n = read(fd_, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // EAGAIN: all read (never EOF: we hold a write end)
    partial_.append(buf, static_cast<size_t>(n));
  }
  for (size_t nl; (nl = partial_.find('\n')) != std::string::npos;) {
    std::string line = partial_.substr(0, nl);
    partial_.erase(0, nl + 1);
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    std::string outcome = Apply(line);
    fprintf(stderr, "fakeverbs: host %d: control: %s -> %s\n", host_, line.c_str(), outcome.c_str());
    std::string rec = line + " -> " + outcome + "\n";
    int afd = open((path_ + ".applied").c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (afd >= 0) {
      ssize_t w = write(afd, rec.data(), rec.size());
      (void)w;
      close(afd);
    }
  }
}

std::string Control::Apply(const std::string& line) {
  std::istringstream in(line);
  std::string cmd, name, extra;
  in >> cmd >> name >> extra;
  if (cmd == "stats" && name.empty()) {
    std::ostringstream out;
    for (const Device* d : f_.devices) {
      out << (d == f_.devices.front() ? "" : " ") << d->name << " tx_requests=" << d->tx_requests
          << " tx_bytes=" << d->tx_bytes << " rx_requests=" << d->rx_requests << " rx_bytes=" << d->rx_bytes;
    }
    return out.str();
  }
  Device* d = f_.FindDevice(name.c_str());
  if (!d || !extra.empty()) return "error: want down|up|blackhole|ackloss|txloss|heal|fatal <device> or stats";
  if (cmd == "down" || cmd == "up") {
    return f_.SetPortState(d, cmd == "up") ? (cmd == "up" ? "ok (PORT_ACTIVE)" : "ok (PORT_ERR)") : "ok (no change)";
  }
  if (cmd == "blackhole" || cmd == "ackloss" || cmd == "txloss") {
    d->port.fault = cmd == "blackhole" ? FAKEVERBS_FAULT_DROP_DATA
                    : cmd == "ackloss" ? FAKEVERBS_FAULT_DROP_ACKS
                                       : FAKEVERBS_FAULT_DROP_OUT;
    return "ok";
  }
  if (cmd == "fatal") {  // fakeverbs_device_fatal: for good (heal does not undo it)
    d->fatal = true;
    for (auto& [qpn, q] : f_.qps)
      if (q->pd->ctx->dev == d) f_.ToError(q);
    f_.PostEvent(d, vx::kEventDeviceFatal, nullptr);
    return "ok (DEVICE_FATAL)";
  }
  if (cmd == "heal") {
    d->port.fault = FAKEVERBS_FAULT_NONE;
    return f_.SetPortState(d, true) ? "ok (PORT_ACTIVE)" : "ok";
  }
  return "error: unknown command " + cmd;
}

}  // namespace fakeverbs
