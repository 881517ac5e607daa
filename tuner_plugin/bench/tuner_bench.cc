// Cost of ncclTunerPlugin_v5.getCollInfo, called the way NCCL's enqueue calls it (a 7x3 cost table
// with ignored -1 entries, nChannels in as 0), on a real rail-health board of this process.
// Issue 14 asks for < 1 µs per call; the figure is the benchmark's time per iteration.
//
//   rerail_tuner_bench [--benchmark_filter=...]
#include <benchmark/benchmark.h>
#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "rerail/rails/board.h"
#include "tuner_abi.h"

namespace {

void QuietLog(int, unsigned long, const char*, int, const char*, ...) {}

const rrTuner_v5_t* Table() {
  static const rrTuner_v5_t* t = [] {
    void* h = dlopen(RERAIL_TUNER_SO, RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) {
      fprintf(stderr, "dlopen %s: %s\n", RERAIL_TUNER_SO, dlerror());
      exit(1);
    }
    return static_cast<const rrTuner_v5_t*>(dlsym(h, "ncclTunerPlugin_v5"));
  }();
  return t;
}

// One board with 4 rails in a private directory, `failed` of them failed.
struct Board {
  std::string dir;
  std::unique_ptr<rr::rails::BoardWriter> w;
  explicit Board(int failed) {
    char tmpl[] = "/dev/shm/rerail-tuner-bench.XXXXXX";
    dir = mkdtemp(tmpl);
    setenv("RERAIL_BOARD_DIR", dir.c_str(), 1);
    if (!rr::rails::BoardWriter::Create("net", &w, dir).ok()) exit(1);
    for (int i = 0; i < 4; ++i) {
      int slot = -1;
      (void)w->AddRail("eth" + std::to_string(i), &slot);
      if (i < failed) w->SetState(slot, rr::rails::RailState::kFailed, rr::rails::RailEvent::kLinkDown);
    }
  }
  ~Board() {
    w.reset();
    rmdir(dir.c_str());
  }
};

void Run(benchmark::State& state, int failed, const char* refresh_ms) {
  Board board(failed);
  setenv("RERAIL_TUNER_REFRESH_MS", refresh_ms, 1);
  rrTunerConstants_v5_t constants{};
  for (int a = 0; a < RR_TUNER_NUM_ALGORITHMS; ++a)
    for (int p = 0; p < RR_TUNER_NUM_PROTOCOLS; ++p) {
      constants.baseLatencies[a][p] = 6.0;
      constants.hwLatencies[RR_HW_NET][a][p] = 14.0;
    }
  rrTunerNvlDomainInfo_v5_t nvl{2, 8, 8};
  void* ctx = nullptr;
  Table()->init(&ctx, 0x1234, 16, 2, QuietLog, &nvl, &constants);
  float table[RR_TUNER_NUM_ALGORITHMS][RR_TUNER_NUM_PROTOCOLS];
  size_t bytes = 1 << 20;
  for (auto _ : state) {
    for (int a = 0; a < RR_TUNER_NUM_ALGORITHMS; ++a)
      for (int p = 0; p < RR_TUNER_NUM_PROTOCOLS; ++p) table[a][p] = a >= 2 && a <= 5 ? -1.0f : 40.0f + a + p;
    int nch = 0;
    Table()->getCollInfo(ctx, RR_FUNC_ALLREDUCE, bytes, 1, reinterpret_cast<float**>(table),
                         RR_TUNER_NUM_ALGORITHMS, RR_TUNER_NUM_PROTOCOLS, 0, &nch);
    benchmark::DoNotOptimize(table);
    benchmark::DoNotOptimize(nch);
  }
  Table()->finalize(ctx);
}

void BM_GetCollInfo_Healthy(benchmark::State& s) { Run(s, 0, "100"); }
void BM_GetCollInfo_Degraded(benchmark::State& s) { Run(s, 1, "100"); }
void BM_GetCollInfo_Degraded_ReadBoardEveryCall(benchmark::State& s) { Run(s, 1, "0"); }
BENCHMARK(BM_GetCollInfo_Healthy);
BENCHMARK(BM_GetCollInfo_Degraded);
BENCHMARK(BM_GetCollInfo_Degraded_ReadBoardEveryCall);

}  // namespace

BENCHMARK_MAIN();
