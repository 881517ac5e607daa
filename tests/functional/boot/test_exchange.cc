// Functional tests: the rootless all-gather among threads and processes over real loopback sockets.
// "Hosts" are distinct loopback addresses 127.77.x.y, so the plan spans several simulated hosts.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <thread>

#include "rerail/boot/exchange.h"
#include "rerail/log.h"

namespace rr::boot {
namespace {

// A port base below the ephemeral range, varied by pid so parallel test runs rarely collide.
int BasePort(int salt) { return 20000 + static_cast<int>((getpid() * 37 + salt * 1013) % 9000); }

std::unique_ptr<Job> MakeJob(int nhosts, int rph, int salt, const std::string& job_id = "test") {
  JobSpec s;
  for (int h = 0; h < nhosts; ++h) s.hosts.push_back("127.77." + std::to_string(getpid() % 200) + "." + std::to_string(h + 1));
  s.ranks_per_host = rph;
  s.port_base = BasePort(salt);
  s.port_span = 512;
  s.job_id = job_id;
  std::unique_ptr<Job> job;
  Status st = Job::Create(s, &job);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return job;
}

std::string BlobOf(int rank) {
  std::string b(24, '\0');
  std::snprintf(&b[0], b.size(), "blob-of-rank-%06d", rank);
  return b;
}

// Options of one rank with a short timeout and linger (the failure tests).
ExchangeOptions Opts(int rank, const std::string& blob, int timeout_ms) {
  ExchangeOptions o;
  o.rank = rank;
  o.blob = blob;
  o.timeout_ms = timeout_ms;
  o.linger_ms = 1;
  return o;
}

// Collects the WARN lines logged while it captures (from any thread); Stop() ends the capture.
struct WarnCapture {
  std::mutex mu;
  std::vector<std::string> warns;
  WarnCapture() {
    log::SetCapture([this](log::Level l, const std::string& line) {
      std::lock_guard<std::mutex> lk(mu);
      if (l == log::Level::kWarn) warns.push_back(line);
    });
  }
  ~WarnCapture() { Stop(); }
  void Stop() { log::SetCapture(nullptr); }
};

void RunAll(const Job& job, uint64_t group, std::vector<ExchangeStats>* stats = nullptr,
            ExchangeAlgorithm algo = ExchangeAlgorithm::kBruck) {
  int n = job.nranks();
  std::vector<std::thread> threads;
  std::vector<Status> results(n);
  std::vector<std::vector<std::string>> tables(n);
  if (stats) stats->resize(n);
  WarnCapture cap;  // a healthy exchange logs no WARN (no stranger, no bad transition)
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      ExchangeOptions o;
      o.group = group;
      o.algorithm = algo;
      o.rank = r;
      o.blob = BlobOf(r);
      o.timeout_ms = 30000;
      ExchangeStats st;
      results[r] = AllGather(job, o, &tables[r], &st);
      if (stats) (*stats)[r] = st;
    });
  }
  for (auto& t : threads) t.join();
  cap.Stop();
  EXPECT_TRUE(cap.warns.empty()) << cap.warns.front();
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r].ToString();
    ASSERT_EQ(tables[r].size(), static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) ASSERT_EQ(tables[r][i], BlobOf(i)) << "rank " << r << " blob " << i;
  }
}

class BootExchangeAlgo : public ::testing::TestWithParam<ExchangeAlgorithm> {};
INSTANTIATE_TEST_SUITE_P(Algorithms, BootExchangeAlgo,
                         ::testing::Values(ExchangeAlgorithm::kBruck, ExchangeAlgorithm::kRing),
                         [](const auto& p) { return p.param == ExchangeAlgorithm::kBruck ? "Bruck" : "Ring"; });

TEST_P(BootExchangeAlgo, AllGatherAnySize) {
  int salt = GetParam() == ExchangeAlgorithm::kRing ? 100 : 0;
  for (int n : {1, 2, 3, 5, 8, 13}) {
    auto job = MakeJob(n >= 4 ? 4 : 1, (n + 3) / 4 * (n >= 4 ? 1 : 4), ++salt);
    ASSERT_TRUE(job);
    JobSpec s = job->spec();
    s.nranks = n;
    std::unique_ptr<Job> j;
    ASSERT_TRUE(Job::Create(s, &j).ok());
    RunAll(*j, 0, nullptr, GetParam());
  }
}

TEST(BootExchange, LogarithmicConnectionsNoRoot) {
  auto job = MakeJob(4, 8, 20);
  std::vector<ExchangeStats> stats;
  RunAll(*job, 3, &stats);
  for (const auto& st : stats) {
    EXPECT_EQ(st.steps, 5);
    EXPECT_EQ(st.peers_out.size(), 5u);  // one pull per step; nobody talks to N-1 peers
    EXPECT_LE(st.accepts, 5 + st.retries);
  }
}

TEST(BootExchange, RingUsesOneConnectionEachWay) {
  auto job = MakeJob(4, 8, 25);
  std::vector<ExchangeStats> stats;
  RunAll(*job, 0, &stats, ExchangeAlgorithm::kRing);
  for (size_t r = 0; r < stats.size(); ++r) {
    EXPECT_EQ(stats[r].connects, 1) << r;  // only the successor, once (refused attempts are not connections)
    ASSERT_FALSE(stats[r].peers_out.empty());
    EXPECT_EQ(stats[r].peers_out[0], static_cast<int>((r + 1) % stats.size()));
  }
}

TEST(BootExchange, MixedAlgorithmsAreRejected) {
  auto job = MakeJob(1, 2, 27);
  WarnCapture quiet;
  ExchangeOptions a = Opts(0, "x", 400);
  ExchangeOptions b = Opts(1, "x", 400);
  b.algorithm = ExchangeAlgorithm::kRing;
  Status sa, sb;
  std::vector<std::string> oa, ob;
  std::thread t([&] { sa = AllGather(*job, a, &oa); });
  sb = AllGather(*job, b, &ob);
  t.join();
  quiet.Stop();
  EXPECT_FALSE(sa.ok());
  EXPECT_FALSE(sb.ok());
}

TEST(BootExchange, Ipv6AndMixedFamilies) {
  JobSpec s;
  s.hosts = {"::1", "127.0.0.1"};  // one IPv6 host, one IPv4 host in the same job
  s.ranks_per_host = 3;
  s.port_base = BasePort(33);
  s.port_span = 64;
  std::unique_ptr<Job> job;
  ASSERT_TRUE(Job::Create(s, &job).ok());
  EXPECT_EQ(job->Address(0, 0).ToString().rfind("[::1]:", 0), 0u);
  RunAll(*job, 0, nullptr, ExchangeAlgorithm::kBruck);
  RunAll(*job, 1, nullptr, ExchangeAlgorithm::kRing);
}

TEST(BootExchange, ConsecutiveGroupsDoNotCollide) {
  auto job = MakeJob(2, 4, 30);
  RunAll(*job, 0);
  RunAll(*job, 1);
  RunAll(*job, 2);
}

TEST(BootExchange, StrangerWithWrongMagicIsRejected) {
  auto job = MakeJob(1, 2, 40, "job-A");
  auto other = MakeJob(1, 2, 40, "job-B");  // same hosts and ports, another job id
  WarnCapture cap;
  std::unique_ptr<Exchange> server;
  ASSERT_TRUE(Exchange::Start(*job, Opts(1, BlobOf(1), 5000), &server).ok());  // rank 1 of job A listens
  std::vector<std::string> out;
  Status st = AllGather(*other, Opts(0, BlobOf(0), 400), &out);  // rank 0 of job B pulls from job A's rank 1
  cap.Stop();
  EXPECT_EQ(st.code(), Code::kRemoteError);
  EXPECT_NE(st.message().find("another job or group holds the planned port"), std::string::npos) << st.message();
  ASSERT_FALSE(cap.warns.empty());
  EXPECT_NE(cap.warns[0].find("rejected a stranger"), std::string::npos) << cap.warns[0];
  EXPECT_GE(server->Stats().strangers, 1);
  server->Close();
}

// Garbage from a port scanner or a foreign protocol is answered "wrong magic" and does not disturb
// the exchange running on that port.
TEST(BootExchange, GarbageFromAStrangerDoesNotDisturb) {
  auto job = MakeJob(1, 2, 45);
  WarnCapture cap;
  ExchangeOptions o;
  o.rank = 1;
  o.blob = BlobOf(1);
  o.timeout_ms = 10000;
  std::unique_ptr<Exchange> ex;
  ASSERT_TRUE(Exchange::Start(*job, o, &ex).ok());
  SockAddr a = job->Address(1, 0);
  for (int round = 0; round < 2; ++round) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_EQ(connect(fd, &a.u.sa, a.len), 0);
    if (round == 0) {  // 40 bytes of text: a full request with a nonsense magic
      const char junk[41] = "GET / HTTP/1.1\r\nHost: x\r\n\r\nxxxxxxxxxxxxx";
      ASSERT_EQ(write(fd, junk, 40), 40);
      char resp[24] = {};
      size_t got = 0;
      while (got < sizeof(resp)) {
        ssize_t n = read(fd, resp + got, sizeof(resp) - got);
        if (n <= 0) break;
        got += static_cast<size_t>(n);
      }
      ASSERT_EQ(got, sizeof(resp));
      uint32_t reply;
      std::memcpy(&reply, resp + 8, 4);
      EXPECT_EQ(reply, 1u);  // wrong magic
    } else {
      ASSERT_EQ(write(fd, "x", 1), 1);  // a truncated request, then gone
    }
    close(fd);
  }
  ExchangeOptions p = o;
  p.rank = 0;
  p.blob = BlobOf(0);
  std::vector<std::string> out0, out1;
  ASSERT_TRUE(AllGather(*job, p, &out0).ok());
  ASSERT_TRUE(ex->Wait(&out1).ok());
  ex->Close();
  cap.Stop();
  EXPECT_EQ(out1[0], BlobOf(0));
  EXPECT_EQ(out0[1], BlobOf(1));
  ASSERT_EQ(cap.warns.size(), 1u);
  EXPECT_NE(cap.warns[0].find("rejected a stranger from 127."), std::string::npos) << cap.warns[0];
}

TEST(BootExchange, MismatchedBlobSizeIsRejected) {
  auto job = MakeJob(1, 2, 50);
  WarnCapture quiet;
  ExchangeOptions a = Opts(1, "short", 400);
  ExchangeOptions b = Opts(0, "a longer blob", 400);
  Status sa, sb;
  std::vector<std::string> oa, ob;
  std::thread t([&] { sa = AllGather(*job, a, &oa); });
  sb = AllGather(*job, b, &ob);
  t.join();
  quiet.Stop();
  EXPECT_FALSE(sa.ok());
  EXPECT_FALSE(sb.ok());
  EXPECT_NE(sb.message().find("mismatch"), std::string::npos) << sb.message();
}

TEST(BootExchange, TimeoutNamesTheMissingPeer) {
  auto job = MakeJob(2, 1, 60);
  std::vector<std::string> out;
  Status st = AllGather(*job, Opts(0, "x", 300), &out);
  EXPECT_EQ(st.code(), Code::kRemoteError);
  EXPECT_NE(st.message().find("waiting for rank 1"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("Connection refused"), std::string::npos) << st.message();
}

TEST(BootExchange, BadArgumentsAndBusyPort) {
  auto job = MakeJob(1, 2, 70);
  std::unique_ptr<Exchange> ex, ex2;
  ExchangeOptions o;
  o.rank = 5;
  o.blob = "x";
  EXPECT_EQ(Exchange::Start(*job, o, &ex).code(), Code::kInvalidArgument);
  o.rank = 0;
  o.blob.clear();
  EXPECT_EQ(Exchange::Start(*job, o, &ex).code(), Code::kInvalidArgument);
  o.blob = "x";
  o.linger_ms = 1;
  ASSERT_TRUE(Exchange::Start(*job, o, &ex).ok());
  Status st = Exchange::Start(*job, o, &ex2);
  EXPECT_EQ(st.code(), Code::kSystemError);
  EXPECT_NE(st.message().find("holds it"), std::string::npos) << st.message();
}

// A rank crashes (process exit) mid-exchange and a new process re-joins the same group. Bruck always
// takes log2(N) pulls, so the victim dies after its second; a ring pull may bring everything the
// successor already has, so there it dies right after its first (before it says bye to anyone).
TEST_P(BootExchangeAlgo, RankRestartMidExchangeRejoinsSameGroup) {
  auto job = MakeJob(4, 4, GetParam() == ExchangeAlgorithm::kRing ? 90 : 80);
  const int victim = 6;
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ExchangeOptions o;
    o.algorithm = GetParam();
    o.rank = victim;
    o.blob = BlobOf(victim);
    o.timeout_ms = 20000;
    const int die_at = GetParam() == ExchangeAlgorithm::kBruck ? 1 : 0;
    o.on_step = [die_at](int step) {
      if (step == die_at) _exit(42);  // crash mid-exchange: sockets die with the process
    };
    std::unique_ptr<Exchange> ex;
    if (!Exchange::Start(*job, o, &ex).ok()) _exit(1);
    std::vector<std::string> out;
    (void)ex->Wait(&out);
    _exit(2);
  }
  int n = job->nranks();
  std::vector<std::thread> threads;
  std::vector<Status> results(n);
  std::vector<std::vector<std::string>> tables(n);
  for (int r = 0; r < n; ++r) {
    if (r == victim) continue;
    threads.emplace_back([&, r] {
      ExchangeOptions o;
      o.algorithm = GetParam();
      o.rank = r;
      o.blob = BlobOf(r);
      o.timeout_ms = 20000;
      results[r] = AllGather(*job, o, &tables[r]);
    });
  }
  int wst = 0;
  EXPECT_EQ(waitpid(pid, &wst, 0), pid);
  EXPECT_TRUE(WIFEXITED(wst) && WEXITSTATUS(wst) == 42) << "the victim did not die mid-exchange: " << wst;
  ExchangeOptions o;  // the restarted incarnation
  o.algorithm = GetParam();
  o.rank = victim;
  o.blob = BlobOf(victim);
  o.timeout_ms = 20000;
  o.linger_ms = 2000;  // its pullers may have said bye to the dead incarnation
  results[victim] = AllGather(*job, o, &tables[victim]);
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r].ToString();
    for (int i = 0; i < n; ++i) ASSERT_EQ(tables[r][i], BlobOf(i));
  }
}

}  // namespace
}  // namespace rr::boot
