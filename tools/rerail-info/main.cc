// rerail-info: version, plugins, transports, devices (as NCCL's getProperties sees them) and every
// RERAIL_* parameter with its effective value and source. Also the former rerail-params:
//   rerail-info                  everything, as text
//   rerail-info --json           the same as one JSON document
//   rerail-info --params         only the RERAIL_* parameters (no plugin is loaded)
//   rerail-info --markdown       the README table of parameters
//   rerail-info --check          exit 1 with a clear message when a RERAIL_* variable is malformed or unknown
// Exit status: 0 ok, 1 the net plugin did not load/init/report devices or --check failed, 2 bad usage.
#include <CLI/CLI.hpp>

#include <cstdio>

#include "info.h"
#include "install_layout.h"
#include "rerail/log.h"
#include "rerail/params.h"

#ifndef RERAIL_INFO_NET_SO
#define RERAIL_INFO_NET_SO "rerail"
#endif
#ifndef RERAIL_INFO_TUNER_SO
#define RERAIL_INFO_TUNER_SO "libnccl-tuner-rerail.so"
#endif
#ifndef RERAIL_INFO_PROFILER_SO
#define RERAIL_INFO_PROFILER_SO "libnccl-profiler-rerail.so"
#endif

namespace {

// An installed rerail-info reports the plugins installed beside it; in the build tree, the tree's own.
std::string Default(const char* kind, const char* built) {
  std::string p = rr::netdrv::InstalledPlugin(kind);
  return p.empty() ? built : p;
}

int Check() {
  rr::Status st = rr::Params::Load();
  int bad = 0;
  if (!st.ok()) {
    std::fprintf(stderr, "rerail-info: %s\n", st.message().c_str());
    ++bad;
  }
  for (const std::string& name : rr::Params::UnknownInEnv()) {
    std::fprintf(stderr, "rerail-info: RERAIL_%s is not a rerail parameter\n", name.c_str());
    ++bad;
  }
  return bad ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  rr::log::SetPrefix("rerail-info");
  CLI::App app{"rerail-info: what NCCL sees from rerail on this host (version, plugins, devices, RERAIL_* values)"};
  rr::info::Paths paths{Default("net", RERAIL_INFO_NET_SO), Default("tuner", RERAIL_INFO_TUNER_SO),
                        Default("profiler", RERAIL_INFO_PROFILER_SO)};
  bool json = false, params_only = false, markdown = false, check = false;
  app.add_option("--plugin", paths.net, "Net plugin to load (file, or a name like NCCL_NET_PLUGIN)")
      ->capture_default_str();
  app.add_option("--tuner", paths.tuner, "Tuner plugin to check ('' to skip)")->capture_default_str();
  app.add_option("--profiler", paths.profiler, "Profiler plugin to check ('' to skip)")->capture_default_str();
  app.add_flag("--json", json, "Print one JSON document");
  app.add_flag("--params", params_only, "Only the RERAIL_* parameters (loads no plugin)");
  app.add_flag("--markdown", markdown, "Print the RERAIL_* table as Markdown (README)");
  app.add_flag("--check", check, "Validate the RERAIL_* variables in the environment (exit 1 if not)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (markdown) {
    if (json || params_only || check) {
      std::fprintf(stderr, "rerail-info: --markdown takes no other flag\n");
      return 2;
    }
    std::fputs(rr::Params::Markdown().c_str(), stdout);
    return 0;
  }
  if (check) return Check();

  nlohmann::json doc;
  if (params_only) {
    rr::info::Paths none{"", "", ""};
    doc = rr::info::Collect(none, /*load_net=*/false);
  } else {
    doc = rr::info::Collect(paths, /*load_net=*/true);
  }
  if (json) {
    std::printf("%s\n", doc.dump(2).c_str());
  } else {
    std::fputs(rr::info::Text(doc, params_only).c_str(), stdout);
  }
  return (params_only || rr::info::Ok(doc)) ? 0 : 1;
}
