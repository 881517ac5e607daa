// Unit tests: rerail-top rendering and the binary's --once --json / live / stale-board behaviour.
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "rerail/clock.h"
#include "rerail/rails/board.h"
#include "top_view.h"

namespace {

using nlohmann::json;
using rr::rails::BoardWriter;

std::string RunTop(const std::string& args, int* rc) {
  std::string out;
  FILE* p = popen((std::string(RERAIL_TOP_BIN) + " " + args + " 2>&1").c_str(), "r");
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int st = pclose(p);
  *rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

class TopTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/rrrails-top-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    ASSERT_TRUE(BoardWriter::Create("net", &board_, dir_).ok());
    ASSERT_TRUE(board_->AddRail("rail0", &r0_).ok());
    ASSERT_TRUE(board_->AddRail("rail1", &r1_).ok());
    board_->SetState(r1_, rr::rails::RailState::kFailed, rr::rails::RailEvent::kLinkDown);
    board_->AddBytes(r0_, 5000000, 7000000);
    board_->CountFailover(r1_);
    board_->SetBandwidth(r0_, 1250000000);
  }
  void TearDown() override {
    board_.reset();
    std::system(("rm -rf " + dir_).c_str());
  }
  std::string dir_;
  std::unique_ptr<BoardWriter> board_;
  int r0_ = -1, r1_ = -1;
};

TEST_F(TopTest, OnceJsonShowsThisProcessBoard) {
  int rc = -1;
  std::string out = RunTop("--once --json --dir " + dir_, &rc);
  ASSERT_EQ(rc, 0) << out;
  json j = json::parse(out);
  EXPECT_EQ(j.at("layout_version"), rr::rails::kBoardVersion);
  ASSERT_EQ(j.at("boards").size(), 1u);
  const json& b = j["boards"][0];
  EXPECT_EQ(b.at("pid"), getpid());
  EXPECT_EQ(b.at("alive"), true);
  ASSERT_EQ(b.at("rails").size(), 2u);
  EXPECT_EQ(b["rails"][0].at("name"), "rail0");
  EXPECT_EQ(b["rails"][0].at("state"), "healthy");
  EXPECT_EQ(b["rails"][0].at("bytes_sent"), 5000000u);
  EXPECT_EQ(b["rails"][0].at("bw_estimate_Bps"), 1250000000u);
  EXPECT_TRUE(b["rails"][0].at("tx_Bps").is_null());  // one sample: no rate yet
  EXPECT_EQ(b["rails"][1].at("state"), "failed");
  EXPECT_EQ(b["rails"][1].at("reason"), "link-down");
  EXPECT_EQ(b["rails"][1].at("failovers"), 1u);
}

TEST_F(TopTest, OnceTextIsATable) {
  int rc = -1;
  std::string out = RunTop("--once --dir " + dir_, &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("1 board(s)"), std::string::npos) << out;
  EXPECT_NE(out.find("pid " + std::to_string(getpid())), std::string::npos) << out;
  EXPECT_NE(out.find("rail1"), std::string::npos);
  EXPECT_NE(out.find("failed"), std::string::npos);
  EXPECT_NE(out.find("link-down"), std::string::npos);
  EXPECT_NE(out.find("5.0 MB"), std::string::npos) << out;
}

TEST_F(TopTest, LiveModeComputesRatesBetweenRefreshes) {
  std::atomic<bool> stop{false};
  std::thread traffic([&] {
    while (!stop) {
      board_->AddBytes(r0_, 100000, 0);
      usleep(1000);
    }
  });
  int rc = -1;
  std::string out = RunTop("--json --count 3 --interval 100 --dir " + dir_, &rc);
  stop = true;
  traffic.join();
  ASSERT_EQ(rc, 0) << out;
  std::istringstream lines(out);
  std::string line;
  std::vector<json> docs;
  while (std::getline(lines, line)) docs.push_back(json::parse(line));
  ASSERT_EQ(docs.size(), 3u);
  EXPECT_TRUE(docs[0]["boards"][0]["rails"][0]["tx_Bps"].is_null());
  ASSERT_TRUE(docs[2]["boards"][0]["rails"][0]["tx_Bps"].is_number());
  EXPECT_GT(docs[2]["boards"][0]["rails"][0]["tx_Bps"].get<double>(), 0.0);
  EXPECT_EQ(docs[2]["boards"][0]["rails"][1]["tx_Bps"].get<double>(), 0.0);  // idle rail
}

TEST_F(TopTest, StaleBoardsAreShownWithKeepStaleAndRemovedOtherwise) {
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::unique_ptr<BoardWriter> w;
    _exit(BoardWriter::Create("net", &w, dir_).ok() ? 0 : 1);  // dies without cleanup
  }
  int st = 0;
  waitpid(child, &st, 0);
  ASSERT_EQ(WEXITSTATUS(st), 0);
  int rc = -1;
  json keep = json::parse(RunTop("--once --json --keep-stale --dir " + dir_, &rc));
  ASSERT_EQ(keep["boards"].size(), 2u);
  int dead = 0;
  for (const auto& b : keep["boards"])
    if (b["pid"] == child) {
      EXPECT_EQ(b["alive"], false);
      ++dead;
    }
  EXPECT_EQ(dead, 1);
  json clean = json::parse(RunTop("--once --json --dir " + dir_, &rc));
  ASSERT_EQ(clean["boards"].size(), 1u);
  ASSERT_EQ(clean["removed_stale"].size(), 1u);
  EXPECT_NE(clean["removed_stale"][0].get<std::string>().find(std::to_string(child)), std::string::npos);
}

TEST(TopCli, BadArgumentsFailWithAMessage) {
  int rc = -1;
  std::string out = RunTop("--interval 5", &rc);
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("--interval"), std::string::npos) << out;
  out = RunTop("--once --dir /nonexistent-rrrails", &rc);
  EXPECT_EQ(rc, 1);
  EXPECT_NE(out.find("cannot read board directory"), std::string::npos) << out;
}

TEST(TopView, HumanUnits) {
  EXPECT_EQ(rr::top::HumanBytes(999), "999 B");
  EXPECT_EQ(rr::top::HumanBytes(1500), "1.5 KB");
  EXPECT_EQ(rr::top::HumanBytes(12.5e9), "12.5 GB");
  EXPECT_EQ(rr::top::HumanAge(1500000000ull), "1.5s");
  EXPECT_EQ(rr::top::HumanAge(125ull * 1000000000ull), "2m05s");
}

}  // namespace
