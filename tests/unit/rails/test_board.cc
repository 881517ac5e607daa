// Unit tests: rail-health board — layout, writer/reader round trip, seqlock, stale boards, bad files.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <thread>
#include <vector>

#include "rerail/log.h"
#include "rerail/rails/board.h"

namespace {

// Expected WARN lines are captured and asserted, not printed.
void NoopLogger(int, unsigned long, const char*, int, const char*, ...) {}

using namespace rr::rails;

class BoardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/rrrails-board-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }
  std::unique_ptr<BoardWriter> Make(const std::string& tag = "net") {
    std::unique_ptr<BoardWriter> w;
    rr::Status s = BoardWriter::Create(tag, &w, dir_);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return w;
  }
  std::string dir_;
};

TEST_F(BoardTest, RoundTripEveryField) {
  auto w = Make();
  ASSERT_TRUE(w);
  EXPECT_EQ(w->path(), dir_ + "/rerail-board." + std::to_string(getpid()) + ".net");
  int r0 = -1, r1 = -1;
  ASSERT_TRUE(w->AddRail("rail0", &r0).ok());
  ASSERT_TRUE(w->AddRail("a-very-long-interface-name", &r1).ok());
  EXPECT_EQ(r0, 0);
  EXPECT_EQ(r1, 1);
  w->SetState(r1, RailState::kFailed, RailEvent::kLinkDown);
  w->SetBandwidth(r0, 12500000000ull);
  w->AddBytes(r0, 1000, 2000);
  w->AddBytes(r0, 1, 2);
  w->AddRetransmit(r1, 3, 393216);
  w->CountFailover(r1);
  w->CountLinkDown(r1);
  w->CountFailback(r0);

  BoardSnapshot b;
  rr::Status s = ReadBoard(w->path(), &b);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(b.pid, getpid());
  EXPECT_EQ(b.tag, "net");
  EXPECT_TRUE(b.alive);
  EXPECT_FALSE(b.comm.empty());
  EXPECT_NE(b.netns_inode, 0u);
  ASSERT_EQ(b.rails.size(), 2u);
  EXPECT_EQ(b.rails[0].name, "rail0");
  EXPECT_EQ(b.rails[0].state, RailState::kHealthy);
  EXPECT_EQ(b.rails[0].bw_estimate_bps, 12500000000ull);
  EXPECT_EQ(b.rails[0].bytes_sent, 1001u);
  EXPECT_EQ(b.rails[0].bytes_recv, 2002u);
  EXPECT_EQ(b.rails[0].failbacks, 1u);
  EXPECT_EQ(b.rails[1].name, "a-very-long-int");  // truncated to the 15 characters the slot holds
  EXPECT_EQ(b.rails[1].state, RailState::kFailed);
  EXPECT_EQ(b.rails[1].reason, RailEvent::kLinkDown);
  EXPECT_EQ(b.rails[1].retransmit_chunks, 3u);
  EXPECT_EQ(b.rails[1].retransmit_bytes, 393216u);
  EXPECT_EQ(b.rails[1].failovers, 1u);
  EXPECT_EQ(b.rails[1].link_down_events, 1u);
  EXPECT_EQ(b.rails[1].transitions, 1u);
  EXPECT_GE(b.rails[1].state_since_ns, b.rails[0].state_since_ns);
  EXPECT_FALSE(b.rails[1].torn);
}

TEST_F(BoardTest, DestructorRemovesTheFile) {
  std::string path;
  {
    auto w = Make();
    path = w->path();
    EXPECT_EQ(access(path.c_str(), F_OK), 0);
  }
  EXPECT_NE(access(path.c_str(), F_OK), 0);
  EXPECT_TRUE(ScanBoards(dir_).boards.empty());
}

TEST_F(BoardTest, BadArgumentsAreErrorsNotCrashes) {
  std::unique_ptr<BoardWriter> w;
  EXPECT_EQ(BoardWriter::Create("", &w, dir_).code(), rr::Code::kInvalidArgument);
  EXPECT_EQ(BoardWriter::Create("has/slash", &w, dir_).code(), rr::Code::kInvalidArgument);
  EXPECT_EQ(BoardWriter::Create("sixteen-chars-xx", &w, dir_).code(), rr::Code::kInvalidArgument);
  rr::Status s = BoardWriter::Create("net", &w, dir_ + "/does-not-exist");
  EXPECT_EQ(s.code(), rr::Code::kSystemError);
  EXPECT_NE(s.message().find("does-not-exist"), std::string::npos);
  EXPECT_FALSE(w);

  auto ok = Make();
  std::unique_ptr<BoardWriter> twin;
  EXPECT_EQ(BoardWriter::Create("net", &twin, dir_).code(), rr::Code::kInvalidUsage);  // same tag twice
  EXPECT_EQ(access(ok->path().c_str(), F_OK), 0);  // the first board is untouched
  int idx = -1;
  for (uint32_t i = 0; i < kBoardMaxRails; ++i) ASSERT_TRUE(ok->AddRail("r" + std::to_string(i), &idx).ok());
  EXPECT_EQ(ok->AddRail("one-too-many", &idx).code(), rr::Code::kInvalidUsage);

  std::vector<std::string> warns;
  rr::log::SetLogger(&NoopLogger);
  rr::log::SetCapture([&](rr::log::Level l, const std::string& m) {
    if (l == rr::log::Level::kWarn) warns.push_back(m);
  });
  ok->AddBytes(-1, 1, 1);
  ok->SetState(99, RailState::kFailed, RailEvent::kError);
  rr::log::SetCapture(nullptr);
  rr::log::SetLogger(nullptr);
  ASSERT_EQ(warns.size(), 1u);  // logged once, not per call
  EXPECT_NE(warns[0].find("out of range"), std::string::npos);
}

TEST_F(BoardTest, SeqlockReadersNeverSeeATornState) {
  auto w = Make();
  int r = -1;
  ASSERT_TRUE(w->AddRail("rail0", &r).ok());
  std::atomic<bool> stop{false};
  // Two consistent (state, reason) pairs; a torn read would mix them.
  std::thread writer([&] {
    for (int i = 0; i < 200000 && !stop.load(); ++i) {
      if (i % 2) w->SetState(r, RailState::kFailed, RailEvent::kLinkDown);
      else w->SetState(r, RailState::kHealthy, RailEvent::kProbeOk);
      w->AddBytes(r, 1, 0);
    }
    stop = true;
  });
  int reads = 0, mixed = 0;
  uint64_t last_bytes = 0;
  while (!stop.load()) {
    BoardSnapshot b;
    ASSERT_TRUE(ReadBoard(w->path(), &b).ok());
    const RailSnapshot& s = b.rails.at(0);
    bool a = s.state == RailState::kFailed && s.reason == RailEvent::kLinkDown;
    bool c = s.state == RailState::kHealthy && (s.reason == RailEvent::kProbeOk || s.reason == RailEvent::kNone);
    if (!(a || c) || s.torn) {
      ++mixed;
      ADD_FAILURE() << "state " << rr::rails::StateName(s.state) << " reason " << rr::rails::EventName(s.reason)
                    << (s.torn ? " (torn)" : "");
    }
    EXPECT_GE(s.bytes_sent, last_bytes);  // monotonic counters never go back
    last_bytes = s.bytes_sent;
    ++reads;
  }
  writer.join();
  EXPECT_EQ(mixed, 0) << "of " << reads << " reads";
  BoardSnapshot fin;
  ASSERT_TRUE(ReadBoard(w->path(), &fin).ok());
  EXPECT_EQ(fin.rails[0].transitions, 200000u);
  EXPECT_EQ(fin.rails[0].bytes_sent, 200000u);
}

// A child creates a board and dies without cleaning up: the board is stale and gets removed.
TEST_F(BoardTest, StaleBoardOfADeadProcessIsDetectedAndRemoved) {
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::unique_ptr<BoardWriter> w;
    int idx;
    bool ok = BoardWriter::Create("net", &w, dir_).ok() && w->AddRail("rail0", &idx).ok();
    _exit(ok ? 0 : 1);  // no destructors: like a crash
  }
  int st = 0;
  ASSERT_EQ(waitpid(child, &st, 0), child);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  std::string stale = dir_ + "/rerail-board." + std::to_string(child) + ".net";
  ASSERT_EQ(access(stale.c_str(), F_OK), 0);

  ScanResult keep = ScanBoards(dir_, /*remove_stale=*/false);
  ASSERT_EQ(keep.boards.size(), 1u);
  EXPECT_FALSE(keep.boards[0].alive);
  EXPECT_EQ(keep.boards[0].pid, child);

  auto mine = Make();  // Create() cleans stale boards in its directory
  EXPECT_NE(access(stale.c_str(), F_OK), 0);
  ScanResult now = ScanBoards(dir_, true);
  ASSERT_EQ(now.boards.size(), 1u);
  EXPECT_EQ(now.boards[0].pid, getpid());
  EXPECT_TRUE(now.boards[0].alive);
}

TEST_F(BoardTest, ForeignAndFutureFilesAreReportedNotDeleted) {
  auto w = Make();
  // Junk under a live pid's name (pid 1 always runs).
  std::string junk = dir_ + "/rerail-board.1.junk";
  std::ofstream(junk) << std::string(4096, 'x');
  // A board from a future layout version: copy ours and bump the version field.
  std::string future = dir_ + "/rerail-board." + std::to_string(getpid()) + ".v2";
  std::system(("cp " + w->path() + " " + future).c_str());
  int fd = open(future.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  uint32_t v2 = kBoardVersion + 1;
  ASSERT_EQ(pwrite(fd, &v2, sizeof(v2), offsetof(BoardHeader, version)), ssize_t(sizeof(v2)));
  close(fd);
  // A file too small to be a board, named after a dead pid: removed as stale.
  pid_t dead = fork();
  if (dead == 0) _exit(0);
  waitpid(dead, nullptr, 0);
  std::string small = dir_ + "/rerail-board." + std::to_string(dead) + ".net";
  std::ofstream(small) << "x";
  // A temp file of a writer that died before its rename(): removed too.
  std::string tmp = dir_ + "/.rerail-board." + std::to_string(dead) + ".net.tmp";
  std::ofstream(tmp) << "x";

  ScanResult r = ScanBoards(dir_, true);
  ASSERT_EQ(r.boards.size(), 1u);
  EXPECT_EQ(r.boards[0].path, w->path());
  ASSERT_EQ(r.errors.size(), 2u);
  std::string all = r.errors[0] + "\n" + r.errors[1];
  EXPECT_NE(all.find("bad magic"), std::string::npos) << all;
  EXPECT_NE(all.find("layout version " + std::to_string(kBoardVersion + 1)), std::string::npos) << all;
  EXPECT_EQ(access(junk.c_str(), F_OK), 0);
  EXPECT_EQ(access(future.c_str(), F_OK), 0);
  ASSERT_EQ(r.removed.size(), 2u);
  EXPECT_NE(std::find(r.removed.begin(), r.removed.end(), small), r.removed.end());
  EXPECT_NE(std::find(r.removed.begin(), r.removed.end(), tmp), r.removed.end());
  EXPECT_NE(access(tmp.c_str(), F_OK), 0);
}

// Regression (tests/fuzz/fuzz_rails): max_rails * sizeof(RailSlot) wrapped in 32 bits, so a board
// claiming 2^25 rails passed the size check with a 104-byte total and readers walked off the file.
TEST(BoardParse, HugeMaxRailsCannotWrapTheSizeCheck) {
  std::vector<uint64_t> img(sizeof(BoardHeader) / 8 + 2 * sizeof(RailSlot) / 8, 0);
  auto* h = reinterpret_cast<BoardHeader*>(img.data());
  h->magic.store(kBoardMagic);
  h->version = kBoardVersion;
  h->header_size = sizeof(BoardHeader);
  h->slot_size = sizeof(RailSlot);
  h->max_rails = 1u << 25;  // 2^25 * 128 = 2^32
  h->total_size = BoardSize(h->max_rails);
  ASSERT_EQ(h->total_size, sizeof(BoardHeader));  // the wrap itself
  h->num_rails.store(1000);
  BoardSnapshot b;
  rr::Status s = ParseBoard(img.data(), img.size() * 8, "wrapped", &b, 0);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("size fields do not fit"), std::string::npos) << s.message();
  // The same image with honest sizes parses, slot by slot.
  h->max_rails = 2;
  h->total_size = BoardSize(2);
  h->num_rails.store(2);
  ASSERT_TRUE(ParseBoard(img.data(), img.size() * 8, "honest", &b, 0).ok());
  EXPECT_EQ(b.rails.size(), 2u);
  EXPECT_FALSE(b.alive);  // ParseBoard never looks at the publisher
}

TEST(BoardProcess, AliveChecksPidAndStartTime) {
  EXPECT_TRUE(ProcessAlive(getpid(), ProcessStartTicks(getpid())));
  EXPECT_NE(ProcessStartTicks(getpid()), 0u);
  EXPECT_FALSE(ProcessAlive(getpid(), ProcessStartTicks(getpid()) + 1));  // pid reused by another process
  EXPECT_FALSE(ProcessAlive(0, 0));
  EXPECT_FALSE(ProcessAlive(-5, 0));
}

}  // namespace
