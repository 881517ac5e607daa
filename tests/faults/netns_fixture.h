// rerail fault tests — shared fixture: a simulated multi-rail fabric in network namespaces
// (scripts/netns-rails.sh) that a test brings up, injects faults into, and always tears down.
//
// Use from any fault test: link the CMake target `rerail_netns_fixture` (defines the script path) and
//
//   class MyTest : public rr::testing::NetnsFixture {
//    protected:
//     const char* PrefixBase() const override { return "rrnet"; }  // your assigned prefix
//     int Hosts() const override { return 2; }
//     int Rails() const override { return 4; }
//   };
//   TEST_F(MyTest, Something) { topo().Fail(1, 0); ... topo().InHost(0, [&] { ...sockets... }); }
//
// Contract
//   * SetUp() skips the test (GTEST_SKIP) with a message when not root or when `ip` is missing; it
//     fails the test if the topology cannot be built. TearDown() and ~NetnsTopology() always run
//     `down`. Namespaces left by a crashed or killed earlier run of the same prefix base are swept at
//     SetUp when the pid encoded in their name is dead.
//   * Each fixture instance uses a unique prefix <base><pid>x<n>, so parallel ctest processes never
//     collide. Everything lives in namespaces <prefix>-h<h> and <prefix>-sw; nothing is added to the
//     caller's namespace, and traffic only flows between those namespaces.
//   * InHost(h, fn) runs fn on a fresh thread that entered host h's network namespace (setns affects
//     that thread only), so sockets fn creates live on host h. Blocking: joins the thread.
//   * Not thread-safe: drive one NetnsTopology from the test's main thread.
#pragma once

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <dirent.h>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>

#ifndef RERAIL_NETNS_SCRIPT
#error "link the CMake target rerail_netns_fixture (it defines RERAIL_NETNS_SCRIPT)"
#endif

namespace rr::testing {

struct CmdResult {
  int rc = -1;       // exit status (-1: could not run)
  std::string out;   // stdout and stderr together
};

// Runs a shell command line, capturing its output. Blocking.
inline CmdResult RunCmd(const std::string& cmd) {
  CmdResult r;
  FILE* p = popen(("( " + cmd + " ) 2>&1").c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  int st = pclose(p);
  r.rc = (st >= 0 && WIFEXITED(st)) ? WEXITSTATUS(st) : -1;
  return r;
}

class NetnsTopology {
 public:
  explicit NetnsTopology(std::string prefix) : prefix_(std::move(prefix)) {}
  ~NetnsTopology() { Down(); }
  NetnsTopology(const NetnsTopology&) = delete;
  NetnsTopology& operator=(const NetnsTopology&) = delete;

  // scripts/netns-rails.sh with this prefix; `args` is appended verbatim (caller quotes).
  CmdResult Script(const std::string& args) const {
    return RunCmd("RERAIL_NETNS_PREFIX=" + prefix_ + " bash " RERAIL_NETNS_SCRIPT " " + args);
  }
  CmdResult Up(int hosts, int rails) {
    hosts_ = hosts;
    rails_ = rails;
    up_ = true;  // even a failed 'up' may leave something for Down() to remove
    return Script("up " + std::to_string(hosts) + " " + std::to_string(rails));
  }
  void Down() {
    if (up_) Script("down");
    up_ = false;
  }
  bool Fail(int h, int r, const char* mode = "carrier") { return Hr("fail", h, r, mode).rc == 0; }
  bool Blackhole(int h, int r) { return Hr("blackhole", h, r, "").rc == 0; }
  bool Slow(int h, int r, const std::string& rate) { return Hr("slow", h, r, rate).rc == 0; }
  bool Heal(int h, int r) { return Hr("heal", h, r, "").rc == 0; }
  // "up", "down-carrier", "up+blackhole", ... as `status` prints it; "" if unknown.
  std::string State(int h, int r) const {
    CmdResult s = Script("status");
    std::string key = "host=" + std::to_string(h) + " rail=" + std::to_string(r) + " ";
    size_t at = s.out.find(key);
    if (at == std::string::npos) return "";
    size_t st = s.out.find("state=", at);
    size_t end = s.out.find('\n', st);
    return s.out.substr(st + 6, end - st - 6);
  }

  const std::string& prefix() const { return prefix_; }
  int hosts() const { return hosts_; }
  int rails() const { return rails_; }
  std::string Netns(int h) const { return prefix_ + "-h" + std::to_string(h); }
  std::string NetnsPath(int h) const { return "/run/netns/" + Netns(h); }
  static std::string Ifname(int r) { return "rail" + std::to_string(r); }
  std::string Addr(int h, int r) const {
    CmdResult a = Script("addr " + std::to_string(h) + " " + std::to_string(r));
    while (!a.out.empty() && (a.out.back() == '\n' || a.out.back() == ' ')) a.out.pop_back();
    return a.rc == 0 ? a.out : "";
  }
  // A command line run inside host h's namespace.
  CmdResult Exec(int h, const std::string& cmd) const { return RunCmd("ip netns exec " + Netns(h) + " " + cmd); }

  // Runs fn() on a thread inside host h's network namespace and returns its result.
  template <class F>
  auto InHost(int h, F fn) -> decltype(fn()) {
    using R = decltype(fn());
    std::string path = NetnsPath(h);
    bool entered = false;
    if constexpr (std::is_void_v<R>) {
      std::thread t([&] {
        if ((entered = Enter(path))) fn();
      });
      t.join();
      EXPECT_TRUE(entered) << "cannot enter " << path;
    } else {
      R out{};
      std::thread t([&] {
        if ((entered = Enter(path))) out = fn();
      });
      t.join();
      EXPECT_TRUE(entered) << "cannot enter " << path;
      return out;
    }
  }

  // Starts fn on a new thread inside host h's namespace; the caller joins the returned thread.
  std::thread SpawnInHost(int h, std::function<void()> fn) {
    return std::thread([path = NetnsPath(h), fn = std::move(fn)] {
      if (Enter(path)) fn();
      else ADD_FAILURE() << "cannot enter " << path;
    });
  }

  // Removes namespaces <base><pid>x<n>-* whose pid is dead (left by a killed test run).
  static void SweepDead(const std::string& base) {
    DIR* d = opendir("/run/netns");
    if (d == nullptr) return;
    while (dirent* e = readdir(d)) {
      std::string n = e->d_name;
      if (n.compare(0, base.size(), base) != 0) continue;
      char* end = nullptr;
      long pid = strtol(n.c_str() + base.size(), &end, 10);
      if (pid <= 0 || end == nullptr || *end != 'x') continue;
      if (kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM) continue;
      RunCmd("ip netns del " + n);
    }
    closedir(d);
  }

 private:
  static bool Enter(const std::string& path) {
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    bool ok = setns(fd, CLONE_NEWNET) == 0;
    close(fd);
    return ok;
  }
  CmdResult Hr(const char* verb, int h, int r, const std::string& extra) const {
    CmdResult c = Script(std::string(verb) + " " + std::to_string(h) + " " + std::to_string(r) + " " + extra);
    EXPECT_EQ(c.rc, 0) << verb << " " << h << " " << r << ": " << c.out;
    return c;
  }

  std::string prefix_;
  int hosts_ = 0, rails_ = 0;
  bool up_ = false;
};

class NetnsFixture : public ::testing::Test {
 protected:
  virtual const char* PrefixBase() const { return "rrrails"; }
  virtual int Hosts() const { return 2; }
  virtual int Rails() const { return 2; }

  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (network namespaces, iptables, tc); run as root";
    if (RunCmd("command -v ip").rc != 0) GTEST_SKIP() << "iproute2 ('ip') not installed";
    NetnsTopology::SweepDead(PrefixBase());
    static std::atomic<int> counter{0};
    std::string prefix = std::string(PrefixBase()) + std::to_string(getpid()) + "x" + std::to_string(counter++);
    topo_ = std::make_unique<NetnsTopology>(prefix);
    CmdResult up = topo_->Up(Hosts(), Rails());
    ASSERT_EQ(up.rc, 0) << "netns-rails.sh up failed:\n" << up.out;
  }
  void TearDown() override {
    if (topo_) topo_->Down();
  }
  NetnsTopology& topo() { return *topo_; }

  std::unique_ptr<NetnsTopology> topo_;
};

}  // namespace rr::testing
