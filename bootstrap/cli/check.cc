// `rerail-bootstrap check`: everything that must hold before a rootless job can start, one line each.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "commands.h"
#include "rerail/boot/nccl.h"
#include "rerail/log.h"
#include "rerail/params.h"

namespace rr::boot::cli {
namespace {

struct Report {
  int fails = 0, warns = 0;
  void Line(const char* tag, const std::string& text) {
    if (!std::strcmp(tag, "FAIL")) ++fails;
    if (!std::strcmp(tag, "WARN")) ++warns;
    std::printf("[%-4s] %s\n", tag, text.c_str());
  }
};

// Connect probe: "refused" means the host answered (reachable, nothing listens there yet).
enum class Probe { kRefused, kListening, kUnreachable };

Probe ProbeAddress(const SockAddr& a, int timeout_ms, std::string* why) {
  int fd = socket(a.u.sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return *why = strerror(errno), Probe::kUnreachable;
  int rc = connect(fd, &a.u.sa, a.len);
  int err = rc == 0 ? 0 : errno;
  if (err == EINPROGRESS) {
    pollfd p{fd, POLLOUT, 0};
    if (poll(&p, 1, timeout_ms) <= 0) {
      close(fd);
      *why = "no answer within " + std::to_string(timeout_ms) + " ms";
      return Probe::kUnreachable;
    }
    socklen_t len = sizeof(err);
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
  }
  close(fd);
  *why = err ? strerror(err) : "connected";
  if (err == 0) return Probe::kListening;
  return err == ECONNREFUSED ? Probe::kRefused : Probe::kUnreachable;
}

bool PortFree(const SockAddr& a) {
  int fd = socket(a.u.sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  bool ok = bind(fd, &a.u.sa, a.len) == 0;
  close(fd);
  return ok;
}

void CheckHosts(const Job& job, const CheckOptions& o, Report* rep) {
  int local_host = -1;
  for (int h = 0; h < job.nhosts(); ++h) {
    int first_rank = h * job.ranks_per_host();
    if (first_rank >= job.nranks()) break;
    SockAddr a = job.Address(first_rank, o.group);
    bool local = IsLocalAddress(a);
    if (local && local_host < 0) local_host = h;
    std::string where = "host " + std::to_string(h) + " '" + job.spec().hosts[h] + "' -> " + a.ToString();
    if (local) {
      int busy = 0;
      for (int r = first_rank; r < std::min(first_rank + job.ranks_per_host(), job.nranks()); ++r)
        if (!PortFree(job.Address(r, o.group))) ++busy;
      if (busy) rep->Line("FAIL", where + ": " + std::to_string(busy) + " planned ports of this group are in use here");
      else rep->Line("ok", where + ": this machine; its planned ports are free");
      continue;
    }
    std::string why;
    switch (ProbeAddress(a, o.connect_timeout_ms, &why)) {
      case Probe::kRefused: rep->Line("ok", where + ": reachable (port closed, free)"); break;
      case Probe::kListening:
        rep->Line("WARN", where + ": something already listens on a planned port (a running rank, or a stale or foreign process)");
        break;
      case Probe::kUnreachable: rep->Line("FAIL", where + ": unreachable (" + why + ")"); break;
    }
  }
  if (local_host < 0) rep->Line("WARN", "no host entry is an address of this machine (run check on a job host)");
  else rep->Line("ok", "this machine is host " + std::to_string(local_host) + " (ranks " +
                           std::to_string(local_host * job.ranks_per_host()) + "..)");
}

}  // namespace

int RunCheck(const JobSpec& spec, const CheckOptions& o) {
  Report rep;
  Status ps = Params::Load();
  rep.Line(ps.ok() ? "ok" : "FAIL", ps.ok() ? "RERAIL_* parameters parse" : ps.message());
  rep.Line(RootlessRequested() ? "ok" : "info",
           std::string("rootless init ") + (RootlessRequested() ? "requested" : "not requested") +
               " (RERAIL_ROOTLESS / HPCT_USE_ROOTLESS)");
  EphemeralPorts eph;
  Status s = ReadEphemeralPorts(&eph);
  if (!s.ok()) rep.Line("FAIL", s.message());
  s = CheckPorts(spec, eph);
  int last = spec.port_base + spec.port_span - 1;
  rep.Line(s.ok() ? "ok" : "FAIL", s.ok() ? "planned ports " + std::to_string(spec.port_base) + "-" + std::to_string(last) +
                                                " are outside the ephemeral range " + std::to_string(eph.lo) + "-" +
                                                std::to_string(eph.hi) + " (or reserved)"
                                          : s.message());
  for (size_t h = 0; h < spec.hosts.size(); ++h) {
    SockAddr a;
    const std::string& name = spec.hosts[h];
    Status hs = ParseHostPort((name.find(':') != std::string::npos ? "[" + name + "]" : name) + ":1", &a);
    if (!hs.ok()) rep.Line("FAIL", "host entry " + std::to_string(h) + ": " + hs.message());
  }
  // Job::Create repeats the port check; build the job with the range ignored to check the rest.
  std::unique_ptr<Job> job;
  EphemeralPorts none;
  none.lo = 65535, none.hi = 65535, none.reserved = {{65535, 65535}};
  Status js = Job::Create(spec, none, &job);
  if (!js.ok()) {
    if (!rep.fails) rep.Line("FAIL", js.message());
  } else {
    std::string ifname;
    Status sub = FindInterfaceOnSubnet(job->Address(0, o.group), &ifname);
    rep.Line(sub.ok() ? "ok" : "FAIL", sub.ok() ? "interface " + ifname + " shares the subnet of rank 0's address " +
                                                      job->Address(0, o.group).ToString() + " (NCCL_COMM_ID rule)"
                                                : sub.message());
    CheckHosts(*job, o, &rep);
  }
  std::printf("%s: %d failed, %d warnings\n", rep.fails ? "check FAILED" : "check passed", rep.fails, rep.warns);
  return rep.fails ? 1 : 0;
}

}  // namespace rr::boot::cli
