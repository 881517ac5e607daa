#include "launcher.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "net_loader.h"
#include "rerail/clock.h"
#include "rerail/log.h"

namespace rr::perf {
namespace {

volatile sig_atomic_t g_stop = 0;
void OnSignal(int) { g_stop = 1; }

std::string SelfExe() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return "rerail-perf";
  buf[n] = 0;
  return buf;
}

std::string NetnsName(const Options& o, int host) { return o.netns_prefix + "-h" + std::to_string(host); }

pid_t StartRank(const Options& o, int argc, char** argv, int rank, const std::string& dir, uint64_t t0) {
  std::vector<std::string> args;
  if (o.hosts > 0) args = {"ip", "netns", "exec", NetnsName(o, rank * o.hosts / o.nranks)};
  args.push_back(SelfExe());
  for (int i = 1; i < argc; ++i) args.push_back(argv[i]);
  args.insert(args.end(), {"--rank", std::to_string(rank), "--rendezvous", dir + "/oob.sock", "--t0-ns",
                           std::to_string(t0), "--events", dir + "/faults.log"});
  pid_t pid = fork();
  if (pid != 0) return pid;
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  std::vector<char*> cargv;
  for (std::string& a : args) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  execvp(cargv[0], cargv.data());
  fprintf(stderr, "rerail-perf: cannot start rank %d (%s): %s\n", rank, cargv[0], strerror(errno));
  _exit(127);
}

// Runs the rails script for one fault; returns its exit code.
int RunFault(const Options& o, const FaultSpec& f) {
  std::string verb = f.kind == "down" ? "fail" : f.kind;
  std::vector<std::string> args = {"bash", o.rails_script, verb, std::to_string(f.host), std::to_string(f.rail)};
  if (f.kind == "slow") args.push_back(f.rate);
  pid_t pid = fork();
  if (pid == 0) {
    setenv("RERAIL_NETNS_PREFIX", o.netns_prefix.c_str(), 1);  // the script's own variable, not a plugin knob
    std::vector<char*> cargv;
    for (std::string& a : args) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    execvp("bash", cargv.data());
    _exit(127);
  }
  int st = 0;
  if (pid < 0 || waitpid(pid, &st, 0) < 0) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

// One launch: the temporary directory, the rank processes and the fault schedule.
class Launcher {
 public:
  Launcher(const Options& o, int argc, char** argv) : o_(o), argc_(argc), argv_(argv) {}
  ~Launcher() {
    if (dir_.empty()) return;
    unlink((dir_ + "/faults.log").c_str());
    unlink((dir_ + "/oob.sock").c_str());
    rmdir(dir_.c_str());
  }

  // Checks the environment; false (message printed) when the run cannot start.
  bool Prepare() {
    char tmpl[] = "/tmp/rerail-perf.XXXXXX";
    if (mkdtemp(tmpl) == nullptr) return Fail(std::string("mkdtemp: ") + strerror(errno));
    dir_ = tmpl;
    std::string err;
    if (!netdrv::NetPlugin::Open(o_.plugin, &err)) return Fail(err);  // one clear message, not one per rank
    if (!o_.faults.empty() && access(o_.rails_script.c_str(), R_OK) != 0)
      return Fail("--fault needs the rails script, '" + o_.rails_script + "' is not readable (use --rails-script)");
    for (int h = 0; h < o_.hosts; ++h)
      if (access(("/run/netns/" + NetnsName(o_, h)).c_str(), F_OK) != 0)
        return Fail("--hosts " + std::to_string(o_.hosts) + ": network namespace '" + NetnsName(o_, h) +
                    "' does not exist (create the hosts with RERAIL_NETNS_PREFIX=" + o_.netns_prefix +
                    " scripts/netns-rails.sh up " + std::to_string(o_.hosts) + " K)");
    return true;
  }

  int Run() {
    struct sigaction sa {};
    sa.sa_handler = OnSignal;
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
    t0_ = NowNs();
    for (int r = 0; r < o_.nranks; ++r) pids_.push_back(StartRank(o_, argc_, argv_, r, dir_, t0_));
    reaped_.assign(pids_.size(), false);
    fired_.assign(o_.faults.size(), false);
    Deadline dl = Deadline::AfterMs(static_cast<uint64_t>(o_.timeout_s) * 1000 + 10000);
    while (alive_ > 0) {
      FireDueFaults();
      Reap();
      const char* why = g_stop ? "interrupted" : (dl.Expired() ? "--timeout reached" : nullptr);
      // A failed rank leaves its peers waiting on it: give them a moment to fail on their own.
      if (why == nullptr && failed_at_ns_ != 0 && NowNs() - failed_at_ns_ > 3000000000ull) why = "a rank failed";
      if (alive_ > 0 && why != nullptr) {
        Stop(why);
        break;
      }
      usleep(10000);
    }
    return worst_;
  }

 private:
  bool Fail(const std::string& msg) {
    fprintf(stderr, "rerail-perf: %s\n", msg.c_str());
    return false;
  }

  void FireDueFaults() {
    for (size_t i = 0; i < o_.faults.size(); ++i) {
      if (fired_[i] || NowNs() - t0_ < o_.faults[i].at_ms * 1000000ull) continue;
      fired_[i] = true;
      double t = (NowNs() - t0_) * 1e-9;
      int rc = RunFault(o_, o_.faults[i]);
      std::ofstream(dir_ + "/faults.log", std::ios::app) << t << "\t" << o_.faults[i].text << " (rc " << rc << ")\n";
      if (rc != 0) fprintf(stderr, "rerail-perf: fault '%s' failed (rails script rc %d)\n", o_.faults[i].text.c_str(), rc);
    }
  }

  void Reap() {
    for (size_t i = 0; i < pids_.size(); ++i) {
      int st = 0;
      if (reaped_[i] || waitpid(pids_[i], &st, WNOHANG) != pids_[i]) continue;
      reaped_[i] = true, --alive_;
      int code = WIFEXITED(st) ? std::min(WEXITSTATUS(st), 2) : 2;
      if (!WIFEXITED(st)) fprintf(stderr, "rerail-perf: rank %zu killed by signal %d\n", i, WTERMSIG(st));
      if (code == 2 && failed_at_ns_ == 0) failed_at_ns_ = NowNs();
      worst_ = std::max(worst_, code);
    }
  }

  void Stop(const char* why) {
    fprintf(stderr, "rerail-perf: %s; stopping the remaining ranks\n", why);
    for (size_t i = 0; i < pids_.size(); ++i)
      if (!reaped_[i]) kill(pids_[i], SIGKILL);
    for (size_t i = 0; i < pids_.size(); ++i)
      if (!reaped_[i]) waitpid(pids_[i], nullptr, 0);
    worst_ = 2;
  }

  const Options& o_;
  int argc_;
  char** argv_;
  std::string dir_;
  uint64_t t0_ = 0, failed_at_ns_ = 0;
  std::vector<pid_t> pids_;
  std::vector<bool> reaped_, fired_;
  int alive_ = o_.nranks, worst_ = 0;
};

}  // namespace

int Launch(const Options& o, int argc, char** argv) {
  Launcher l(o, argc, argv);
  if (!l.Prepare()) return 2;
  return l.Run();
}

}  // namespace rr::perf
