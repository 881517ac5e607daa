#include "options.h"

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <map>
#include <sstream>

namespace rr::perf {

const char* CollName(Coll c) {
  switch (c) {
    case Coll::kAllReduce: return "all_reduce";
    case Coll::kAllGather: return "all_gather";
    case Coll::kReduceScatter: return "reduce_scatter";
    case Coll::kBroadcast: return "broadcast";
    case Coll::kSendRecv: return "sendrecv";
    case Coll::kAllToAll: return "alltoall";
  }
  return "?";
}
const char* TypeName(DataType t) { return t == DataType::kFloat ? "float" : "int32"; }
size_t TypeSize(DataType) { return 4; }

Status ParseSize(const std::string& s, uint64_t* bytes) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || v < 0) return Status::InvalidUsage("bad size '" + s + "' (expected e.g. 8, 64K, 128M, 1G)");
  std::string suf(end);
  double mult = 1;
  if (suf == "K" || suf == "k") mult = 1024.0;
  else if (suf == "M" || suf == "m") mult = 1024.0 * 1024;
  else if (suf == "G" || suf == "g") mult = 1024.0 * 1024 * 1024;
  else if (!suf.empty()) return Status::InvalidUsage("bad size suffix in '" + s + "' (K, M or G)");
  *bytes = static_cast<uint64_t>(v * mult);
  return Status::Ok();
}

Status ParseDurationMs(const std::string& s, uint64_t* ms) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  std::string suf(end ? end : "");
  if (end == s.c_str() || v < 0 || (suf != "s" && suf != "ms" && !suf.empty()))
    return Status::InvalidUsage("bad duration '" + s + "' (expected e.g. 2s, 1.5s, 500ms)");
  *ms = static_cast<uint64_t>(suf == "ms" ? v : v * 1000.0);
  return Status::Ok();
}

Status ParseFault(const std::string& s, FaultSpec* out) {
  FaultSpec f;
  f.text = s;
  std::map<std::string, std::string> kv;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t eq = item.find('=');
    if (eq == std::string::npos) return Status::InvalidUsage("--fault '" + s + "': '" + item + "' is not key=value");
    kv[item.substr(0, eq)] = item.substr(eq + 1);
  }
  for (const char* k : {"at", "host", "rail", "kind"})
    if (!kv.count(k)) return Status::InvalidUsage("--fault '" + s + "': missing " + k + "= (expected at=2s,host=0,rail=1,kind=down)");
  if (kv.size() != 4) return Status::InvalidUsage("--fault '" + s + "': unknown key (allowed: at, host, rail, kind)");
  RR_CHECK(ParseDurationMs(kv["at"], &f.at_ms));
  char* end = nullptr;
  f.host = static_cast<int>(std::strtol(kv["host"].c_str(), &end, 10));
  if (*end != 0 || f.host < 0) return Status::InvalidUsage("--fault '" + s + "': bad host '" + kv["host"] + "'");
  f.rail = static_cast<int>(std::strtol(kv["rail"].c_str(), &end, 10));
  if (*end != 0 || f.rail < 0) return Status::InvalidUsage("--fault '" + s + "': bad rail '" + kv["rail"] + "'");
  std::string kind = kv["kind"];
  if (kind.rfind("slow:", 0) == 0 && kind.size() > 5) {
    f.kind = "slow";
    f.rate = kind.substr(5);
  } else if (kind == "down" || kind == "blackhole" || kind == "heal") {
    f.kind = kind;
  } else {
    return Status::InvalidUsage("--fault '" + s + "': kind must be down, blackhole, slow:RATE or heal");
  }
  *out = f;
  return Status::Ok();
}

namespace {

Status ParseColls(const std::vector<std::string>& names, std::vector<Coll>* out) {
  static const std::map<std::string, Coll> kColls = {
      {"all_reduce", Coll::kAllReduce},         {"all_gather", Coll::kAllGather},
      {"reduce_scatter", Coll::kReduceScatter}, {"broadcast", Coll::kBroadcast},
      {"sendrecv", Coll::kSendRecv},            {"alltoall", Coll::kAllToAll}};
  out->clear();
  for (const std::string& list : names) {
    std::stringstream ss(list);
    std::string n;
    while (std::getline(ss, n, ',')) {
      if (n == "all") {
        for (const auto& kv : kColls) out->push_back(kv.second);
        continue;
      }
      auto it = kColls.find(n);
      if (it == kColls.end())
        return Status::InvalidUsage("unknown collective '" + n +
                                    "' (all_reduce, all_gather, reduce_scatter, broadcast, sendrecv, alltoall, all)");
      out->push_back(it->second);
    }
  }
  if (out->empty()) out->push_back(Coll::kAllReduce);
  return Status::Ok();
}

// Rank and size from mpirun/srun when launched by them (OMPI first, then PMI/Slurm).
void TakeLauncherEnv(Options* o) {
  const char* pairs[][2] = {{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"}, {"PMI_RANK", "PMI_SIZE"},
                            {"PMIX_RANK", "PMIX_SIZE"}, {"SLURM_PROCID", "SLURM_NTASKS"}};
  for (auto& p : pairs) {
    const char* r = std::getenv(p[0]);
    const char* n = std::getenv(p[1]);
    if (r && n) {
      o->rank = std::atoi(r);
      o->nranks = std::atoi(n);
      return;
    }
  }
}

}  // namespace

Status Parse(int argc, char** argv, Options* o) {
  CLI::App app{"rerail-perf: drive an NCCL net plugin like NCCL's proxy, on CPUs, with nccl-tests output"};
  std::vector<std::string> colls;
  std::string b, e, i_step, dtype = "float", op = "sum", t0, profiler;
  std::vector<std::string> faults;
  app.add_option("collective", colls, "all_reduce, all_gather, reduce_scatter, broadcast, sendrecv, alltoall, all (comma list)");
  app.add_option("-N,--nranks", o->nranks, "Rank processes to launch")->check(CLI::Range(1, 1024));
  app.add_option("--hosts", o->hosts, "Spread ranks over this many simulated hosts (network namespaces)")->check(CLI::Range(0, 64));
  app.add_option("--netns-prefix", o->netns_prefix, "Prefix of the simulated hosts (netns-rails.sh RERAIL_NETNS_PREFIX); host h is namespace <prefix>-h<h>");
  app.add_option("--rails-script", o->rails_script, "scripts/netns-rails.sh to inject --fault with");
  app.add_option("--plugin", o->plugin, "Net plugin library (path or NCCL_NET_PLUGIN-style name); default: the built rerail");
  app.add_option("-C,--channels", o->channels, "Channels (connections per peer); channel c uses device c mod ndev")->check(CLI::Range(1, 64));
  app.add_option("-b,--minbytes", b, "Minimum size (K/M/G suffixes)");
  app.add_option("-e,--maxbytes", e, "Maximum size");
  app.add_option("-f,--stepfactor", o->step_factor, "Multiplication factor between sizes")->check(CLI::Range(1.0001, 1e6));
  app.add_option("-i,--stepbytes", i_step, "Fixed increment between sizes (instead of -f)");
  app.add_option("-n,--iters", o->iters, "Timed iterations per size")->check(CLI::Range(1, 1000000));
  app.add_option("-w,--warmup_iters", o->warmup, "Warm-up iterations")->check(CLI::Range(0, 1000000));
  app.add_option("-c,--check", o->check, "Verified iterations per size (0: no verification)")->check(CLI::Range(0, 1000));
  app.add_option("-d,--datatype", dtype, "float or int32");
  app.add_option("-o,--op", op, "Reduction operation: sum");
  app.add_option("-r,--root", o->root, "Root rank of broadcast");
  app.add_option("-J,--output_file", o->json_path, "Also write results as JSON to this file");
  app.add_option("--timeline", o->timeline_path, "Throughput per rail per bin (--timeline-bin-ms) (.csv or .json)");
  app.add_option("--timeline-bin-ms", o->timeline_bin_ms, "Width of a --timeline bin in ms (default 100)")->check(CLI::Range(1, 60000));
  app.add_option("--duration", o->duration_s, "Seconds each timed loop (one per size and placement) runs, instead of -n iterations")
      ->check(CLI::Range(0.001, 86400.0));
  app.add_option("--fault", faults, "at=2s,host=0,rail=1,kind=down|blackhole|slow:RATE|heal (repeatable)");
  app.add_option("--profiler", o->profiler, "Profiler plugin to load (path, e.g. libnccl-profiler-rerail.so); NCCL's profiler events are emulated and the net plugin gets its callback");
  app.add_option("--timeout", o->timeout_s, "Abort the whole run after this many seconds")->check(CLI::Range(1, 86400));
  app.add_flag("--no-progress", o->quiet_progress, "No progress lines on stderr");
  app.add_option("--rank", o->rank, "(internal) this process's rank");
  app.add_option("--rendezvous", o->rendezvous, "Out-of-band exchange when launched by mpirun/srun: a unix socket path (shared filesystem), host:port of rank 0 (TCP), or 'boot' (the bootstrap's rootless all-gather over RERAIL_HOSTS/RERAIL_PORT_BASE)");
  app.add_option("--t0-ns", t0, "(internal) common start time");
  app.add_option("--events", o->events_path, "(internal) fault event file");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    return Status(Code::kInProgress, app.help());
  } catch (const CLI::ParseError& err) {
    return Status::InvalidUsage(std::string(err.what()) + " (see --help)");
  }
  RR_CHECK(ParseColls(colls, &o->colls));
  if (!b.empty()) RR_CHECK(ParseSize(b, &o->min_bytes));
  if (!e.empty()) RR_CHECK(ParseSize(e, &o->max_bytes));
  else if (!b.empty()) o->max_bytes = o->min_bytes;
  if (!i_step.empty()) RR_CHECK(ParseSize(i_step, &o->step_bytes));
  if (o->max_bytes < o->min_bytes)
    return Status::InvalidUsage("-e (" + std::to_string(o->max_bytes) + ") is smaller than -b (" + std::to_string(o->min_bytes) + ")");
  if (dtype == "float" || dtype == "float32") o->dtype = DataType::kFloat;
  else if (dtype == "int32" || dtype == "int") o->dtype = DataType::kInt32;
  else return Status::InvalidUsage("-d '" + dtype + "': supported types are float and int32");
  if (op != "sum") return Status::InvalidUsage("-o '" + op + "': the supported reduction is sum");
  for (const std::string& f : faults) {
    FaultSpec spec;
    RR_CHECK(ParseFault(f, &spec));
    o->faults.push_back(spec);
  }
  if (!o->faults.empty() && o->hosts == 0)
    return Status::InvalidUsage("--fault needs --hosts (faults are injected into simulated hosts' rails)");
  for (const FaultSpec& f : o->faults)
    if (f.host >= o->hosts) return Status::InvalidUsage("--fault '" + f.text + "': host " + std::to_string(f.host) + " >= --hosts");
  if (!t0.empty()) o->t0_ns = std::strtoull(t0.c_str(), nullptr, 10);
  if (o->rank < 0) TakeLauncherEnv(o);
  if (o->root < 0 || o->root >= o->nranks) return Status::InvalidUsage("-r " + std::to_string(o->root) + " is not a rank");
  if (o->hosts > o->nranks) return Status::InvalidUsage("--hosts is larger than -N");
  return Status::Ok();
}

}  // namespace rr::perf
