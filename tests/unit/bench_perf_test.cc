// rerail-perf additions for scripts/bench-rails.sh: timeline bin width, the completed-sends series,
// phase events, and the --timeline-bin-ms / --duration flags.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "options.h"
#include "timeline.h"

namespace rr::perf {
namespace {

constexpr uint64_t kMs = 1000000ull;

Status ParseArgs(std::vector<std::string> args, Options* o) {
  static std::string prog = "rerail-perf";
  std::vector<char*> argv{prog.data()};
  for (auto& a : args) argv.push_back(a.data());
  return Parse(static_cast<int>(argv.size()), argv.data(), o);
}

TEST(BenchPerfOptions, BinWidthAndDuration) {
  Options o;
  ASSERT_TRUE(ParseArgs({"sendrecv", "--timeline-bin-ms", "10", "--duration", "2.5"}, &o).ok());
  EXPECT_EQ(o.timeline_bin_ms, 10);
  EXPECT_DOUBLE_EQ(o.duration_s, 2.5);
  Options d;
  ASSERT_TRUE(ParseArgs({"sendrecv"}, &d).ok());
  EXPECT_EQ(d.timeline_bin_ms, 100);
  EXPECT_DOUBLE_EQ(d.duration_s, 0);
  Options bad;
  EXPECT_EQ(ParseArgs({"--timeline-bin-ms", "0"}, &bad).code(), Code::kInvalidUsage);
  EXPECT_EQ(ParseArgs({"--duration", "-1"}, &bad).code(), Code::kInvalidUsage);
  EXPECT_EQ(ParseArgs({"--duration", "abc"}, &bad).code(), Code::kInvalidUsage);
}

TEST(BenchPerfTimeline, CustomBinsCompletedSeriesAndPhases) {
  const uint64_t t0 = 5000;
  Timeline a(t0, {"rail0", "rail1"}, 10 * kMs), b(t0, {}, 10 * kMs);
  a.Add(0, 1000, t0 + 5 * kMs);   // bin 0
  a.Add(1, 500, t0 + 25 * kMs);   // bin 2
  b.AddNamed("rail1", 300, t0 + 15 * kMs);  // a board count: not a completed send
  b.Add(-1, 200, t0 + 15 * kMs);  // completed, device unknown to the rail columns (board mode)
  b.AddEvent({0.02, "phase", "timed begin sendrecv 8 B out-of-place"});
  EXPECT_EQ(a.CompletedBytes(), 1500u);
  EXPECT_EQ(b.CompletedBytes(), 200u);
  Timeline m(t0, {}, 10 * kMs);
  ASSERT_TRUE(m.Merge(a.Serialize()).ok());
  ASSERT_TRUE(m.Merge(b.Serialize()).ok());
  EXPECT_EQ(m.CompletedBytes(), 1700u);
  EXPECT_NEAR(m.GBps(0, 0.03), (1000 + 500 + 300) / 0.03 / 1e9, 1e-12);
  EXPECT_NEAR(m.LongestStallS(), 0.0, 1e-12);  // bins 0, 1, 2 all carry rail bytes

  Timeline other(t0, {}, 100 * kMs);
  Status s = other.Merge(a.Serialize());
  EXPECT_EQ(s.code(), Code::kInternalError);
  EXPECT_NE(s.message().find("bins"), std::string::npos) << s.message();

  std::string js = ::testing::TempDir() + "bench_tl.json";
  ASSERT_TRUE(m.Write(js).ok());
  nlohmann::json j = nlohmann::json::parse(std::ifstream(js));
  EXPECT_DOUBLE_EQ(j["bin_s"].get<double>(), 0.01);
  ASSERT_EQ(j["completed_gbps"].size(), 3u);
  EXPECT_NEAR(j["completed_gbps"][0].get<double>(), 1000 / 0.01 / 1e9, 1e-15);
  EXPECT_NEAR(j["completed_gbps"][1].get<double>(), 200 / 0.01 / 1e9, 1e-15);
  EXPECT_NEAR(j["completed_gbps"][2].get<double>(), 500 / 0.01 / 1e9, 1e-15);
  EXPECT_NEAR(j["t_s"][2].get<double>(), 0.02, 1e-12);
  ASSERT_EQ(j["events"].size(), 1u);
  EXPECT_EQ(j["events"][0]["kind"], "phase");
  std::remove(js.c_str());
}

}  // namespace
}  // namespace rr::perf
