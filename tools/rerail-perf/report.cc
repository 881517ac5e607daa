#include "report.h"

namespace rr::perf {
namespace {

const char* RedopName(Coll c) {
  return (c == Coll::kAllReduce || c == Coll::kReduceScatter) ? "sum" : "none";
}

std::string TimeStr(double us) {
  char b[32];
  snprintf(b, sizeof(b), us >= 10000.0 ? "%7.0f" : (us >= 100.0 ? "%7.1f" : "%7.2f"), us);
  return b;
}

}  // namespace

void Report::Preamble(const Options& o, Coll c, const std::string& plugin_desc, const std::vector<std::string>& rank_lines) {
  fprintf(out_, "# rerail-perf %s: nranks %d channels %d minBytes %llu maxBytes %llu step: ", CollName(c), o.nranks,
          o.channels, static_cast<unsigned long long>(o.min_bytes), static_cast<unsigned long long>(o.max_bytes));
  if (o.step_bytes) fprintf(out_, "%llu(bytes)", static_cast<unsigned long long>(o.step_bytes));
  else fprintf(out_, "%g(factor)", o.step_factor);
  fprintf(out_, " warmup iters: %d ", o.warmup);
  if (o.duration_s > 0) fprintf(out_, "duration: %gs", o.duration_s);  // --duration replaces -n
  else fprintf(out_, "iters: %d", o.iters);
  fprintf(out_, " validation: %d\n#\n# %s\n#\n# Using ranks\n", o.check, plugin_desc.c_str());
  for (const std::string& l : rank_lines) fprintf(out_, "#  %s\n", l.c_str());
  fprintf(out_, "#\n");
}

void Report::Header() {
  fprintf(out_, "# %10s  %12s  %8s  %6s  %6s           out-of-place                         in-place          \n", "", "", "", "", "");
  fprintf(out_, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "size", "count", "type",
          "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong");
  fprintf(out_, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "(B)", "(elements)", "", "", "",
          "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
  fflush(out_);
  bw_sum_ = 0, bw_count_ = 0, wrong_ = 0;
}

void Report::Add(const Row& r) {
  fprintf(out_, "%12zu  %12zu  %8s  %6s  %6d", r.size, r.count, TypeName(r.dtype), RedopName(r.coll), r.root);
  for (int p = 0; p < 2; ++p) {
    const Cell& c = r.cell[p];
    std::string wrong = c.wrong < 0 ? "N/A" : std::to_string(c.wrong);
    fprintf(out_, "  %7s  %6.2f  %6.2f  %6s", TimeStr(c.time_us).c_str(), c.algbw, c.busbw, wrong.c_str());
    bw_sum_ += c.busbw, ++bw_count_;
    if (c.wrong > 0) wrong_ += static_cast<uint64_t>(c.wrong);
    json_.push_back({{"collective", CollName(r.coll)}, {"size", r.size}, {"count", r.count},
                     {"type", TypeName(r.dtype)}, {"redop", RedopName(r.coll)}, {"root", r.root},
                     {"placement", p == 0 ? "out-of-place" : "in-place"}, {"time_us", c.time_us},
                     {"algbw_gbps", c.algbw}, {"busbw_gbps", c.busbw},
                     {"wrong", c.wrong < 0 ? nlohmann::json(nullptr) : nlohmann::json(c.wrong)}});
  }
  fprintf(out_, "\n");
  fflush(out_);
}

bool Report::Footer() {
  fprintf(out_, "# Out of bounds values : %llu %s\n", static_cast<unsigned long long>(wrong_), wrong_ ? "FAILED" : "OK");
  fprintf(out_, "# Avg bus bandwidth    : %g \n#\n", bw_count_ ? bw_sum_ / bw_count_ : 0.0);
  fflush(out_);
  total_wrong_ += wrong_;
  return wrong_ == 0;
}

}  // namespace rr::perf
