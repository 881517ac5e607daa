#include "rank.h"

#include <sys/resource.h>
#include <unistd.h>
#include <xmmintrin.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>

#include "board_source.h"
#include "comm.h"
#include "engine.h"
#include "oob.h"
#include "report.h"
#include "rerail/clock.h"
#include "rerail/log.h"
#include "rerail/version.h"
#include "timeline.h"
#include "verify.h"

namespace rr::perf {
namespace {

constexpr int kSetupTimeoutMs = 60000;
constexpr uint64_t kProgressEveryNs = 5000000000ull;

class RankRunner {
 public:
  explicit RankRunner(const Options& o) : o_(o), report_(stdout) {}
  Status Setup();
  Status RunColl(Coll c);
  Status Finish();
  bool AnyWrong() const { return report_.TotalWrong() > 0; }

 private:
  std::vector<size_t> Sizes() const;
  Status RunSize(Coll c, size_t size, Row* row);
  Status TimeIt(const Plan& plan, const std::vector<Conn*>& conns, char* in, char* out, Cell* cell);
  Status TimedLoop(const Plan& plan, const std::vector<Conn*>& conns, char* in, char* out, int* iters);
  Status Check(const Plan& plan, const std::vector<Conn*>& conns, char* in, char* out, Cell* cell);
  void Phase(const char* what, const Plan& plan);
  Status CpuReport(nlohmann::json* out);
  void Buffers(const Plan& plan, char** in, char** out);
  void MaybeProgress(const Plan& plan, int iter);

  const Options& o_;
  Report report_;
  std::unique_ptr<Oob> oob_;
  std::unique_ptr<prof::NcclEmu> emu_;  // --profiler; outlives comm_ (the plugin holds its callback)
  std::unique_ptr<Comm> comm_;
  std::unique_ptr<Timeline> timeline_;
  std::unique_ptr<Engine> engine_;
  BoardSource board_;
  std::vector<float> buf_a_, buf_b_;  // float storage keeps 4-byte alignment for both types
  Deadline deadline_;
  uint64_t last_progress_ns_ = 0, start_ns_ = 0;
  uint32_t seed_ = 1;
};

std::vector<size_t> RankRunner::Sizes() const {
  std::vector<size_t> s;
  for (uint64_t b = o_.min_bytes; b <= o_.max_bytes;) {
    s.push_back(b);
    uint64_t next = o_.step_bytes ? b + o_.step_bytes : static_cast<uint64_t>(b * o_.step_factor);
    if (next <= b) next = b + 1;
    b = next;
  }
  return s;
}

Status RankRunner::Setup() {
  _mm_setcsr(_mm_getcsr() | 0x8040);  // flush denormals: timed runs reduce unverified data
  Comm::SetLogRank(o_.rank);
  start_ns_ = NowNs();
  deadline_ = Deadline::AfterMs(static_cast<uint64_t>(o_.timeout_s) * 1000);
  if (o_.rendezvous == "boot") RR_CHECK(MakeBootOob(o_.rank, o_.nranks, kSetupTimeoutMs, &oob_));
  else RR_CHECK(MakeSocketOob(o_.rendezvous, o_.rank, o_.nranks, kSetupTimeoutMs, &oob_));
  std::vector<ConnKey> keys;
  for (Coll c : o_.colls)
    for (const ConnKey& k : ConnsFor(c, o_.nranks, o_.rank, o_.channels))
      if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
  rrNcclProfilerCallback_t prof = nullptr;
  if (!o_.profiler.empty()) {
    prof::NcclEmu::CommInfo ci{Comm::CommId(o_.nranks), "rerail-perf", std::max(o_.hosts, 1), o_.nranks, o_.rank};
    Status st = prof::NcclEmu::Open(o_.profiler, ci, &emu_);
    if (!st.ok()) return Status(st.code(), "--profiler '" + o_.profiler + "': " + st.message());
    // Same signature; NCCL's callback type returns ncclResult_t, an int-sized enum.
    prof = reinterpret_cast<rrNcclProfilerCallback_t>(prof::NcclEmu::NetCallback());
  }
  RR_CHECK(Comm::Setup(o_.plugin, oob_.get(), keys, kSetupTimeoutMs, prof, &comm_));
  // Per-rail bytes from the plugin's board when it publishes one, else per NCCL device.
  board_.Discover();
  timeline_ = std::make_unique<Timeline>(o_.t0_ns ? o_.t0_ns : start_ns_,
                                         board_.Active() ? std::vector<std::string>{} : comm_->dev_names(),
                                         static_cast<uint64_t>(o_.timeline_bin_ms) * 1000000ull);
  Timeline* tl = timeline_.get();
  BoardSource* board = &board_;
  engine_ = std::make_unique<Engine>(
      comm_.get(), o_.dtype, [tl](int dev, size_t b) { tl->Add(dev, b, NowNs()); },
      [tl, board] { board->Sample(NowNs(), tl); });
  engine_->SetProfiler(emu_.get(), o_.channels);
  return Status::Ok();
}

void RankRunner::Buffers(const Plan& plan, char** in, char** out) {
  size_t need = std::max(plan.in_bytes, plan.out_bytes) / sizeof(float) + 1;
  if (buf_a_.size() < need) buf_a_.resize(need), buf_b_.resize(need);
  char* a = reinterpret_cast<char*>(buf_a_.data());
  char* b = reinterpret_cast<char*>(buf_b_.data());
  if (plan.in_place) *in = a + plan.in_offset, *out = a + plan.out_offset;
  else *in = a, *out = b;
}

void RankRunner::MaybeProgress(const Plan& plan, int iter) {
  if (o_.rank != 0 || o_.quiet_progress) return;
  uint64_t now = NowNs();
  if (last_progress_ns_ == 0) last_progress_ns_ = start_ns_;
  if (now - last_progress_ns_ < kProgressEveryNs) return;
  last_progress_ns_ = now;
  fprintf(stderr, "# progress: %s %zu B %s iteration %d/%d, %.0f s elapsed\n", CollName(plan.coll), plan.size_bytes,
          plan.in_place ? "in-place" : "out-of-place", iter, o_.duration_s > 0 ? 0 : o_.iters, (now - start_ns_) * 1e-9);
}

// Timeline marks around timed loops, so an analysis can tell the plugin's stalls from the gaps
// between loops (barriers, input fill, verification).
void RankRunner::Phase(const char* what, const Plan& plan) {
  if (o_.rank != 0) return;
  timeline_->AddEvent({(static_cast<double>(NowNs()) - timeline_->t0_ns()) * 1e-9, "phase",
                       std::string("timed ") + what + " " + CollName(plan.coll) + " " + std::to_string(plan.size_bytes) +
                           " B " + (plan.in_place ? "in-place" : "out-of-place")});
}

// -n iterations, or with --duration as many as fit: every rank reports its elapsed time after each
// iteration and all stop together once the slowest saw the duration pass (the ranks must agree on
// the count, or one would wait for a collective the others never start).
Status RankRunner::TimedLoop(const Plan& plan, const std::vector<Conn*>& conns, char* in, char* out, int* iters) {
  uint64_t t = NowNs();
  for (int i = 0;; ++i) {
    if (o_.duration_s <= 0 && i >= o_.iters) return Status::Ok();
    RR_CHECK(engine_->Run(plan, conns, in, out, deadline_));
    *iters = i + 1;
    MaybeProgress(plan, i + 1);
    if (o_.duration_s <= 0) continue;
    std::vector<double> elapsed;
    RR_CHECK(oob_->AllGatherDouble((NowNs() - t) * 1e-9, &elapsed));
    if (*std::max_element(elapsed.begin(), elapsed.end()) >= o_.duration_s) return Status::Ok();
  }
}

Status RankRunner::TimeIt(const Plan& plan, const std::vector<Conn*>& conns, char* in, char* out, Cell* cell) {
  VerifyArgs va{plan.coll, o_.dtype, o_.nranks, o_.rank, o_.root, plan.count, 0};
  FillInput(va, in, plan.in_bytes);
  RR_CHECK(oob_->Barrier());
  uint64_t t = NowNs();
  int iters = 0;
  Phase("begin", plan);
  RR_CHECK(TimedLoop(plan, conns, in, out, &iters));
  Phase("end", plan);
  double us = (NowNs() - t) / 1e3 / iters;
  std::vector<double> all;
  RR_CHECK(oob_->AllGatherDouble(us, &all));
  double sum = 0;
  for (double v : all) sum += v;
  cell->time_us = sum / all.size();
  cell->algbw = cell->time_us > 0 ? plan.size_bytes / (cell->time_us * 1e3) : 0;
  cell->busbw = cell->algbw * BusBwFactor(plan.coll, o_.nranks);
  return Status::Ok();
}

Status RankRunner::Check(const Plan& plan, const std::vector<Conn*>& conns, char* in, char* out, Cell* cell) {
  if (o_.check == 0) return Status::Ok();
  uint64_t wrong = 0;
  for (int c = 0; c < o_.check; ++c) {
    VerifyArgs va{plan.coll, o_.dtype, o_.nranks, o_.rank, o_.root, plan.count, ++seed_};
    Poison(va, out, plan.out_bytes);
    FillInput(va, in, plan.in_bytes);
    RR_CHECK(oob_->Barrier());
    RR_CHECK(engine_->Run(plan, conns, in, out, deadline_));
    wrong += CountWrong(va, out, plan.out_bytes);
  }
  uint64_t total = 0;
  RR_CHECK(oob_->SumU64(wrong, &total));
  cell->wrong = static_cast<int64_t>(total);
  return Status::Ok();
}

Status RankRunner::RunSize(Coll c, size_t size, Row* row) {
  for (int p = 0; p < 2; ++p) {
    Plan plan = BuildPlan({c, size, TypeSize(o_.dtype), o_.nranks, o_.rank, o_.channels, o_.root, p == 1});
    std::vector<Conn*> conns;
    RR_CHECK(engine_->Bind(plan, &conns));
    char *in, *out;
    Buffers(plan, &in, &out);
    RR_CHECK(TimeIt(plan, conns, in, out, &row->cell[p]));
    RR_CHECK(Check(plan, conns, in, out, &row->cell[p]));
    row->size = plan.size_bytes, row->count = plan.count;
  }
  row->coll = c, row->dtype = o_.dtype, row->root = c == Coll::kBroadcast ? o_.root : -1;
  return Status::Ok();
}

Status RankRunner::RunColl(Coll c) {
  std::vector<std::string> lines;
  char host[64] = {0};
  gethostname(host, sizeof(host) - 1);
  std::string me = "Rank " + std::to_string(o_.rank) + " Pid " + std::to_string(getpid()) + " on " + host;
  RR_CHECK(oob_->AllGather(me, &lines));
  if (o_.rank == 0) {
    std::string devs;
    for (const std::string& d : comm_->dev_names()) devs += (devs.empty() ? "" : ", ") + d;
    std::string desc = std::string("rerail ") + Version() + ": plugin " + std::string(comm_->net()->Name()) + " (ncclNetPlugin_v" +
                       std::to_string(comm_->net()->Version()) + ") from " + comm_->net()->Path() + "; devices: " +
                       devs + "; channel c uses device c mod " + std::to_string(comm_->ndev());
    report_.Preamble(o_, c, desc, lines);
  }
  // Warm-up at the largest size (connections, plugin buffers), as nccl-tests does.
  if (o_.warmup > 0) {
    Plan plan = BuildPlan({c, o_.max_bytes, TypeSize(o_.dtype), o_.nranks, o_.rank, o_.channels, o_.root, false});
    std::vector<Conn*> conns;
    RR_CHECK(engine_->Bind(plan, &conns));
    char *in, *out;
    Buffers(plan, &in, &out);
    for (int i = 0; i < o_.warmup; ++i) RR_CHECK(engine_->Run(plan, conns, in, out, deadline_));
  }
  if (o_.rank == 0) report_.Header();
  for (size_t size : Sizes()) {
    Row row;
    RR_CHECK(RunSize(c, size, &row));
    if (o_.rank == 0) report_.Add(row);
  }
  if (o_.rank == 0) report_.Footer();
  return Status::Ok();
}

// CPU seconds of every rank process (all threads: the plugin's included) against the bytes moved
// over the network (payload of every completed send), printed by rank 0 as nccl-tests-style
// comment lines.
Status RankRunner::CpuReport(nlohmann::json* out) {
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  char mine[96];
  snprintf(mine, sizeof(mine), "%.6f %.6f %llu", ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6,
           ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6,
           static_cast<unsigned long long>(timeline_->CompletedBytes()));
  std::vector<std::string> all;
  RR_CHECK(oob_->AllGather(mine, &all));
  double user = 0, sys = 0, bytes = 0;
  for (const std::string& a : all) {
    double u = 0, s = 0, b = 0;
    if (sscanf(a.c_str(), "%lf %lf %lf", &u, &s, &b) != 3) return Status::Internal("CPU report: bad blob '" + a + "'");
    user += u, sys += s, bytes += b;
  }
  double per_gb = bytes > 0 ? (user + sys) / (bytes / 1e9) : 0;
  if (o_.rank == 0) {
    fprintf(stdout, "# Bytes moved: %.0f (%.3f GB, every rank's completed sends)\n", bytes, bytes / 1e9);
    fprintf(stdout, "# CPU: user %.2f s, sys %.2f s, per GB moved: %.3f s\n", user, sys, per_gb);
    fflush(stdout);
  }
  *out = {{"user_s", user}, {"sys_s", sys}, {"bytes_moved", bytes}, {"cpu_s_per_gb", per_gb}};
  return Status::Ok();
}

Status RankRunner::Finish() {
  if (emu_) RR_CHECK(emu_->Finalize());  // writes this rank's trace, summary and textfile
  nlohmann::json cpu;
  RR_CHECK(CpuReport(&cpu));
  if (board_.Active()) {
    board_.Sample(NowNs(), timeline_.get(), /*force=*/true);
    timeline_->AddMeta("resent_bytes", board_.ResentBytes());
  }
  timeline_->AddMeta("ranks_with_rail_counters", board_.Active() ? 1 : 0);
  for (const PluginWarning& w : Comm::PluginWarnings())
    timeline_->AddEvent({(static_cast<double>(w.t_ns) - timeline_->t0_ns()) * 1e-9, "plugin",
                         "rank " + std::to_string(o_.rank) + ": " + w.text});
  std::vector<std::string> blobs;
  RR_CHECK(oob_->AllGather(timeline_->Serialize(), &blobs));
  if (o_.rank != 0) return Status::Ok();
  Timeline merged(timeline_->t0_ns(), {}, timeline_->bin_ns());
  for (const std::string& b : blobs) RR_CHECK(merged.Merge(b));
  if (!o_.events_path.empty())
    for (TimelineEvent& e : ReadFaultEvents(o_.events_path)) merged.AddEvent(std::move(e));
  if (!o_.timeline_path.empty()) RR_CHECK(merged.Write(o_.timeline_path));
  if (!o_.json_path.empty()) {
    std::ofstream f(o_.json_path);
    nlohmann::json j{{"tool", "rerail-perf"}, {"version", Version()}, {"nranks", o_.nranks}, {"channels", o_.channels},
                     {"plugin", comm_->net()->Path()}, {"results", report_.Json()},
                     {"out_of_bounds", report_.TotalWrong()}, {"cpu", cpu}};
    f << j.dump(1) << "\n";
    if (!f) return Status::InvalidUsage("-J: cannot write '" + o_.json_path + "'");
  }
  return Status::Ok();
}

}  // namespace

int RankMain(const Options& o) {
  RankRunner r(o);
  Status s = r.Setup();
  for (size_t i = 0; s.ok() && i < o.colls.size(); ++i) s = r.RunColl(o.colls[i]);
  if (s.ok()) s = r.Finish();
  if (!s.ok()) {
    RR_WARN("rerail-perf rank %d: %s", o.rank, s.ToString().c_str());
    return 2;
  }
  return r.AnyWrong() ? 1 : 0;
}

}  // namespace rr::perf
