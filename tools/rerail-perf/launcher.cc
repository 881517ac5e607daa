#include "launcher.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

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

}  // namespace

int Launch(const Options& o, int argc, char** argv) {
  char tmpl[] = "/tmp/rerail-perf.XXXXXX";
  if (mkdtemp(tmpl) == nullptr) {
    fprintf(stderr, "rerail-perf: mkdtemp: %s\n", strerror(errno));
    return 2;
  }
  const std::string dir = tmpl;
  if (!o.faults.empty() && access(o.rails_script.c_str(), R_OK) != 0) {
    fprintf(stderr, "rerail-perf: --fault needs the rails script, '%s' is not readable (use --rails-script)\n",
            o.rails_script.c_str());
    rmdir(dir.c_str());
    return 2;
  }
  for (int h = 0; h < o.hosts; ++h) {
    if (access(("/run/netns/" + NetnsName(o, h)).c_str(), F_OK) != 0) {
      fprintf(stderr, "rerail-perf: --hosts %d: network namespace '%s' does not exist (create the hosts with "
                      "RERAIL_NETNS_PREFIX=%s scripts/netns-rails.sh up %d K)\n", o.hosts, NetnsName(o, h).c_str(),
              o.netns_prefix.c_str(), o.hosts);
      rmdir(dir.c_str());
      return 2;
    }
  }
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  const uint64_t t0 = NowNs();
  std::vector<pid_t> pids;
  for (int r = 0; r < o.nranks; ++r) pids.push_back(StartRank(o, argc, argv, r, dir, t0));
  std::vector<bool> fired(o.faults.size(), false);
  Deadline dl = Deadline::AfterMs(static_cast<uint64_t>(o.timeout_s) * 1000 + 10000);
  int worst = 0, alive = o.nranks;
  std::vector<bool> reaped(pids.size(), false);
  while (alive > 0) {
    for (size_t i = 0; i < o.faults.size(); ++i) {
      if (fired[i] || NowNs() - t0 < o.faults[i].at_ms * 1000000ull) continue;
      fired[i] = true;
      double t = (NowNs() - t0) * 1e-9;
      int rc = RunFault(o, o.faults[i]);
      std::ofstream(dir + "/faults.log", std::ios::app) << t << "\t" << o.faults[i].text << " (rc " << rc << ")\n";
      if (rc != 0) fprintf(stderr, "rerail-perf: fault '%s' failed (rails script rc %d)\n", o.faults[i].text.c_str(), rc);
    }
    for (size_t i = 0; i < pids.size(); ++i) {
      int st = 0;
      if (reaped[i] || waitpid(pids[i], &st, WNOHANG) != pids[i]) continue;
      reaped[i] = true, --alive;
      int code = WIFEXITED(st) ? WEXITSTATUS(st) : 2;
      if (!WIFEXITED(st)) fprintf(stderr, "rerail-perf: rank %zu killed by signal %d\n", i, WTERMSIG(st));
      if (code != 0 && worst < 2) worst = std::max(worst, code > 2 ? 2 : code);
    }
    if (alive > 0 && (g_stop || dl.Expired())) {
      fprintf(stderr, "rerail-perf: %s; stopping the ranks\n", g_stop ? "interrupted" : "--timeout reached");
      for (size_t i = 0; i < pids.size(); ++i)
        if (!reaped[i]) kill(pids[i], SIGKILL);
      for (size_t i = 0; i < pids.size(); ++i)
        if (!reaped[i]) waitpid(pids[i], nullptr, 0);
      worst = 2;
      break;
    }
    usleep(10000);
  }
  unlink((dir + "/faults.log").c_str());
  unlink((dir + "/oob.sock").c_str());
  rmdir(dir.c_str());
  return worst;
}

}  // namespace rr::perf
