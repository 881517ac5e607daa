// Micro-benchmark of rerail's profiler hot path, driven through the real ABI of the built .so:
//   * BM_StartStop: ns per startEvent/stopEvent pair (a ProxyStep event under a ProxyOp, as NCCL's proxy
//     thread does for every network step), on 1 and 2 threads.
//   * BM_TenMillionEvents: 10 M start/stop pairs in one go, reporting the resident-memory growth and how
//     many records were dropped (rings full while the collector thread writes the trace).
//   * --collector (instead of the benchmarks): CPU per event of recording plus writing, with rings large
//     enough that nothing is dropped.
// Figures on a shared 2-core machine are noisy; the collector competes with the benchmark for CPU.
#include <benchmark/benchmark.h>

#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "nccl_emu.h"

namespace {

using rr::prof::NcclEmu;

long RssKiB() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::strtol(line.c_str() + 6, nullptr, 10);
  return -1;
}

NcclEmu* Emu() {
  static std::unique_ptr<NcclEmu> emu = [] {
    std::string dir = "/tmp/rerail-prof-bench-" + std::to_string(getpid());
    setenv("RERAIL_PROFILE_DIR", dir.c_str(), 0);
    setenv("RERAIL_PROFILE_MASK", "coll,proxyop,proxystep", 0);
    std::unique_ptr<NcclEmu> e;
    rr::Status st = NcclEmu::Open(RERAIL_PROFILER_SO, {0xbe7c4, "bench", 1, 1, 0}, &e);
    if (!st.ok()) {
      std::fprintf(stderr, "cannot open profiler: %s\n", st.ToString().c_str());
      std::exit(1);
    }
    return e;
  }();
  return emu.get();
}

void BM_StartStop(benchmark::State& state) {
  NcclEmu* emu = Emu();
  void* op = emu->StartProxyOp(nullptr, state.thread_index(), 1, 1 << 30, 1 << 19, true);
  NcclEmu::ProxyStep slot;
  int step = 0;
  for (auto _ : state) {
    emu->StartProxyStep(&slot, op, step++);
    emu->StopProxyStep(&slot);
  }
  emu->Stop(op);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_StartStop)->Threads(1)->Threads(2)->UseRealTime();

void BM_TenMillionEvents(benchmark::State& state) {
  NcclEmu* emu = Emu();
  for (auto _ : state) {
    long before = RssKiB();
    void* op = emu->StartProxyOp(nullptr, 7, 1, 1 << 30, 1 << 19, true);
    NcclEmu::ProxyStep slot;
    for (int i = 0; i < 10'000'000; ++i) {
      emu->StartProxyStep(&slot, op, i);
      emu->StopProxyStep(&slot);
    }
    emu->Stop(op);
    long after = RssKiB();
    state.counters["rss_growth_MiB"] = static_cast<double>(after - before) / 1024.0;
    state.counters["rss_MiB"] = static_cast<double>(after) / 1024.0;
  }
  state.SetItemsProcessed(state.iterations() * 10'000'000);
}
BENCHMARK(BM_TenMillionEvents)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

double CpuSeconds() {
  rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

// --collector: how much CPU the collector thread spends per written event. Rings are made large enough
// that nothing is dropped; 1 M step events are produced, then finalize waits until all are written.
int CollectorCost() {
  setenv("RERAIL_PROFILE_RING", "4194304", 1);
  NcclEmu* emu = Emu();
  constexpr int kN = 1'000'000;
  double c0 = CpuSeconds();
  void* op = emu->StartProxyOp(nullptr, 0, 1, kN, 1 << 19, true);
  NcclEmu::ProxyStep slot;
  for (int i = 0; i < kN; ++i) {
    emu->StartProxyStep(&slot, op, i);
    emu->StopProxyStep(&slot);
  }
  emu->Stop(op);
  rr::Status st = emu->Finalize();
  double c1 = CpuSeconds();
  std::printf(
      "collector: %d events recorded and written; process CPU %.2f s (%.2f us per event, producer "
      "included); finalize %s\n",
      kN, c1 - c0, (c1 - c0) * 1e6 / kN, st.ok() ? "ok" : "failed");
  return st.ok() ? 0 : 1;
}

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "--collector") return CollectorCost();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  NcclEmu* emu = Emu();
  long rss = RssKiB();
  rr::Status st = emu->Finalize();
  std::printf("final RSS %.1f MiB; finalize %s\n", static_cast<double>(rss) / 1024.0,
              st.ok() ? "ok" : "failed");
  // What the collector kept up with: written events vs records dropped because a ring was full.
  std::ifstream f(std::string(getenv("RERAIL_PROFILE_DIR")) + "/rerail-r0-00000000000be7c4.summary.json");
  nlohmann::json sum = nlohmann::json::parse(f, nullptr, false);
  if (sum.is_object())
    std::printf(
        "collector: %llu trace events written, %llu records dropped (ring full), %llu orphan records\n",
        sum["trace_events"].get<unsigned long long>(), sum["dropped_records"].get<unsigned long long>(),
        sum["orphan_records"].get<unsigned long long>());
  benchmark::Shutdown();
  return 0;
}
