// rerail-params: print or check the RERAIL_* parameter table.
//   rerail-params            every parameter with its current value (from the environment)
//   rerail-params --markdown the README table
//   rerail-params --check    exit 1 with a clear message when a RERAIL_* value is malformed
#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "rerail/params.h"

extern char** environ;

int main(int argc, char** argv) {
  CLI::App app{"rerail-params: the RERAIL_* configuration table"};
  bool markdown = false, check = false;
  app.add_flag("--markdown", markdown, "Print the table as Markdown (README)");
  app.add_flag("--check", check, "Validate the RERAIL_* variables in the environment");
  CLI11_PARSE(app, argc, argv);

  if (markdown) {
    std::fputs(rr::Params::Markdown().c_str(), stdout);
    return 0;
  }
  rr::Status st = rr::Params::Load();
  // A RERAIL_ variable that is not in the table is most likely a typo.
  int unknown = 0;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "RERAIL_", 7) != 0) continue;
    std::string name(*e + 7, std::strcspn(*e + 7, "="));
    bool known = false;
    for (const auto& d : rr::Params::Table()) known = known || name == d.name;
    if (!known && name != "NETNS_PREFIX") {
      std::fprintf(stderr, "rerail-params: RERAIL_%s is not a rerail parameter\n", name.c_str());
      ++unknown;
    }
  }
  if (!check) {
    for (const std::string& line : rr::Params::Dump()) std::printf("%s\n", line.c_str());
  }
  if (!st.ok()) {
    std::fprintf(stderr, "rerail-params: %s\n", st.message().c_str());
    return 1;
  }
  return (check && unknown > 0) ? 1 : 0;
}
