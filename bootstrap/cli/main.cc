// rerail-bootstrap: plan, id, check and exchange for a rootless, store-less job (see --help).
#include <CLI/CLI.hpp>
#include <unistd.h>
#include <xxhash.h>

#include <cstdio>

#include "commands.h"
#include "rerail/boot/exchange.h"
#include "rerail/boot/nccl.h"
#include "rerail/log.h"
#include "rerail/params.h"

namespace rr::boot::cli {
namespace {

struct JobFlags {
  std::string hosts, job_id;
  int rph = 0, base = 0, span = 0, nranks = 0;
};

void AddJobFlags(CLI::App* app, JobFlags* f) {
  app->add_option("--hosts", f->hosts, "Hosts: comma list or Slurm node list (default RERAIL_HOSTS)");
  app->add_option("--ranks-per-host", f->rph, "Ranks per host (default RERAIL_RANKS_PER_HOST / N_PROC_PER_NODE)");
  app->add_option("--port-base", f->base, "First planned port (default RERAIL_PORT_BASE / HPCT_PORT_BASE)");
  app->add_option("--port-span", f->span, "Ports the plan wraps within (default RERAIL_PORT_SPAN)");
  app->add_option("--nranks", f->nranks, "Ranks in the job (default hosts x ranks per host)");
  app->add_option("--job-id", f->job_id, "Job identity for magics (default RERAIL_JOB_ID / SLURM_JOB_ID)");
}

// Flags override the environment; the environment fills what flags leave out.
Status SpecFromFlags(const JobFlags& f, JobSpec* out) {
  JobSpec spec;
  RR_CHECK(JobSpecFromEnv(&spec, /*require_hosts=*/f.hosts.empty()));
  if (!f.hosts.empty()) RR_CHECK(ExpandHostList(f.hosts, &spec.hosts));
  if (f.rph > 0) spec.ranks_per_host = f.rph;
  if (f.base > 0) spec.port_base = f.base;
  if (f.span > 0) spec.port_span = f.span;
  if (f.nranks > 0) spec.nranks = f.nranks;
  if (!f.job_id.empty()) spec.job_id = f.job_id;
  *out = std::move(spec);
  return Status::Ok();
}

int Fail(const Status& s) {
  RR_WARN("%s", s.message().c_str());
  return 1;
}

int RunPlan(const Job& job, uint64_t group) {
  std::printf("# job '%s': %d hosts x %d ranks per host = %d ranks, ports %d..%d, group %llu, magic %016llx\n",
              job.spec().job_id.c_str(), job.nhosts(), job.ranks_per_host(), job.nranks(), job.spec().port_base,
              job.spec().port_base + job.spec().port_span - 1, static_cast<unsigned long long>(group),
              static_cast<unsigned long long>(job.Magic(group)));
  std::printf("%6s %6s %6s %-24s %s\n", "rank", "host", "local", "host name", "address");
  for (int r = 0; r < job.nranks(); ++r)
    std::printf("%6d %6d %6d %-24s %s\n", r, job.HostOf(r), job.LocalRankOf(r), job.spec().hosts[job.HostOf(r)].c_str(),
                job.Address(r, group).ToString().c_str());
  return 0;
}

int RunId(const Job& job, uint64_t group, bool job_magic) {
  unsigned char id[kNcclIdBytes];
  Status s = JobNcclId(job, group, job_magic, id);
  if (!s.ok()) return Fail(s);
  std::printf("NCCL_COMM_ID=%s\n", job.CommIdString(0, group).c_str());
  std::printf("magic=%s\nid=", job_magic ? "job" : "nccl");
  for (unsigned char c : id) std::printf("%02x", c);
  std::printf("\n");
  return 0;
}

int RunExchange(const Job& job, uint64_t group, int rank, const std::string& blob_flag, bool verify, int timeout_ms,
                int die_after_step, const std::string& algorithm) {
  Status ps = Params::Load();
  if (!ps.ok()) return Fail(ps);
  ExchangeOptions o;
  if (!ParseAlgorithm(algorithm, &o.algorithm))
    return Fail(Status::InvalidUsage("unknown --algorithm '" + algorithm + "' (bruck or ring)"));
  o.group = group;
  o.rank = rank;
  o.blob = blob_flag.empty() ? DefaultBlob(job, rank) : blob_flag;
  o.timeout_ms = timeout_ms > 0 ? static_cast<uint64_t>(timeout_ms) : static_cast<uint64_t>(Params::Int(ParamId::BootTimeoutMs));
  if (die_after_step >= 0)
    o.on_step = [die_after_step](int step) {
      if (step == die_after_step) _exit(3);  // fault injection: crash mid-exchange
    };
  std::vector<std::string> blobs;
  std::unique_ptr<Exchange> ex;
  Status s = Exchange::Start(job, o, &ex);
  if (s.ok()) s = ex->Wait(&blobs);
  if (!s.ok()) return Fail(s);
  int wrong = 0;
  for (int i = 0; verify && i < job.nranks(); ++i)
    if (blobs[i] != DefaultBlob(job, i)) ++wrong;
  std::string all;
  for (const auto& b : blobs) all += b;
  ExchangeStats st = ex->Stats();
  ex->Close();
  st = ex->Stats();
  std::printf("rank %d: %s %d blobs in %.1f ms, digest %016llx, steps %d connects %d accepts %d retries %d strangers %d\n",
              rank, wrong ? "WRONG" : "ok", job.nranks(), st.wait_ms,
              static_cast<unsigned long long>(XXH64(all.data(), all.size(), 0)), st.steps, st.connects, st.accepts,
              st.retries, st.strangers);
  return wrong ? 2 : 0;
}

}  // namespace

std::string DefaultBlob(const Job& job, int rank) {
  std::string b(64, '\0');
  std::snprintf(&b[0], b.size(), "rank %d at %s", rank, job.Address(rank, 0).ToString().c_str());
  return b;
}

}  // namespace rr::boot::cli

int main(int argc, char** argv) {
  using namespace rr::boot;
  rr::log::SetPrefix("BOOTSTRAP/rerail");
  CLI::App app{"rerail-bootstrap: rootless, store-less NCCL bootstrap (plan, id, check, exchange, bench)"};
  app.require_subcommand(1);
  cli::JobFlags jf;
  uint64_t group = 0;
  auto* plan = app.add_subcommand("plan", "Print the symmetric address plan of a group");
  auto* id = app.add_subcommand("id", "Print a group's ncclUniqueId and the matching NCCL_COMM_ID");
  auto* check = app.add_subcommand("check", "Check ports, ephemeral range, interfaces/subnet, reachability");
  auto* exch = app.add_subcommand("exchange", "Run the rootless all-gather as one rank (for testing a cluster)");
  auto* bench = app.add_subcommand("bench", "Time the exchange for 8..256 ranks on this machine (loopback)");
  for (auto* sc : {plan, id, check, exch}) {
    AddJobFlags(sc, &jf);
    sc->add_option("--group", group, "Group counter (one per communicator / recovery)");
  }
  bool job_magic = false;
  id->add_flag("--job-magic", job_magic, "Use the per-(job, group) magic instead of NCCL's constant");
  cli::CheckOptions co;
  check->add_option("--connect-timeout-ms", co.connect_timeout_ms, "Reachability probe timeout per host");
  int rank = -1, timeout_ms = 0, die_after = -1;
  std::string blob, algorithm = "bruck";
  bool verify = false;
  exch->add_option("--algorithm", algorithm, "bruck (log2 N rounds) or ring (2 connections per rank)");
  exch->add_option("--rank", rank, "This process's rank")->required();
  exch->add_option("--blob", blob, "Contribution (default: 64 bytes naming the rank and its address)");
  exch->add_flag("--verify", verify, "Check every received blob against the default contribution");
  exch->add_option("--timeout-ms", timeout_ms, "Deadline (default RERAIL_BOOT_TIMEOUT_MS)");
  exch->add_option("--die-after-step", die_after, "Fault injection: exit(3) right after this step");
  cli::BenchOptions bo;
  bench->add_option("--ranks", bo.ranks, "Rank counts to time")->delimiter(',');
  bench->add_option("--hosts", bo.hosts, "Simulated hosts (loopback addresses 127.78.0.x)");
  bench->add_option("--port-base", bo.port_base, "First planned port");
  bench->add_option("--repeats", bo.repeats, "Runs per rank count (the median is printed)");
  bench->add_option("--algorithm", bo.algorithm, "bruck, ring or both");
  CLI11_PARSE(app, argc, argv);

  if (bench->parsed()) return cli::RunBench(bo);
  JobSpec spec;
  rr::Status s = cli::SpecFromFlags(jf, &spec);
  if (!s.ok()) return cli::Fail(s);
  if (check->parsed()) {
    co.group = group;
    return cli::RunCheck(spec, co);
  }
  std::unique_ptr<Job> job;
  s = Job::Create(spec, &job);
  if (!s.ok()) return cli::Fail(s);
  if (plan->parsed()) return cli::RunPlan(*job, group);
  if (id->parsed()) return cli::RunId(*job, group, job_magic);
  return cli::RunExchange(*job, group, rank, blob, verify, timeout_ms, die_after, algorithm);
}
