// rerail-top: shows every rail-health board on this host, live or once (text or JSON).
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>

#include "rerail/clock.h"
#include "rerail/log.h"
#include "rerail/params.h"
#include "top_view.h"

namespace {

std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop = true; }

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"rerail-top: live rail health of every rerail process on this host (rail-health boards)"};
  bool once = false, json = false, keep_stale = false;
  int interval_ms = 1000, count = 0;
  std::string dir;
  app.add_flag("--once", once, "Print one snapshot and exit");
  app.add_flag("--json", json, "JSON output (with --once: one document; live: one document per line)");
  app.add_option("--interval", interval_ms, "Refresh period in ms (live mode)")->check(CLI::Range(50, 3600000));
  app.add_option("--count", count, "Stop after this many refreshes (live mode; 0 = until Ctrl-C)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--dir", dir, "Board directory (default: RERAIL_BOARD_DIR, /dev/shm)");
  app.add_flag("--keep-stale", keep_stale, "Show boards of dead processes instead of removing them");
  CLI11_PARSE(app, argc, argv);

  rr::log::SetPrefix("rerail-top");
  (void)rr::Params::Load();  // a malformed RERAIL_* value is reported by Load() and its default used
  if (dir.empty()) dir = rr::Params::Str(rr::ParamId::BoardDir);
  if (access(dir.c_str(), R_OK | X_OK) != 0) {
    std::fprintf(stderr, "rerail-top: cannot read board directory '%s': %s\n", dir.c_str(), strerror(errno));
    return 1;
  }
  signal(SIGINT, OnSignal);
  signal(SIGTERM, OnSignal);

  rr::top::RateTracker rates;
  const bool live = !once;
  for (int n = 0; !g_stop; ++n) {
    rr::rails::ScanResult scan = rr::rails::ScanBoards(dir, !keep_stale);
    uint64_t now = rr::NowNs();
    auto r = rates.Update(scan, now);
    if (json) {
      std::cout << rr::top::RenderJson(scan, r, dir, now).dump(once ? 2 : -1) << std::endl;
    } else {
      if (live && isatty(STDOUT_FILENO)) std::cout << "\x1b[H\x1b[2J";  // home + clear screen
      std::cout << rr::top::RenderText(scan, r, dir, now) << std::flush;
    }
    if (once || (count > 0 && n + 1 >= count)) break;
    for (int slept = 0; slept < interval_ms && !g_stop; slept += 50) usleep(50 * 1000);
  }
  return 0;
}
