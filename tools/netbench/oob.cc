#include "oob.h"

#include <dirent.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "rerail/clock.h"

extern char** environ;

namespace rr::netbench {

Oob::~Oob() {
  if (fd_ >= 0) close(fd_);
}

Oob& Oob::operator=(Oob&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) close(fd_);
    fd_ = std::exchange(o.fd_, -1);
  }
  return *this;
}

Status Oob::Send(const void* data, size_t size) {
  if (fd_ < 0) return Status::Internal("oob: channel not open");
  uint32_t len = static_cast<uint32_t>(size);
  std::string frame(reinterpret_cast<const char*>(&len), sizeof(len));
  frame.append(static_cast<const char*>(data), size);
  size_t off = 0;
  while (off < frame.size()) {
    ssize_t n = ::send(fd_, frame.data() + off, frame.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::System("oob: send");
    off += static_cast<size_t>(n);
  }
  return Status::Ok();
}

// Reads exactly n bytes before the deadline.
static Status ReadFull(int fd, char* p, size_t n, const Deadline& dl) {
  size_t off = 0;
  while (off < n) {
    pollfd pfd{fd, POLLIN, 0};
    uint64_t left = dl.RemainingMs();
    if (left == 0) return Status(Code::kInternalError, "oob: timed out waiting for the peer");
    int r = poll(&pfd, 1, static_cast<int>(left > 1000 ? 1000 : left));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return Status::System("oob: poll");
    if (r == 0) continue;
    ssize_t got = ::recv(fd, p + off, n - off, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return Status::System("oob: recv");
    if (got == 0) return Status::Remote("oob: peer closed the channel (exited or died)");
    off += static_cast<size_t>(got);
  }
  return Status::Ok();
}

Status Oob::Recv(std::string* out, uint64_t timeout_ms) {
  if (fd_ < 0) return Status::Internal("oob: channel not open");
  Deadline dl = Deadline::AfterMs(timeout_ms);
  uint32_t len = 0;
  RR_CHECK(ReadFull(fd_, reinterpret_cast<char*>(&len), sizeof(len), dl));
  if (len > (64u << 20))
    return Status::Internal("oob: frame of " + std::to_string(len) + " bytes is implausible");
  out->assign(len, '\0');
  return ReadFull(fd_, out->data(), len, dl);
}

Peer::~Peer() {
  if (pid_ > 0) {
    Kill();
    Wait(5000);
  }
}

Status Peer::Spawn(const std::string& exe, const std::vector<std::string>& args,
                   const std::vector<std::string>& env) {
  if (pid_ > 0) return Status::Internal("peer: already running");
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return Status::System("socketpair");
  // Build argv/envp before fork: the child may only make async-signal-safe calls.
  std::vector<std::string> envs;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string cur(*e);
    bool replaced = false;
    for (const auto& add : env) {
      size_t eq = add.find('=');
      if (eq != std::string::npos && cur.compare(0, eq + 1, add, 0, eq + 1) == 0) replaced = true;
    }
    if (!replaced) envs.push_back(cur);
  }
  envs.insert(envs.end(), env.begin(), env.end());
  std::vector<char*> argv{const_cast<char*>(exe.c_str())};
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (auto& e : envs) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    close(sv[0]), close(sv[1]);
    return Status::System("fork");
  }
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    if (dup2(sv[1], 3) < 0) _exit(127);  // dup2 clears FD_CLOEXEC on fd 3
    execve(exe.c_str(), argv.data(), envp.data());
    _exit(127);
  }
  close(sv[1]);
  pid_ = pid;
  oob_ = Oob(sv[0]);
  return Status::Ok();
}

void Peer::Kill() {
  if (pid_ > 0) kill(pid_, SIGKILL);
}

int Peer::Wait(uint64_t timeout_ms) {
  if (pid_ <= 0) return -1;
  Deadline dl = Deadline::AfterMs(timeout_ms);
  int status = 0;
  for (;;) {
    pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_ || (r < 0 && errno != EINTR)) break;
    if (dl.Expired()) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
      break;
    }
    usleep(2000);
  }
  pid_ = -1;
  return status;
}

static int CountDir(const char* path) {
  DIR* d = opendir(path);
  if (d == nullptr) return -1;
  int n = 0;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  closedir(d);
  return n;
}

// The DIR handle itself is one entry of /proc/self/fd while it is open.
int CountOpenFds() {
  return CountDir("/proc/self/fd") - 1;
}
int CountThreads() {
  return CountDir("/proc/self/task");
}

}  // namespace rr::netbench
