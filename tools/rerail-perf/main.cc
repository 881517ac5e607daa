// rerail-perf entry point: parse flags, then either be one rank (launched by us, mpirun or srun)
// or launch the ranks. `rerail-perf netbench ...` is the two-process loopback throughput/latency
// bench (tools/netbench/netbench_cli.h, formerly rerail-netbench).
#include <cstdio>
#include <cstring>
#include <string>

#include "install_layout.h"
#include "launcher.h"
#include "netbench_cli.h"
#include "options.h"
#include "rank.h"
#include "rerail/log.h"
#include "rerail/params.h"

#ifndef RERAIL_PERF_DEFAULT_PLUGIN
#define RERAIL_PERF_DEFAULT_PLUGIN "rerail"
#endif
#ifndef RERAIL_SOURCE_DIR
#define RERAIL_SOURCE_DIR "."
#endif

namespace {

// Installed: the plugin installed beside this binary; in the build tree: the tree's own.
std::string DefaultPlugin() {
  std::string p = rr::netdrv::InstalledPlugin("net");
  return p.empty() ? RERAIL_PERF_DEFAULT_PLUGIN : p;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "netbench") == 0) return rr::netbench::CliMain(argc - 1, argv + 1, DefaultPlugin());
  rr::log::SetPrefix("rerail-perf");
  rr::perf::Options o;
  rr::Status s = rr::perf::Parse(argc, argv, &o);
  if (s.code() == rr::Code::kInProgress) {  // --help
    printf("%s", s.message().c_str());
    return 0;
  }
  if (!s.ok()) {
    fprintf(stderr, "rerail-perf: %s\n", s.message().c_str());
    return 2;
  }
  rr::Status ps = rr::Params::Load();
  if (!ps.ok()) {
    fprintf(stderr, "rerail-perf: %s\n", ps.message().c_str());
    return 2;
  }
  if (o.plugin.empty()) o.plugin = DefaultPlugin();
  if (o.netns_prefix.empty()) o.netns_prefix = rr::Params::Str(rr::ParamId::NetnsPrefix);
  if (o.rails_script.empty()) o.rails_script = rr::netdrv::InstalledScript("netns-rails.sh");
  if (o.rails_script.empty()) o.rails_script = RERAIL_SOURCE_DIR "/scripts/netns-rails.sh";
  if (o.rank >= 0) {
    if (o.rendezvous.empty()) {
      fprintf(stderr, "rerail-perf: launched as rank %d of %d (mpirun/srun) but no --rendezvous "
                      "(a socket path on a shared filesystem, host:port of rank 0, or 'boot')\n", o.rank, o.nranks);
      return 2;
    }
    return rr::perf::RankMain(o);
  }
  return rr::perf::Launch(o, argc, argv);
}
