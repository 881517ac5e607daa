// Helpers shared by the profiler functional tests: output paths, JSON loading, a trace index, and a
// synthetic NCCL workload driven through rr::prof::NcclEmu (several threads, like NCCL's app and proxy
// threads) with rerail net events emitted through NcclEmu::NetCallback() by a NetEventEmitter.
#pragma once

#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace rr::prof::test {

// One output directory per test process: RERAIL_PROFILE_DIR when the test runner set it, else a fresh
// /tmp directory (exported before the profiler reads it, and removed at exit when every test passed).
inline std::string ProcessDir() {
  static const std::string dir = [] {
    const char* env = std::getenv("RERAIL_PROFILE_DIR");
    if (env != nullptr && *env != '\0') return std::string(env);
    std::string d = "/tmp/rerail-prof-test-" + std::to_string(getpid());
    setenv("RERAIL_PROFILE_DIR", d.c_str(), 1);
    return d;
  }();
  return dir;
}

class OutputDirCleaner : public ::testing::Environment {
 public:
  void TearDown() override {
    if (!::testing::UnitTest::GetInstance()->Passed()) {
      std::fprintf(stderr, "profiler outputs kept in %s\n", ProcessDir().c_str());
      return;
    }
    std::error_code ec;
    std::filesystem::remove_all(ProcessDir(), ec);
  }
};
inline const bool kCleanerRegistered =
    (::testing::AddGlobalTestEnvironment(new OutputDirCleaner()), ProcessDir(), true);

inline std::string Base(int rank, uint64_t comm) {
  char b[32];
  std::snprintf(b, sizeof(b), "%016" PRIx64, comm);
  return ProcessDir() + "/rerail-r" + std::to_string(rank) + "-" + b;
}

inline nlohmann::json LoadJson(const std::string& path) {
  std::ifstream f(path);
  if (!f) return nlohmann::json();
  std::stringstream ss;
  ss << f.rdbuf();
  return nlohmann::json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
}

inline std::string LoadText(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Trace events (no metadata) indexed by args.id.
struct TraceIndex {
  std::map<uint64_t, nlohmann::json> by_id;
  std::map<std::string, std::vector<uint64_t>> by_cat;
  std::map<uint64_t, std::vector<uint64_t>> children;  // parent id -> child ids
  size_t metadata = 0;

  explicit TraceIndex(const nlohmann::json& trace) {
    for (const auto& e : trace.at("traceEvents")) {
      if (e.at("ph") == "M") {
        ++metadata;
        continue;
      }
      uint64_t id = e.at("args").at("id").get<uint64_t>();
      by_id[id] = e;
      by_cat[e.at("cat").get<std::string>()].push_back(id);
      children[e.at("args").at("parent").get<uint64_t>()].push_back(id);
    }
  }
  size_t Count(const std::string& cat) const {
    auto it = by_cat.find(cat);
    return it == by_cat.end() ? 0 : it->second.size();
  }
  const nlohmann::json& At(uint64_t id) const { return by_id.at(id); }
  uint64_t Parent(uint64_t id) const { return At(id).at("args").at("parent").get<uint64_t>(); }
  std::string Cat(uint64_t id) const { return At(id).at("cat").get<std::string>(); }
  // True when the complete events of every (pid, tid) nest perfectly (what Perfetto requires);
  // otherwise *why names the first two that overlap.
  bool TracksNest(std::string* why) const {
    std::map<std::pair<int, int>, std::vector<std::pair<double, double>>> spans;
    for (const auto& [id, e] : by_id)
      if (e.at("ph") == "X")
        spans[{e.at("pid").get<int>(), e.at("tid").get<int>()}].push_back(
            {e.at("ts").get<double>(), e.at("ts").get<double>() + e.at("dur").get<double>()});
    for (auto& [track, v] : spans) {
      std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) {
        return a.first != b.first ? a.first < b.first : a.second > b.second;
      });
      std::vector<double> open_ends;
      for (const auto& [b, e] : v) {
        while (!open_ends.empty() && open_ends.back() <= b + 1e-6) open_ends.pop_back();
        if (!open_ends.empty() && e > open_ends.back() + 1e-6) {
          *why = "tid " + std::to_string(track.second) + ": [" + std::to_string(b) + ", " +
                 std::to_string(e) + "] overlaps a span ending at " + std::to_string(open_ends.back());
          return false;
        }
        open_ends.push_back(e);
      }
    }
    return true;
  }
  double End(uint64_t id) const {
    const auto& e = At(id);
    return e.at("ts").get<double>() + (e.contains("dur") ? e.at("dur").get<double>() : 0.0);
  }
};

}  // namespace rr::prof::test
