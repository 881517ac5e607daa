// RERAIL_JOB_SECRET in the rootless exchange (issue 15): with the secret set, the exchange's magic is keyed
// (HMAC-SHA256), so a process of the same job id without the secret, or with another secret, is answered
// "wrong magic" with the keyed magic withheld (0), logged as a stranger, and the real ranks complete.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "rerail/auth.h"
#include "rerail/boot/exchange.h"
#include "rerail/log.h"

namespace rr::boot {
namespace {

constexpr const char* kSecret = "job-secret-for-the-exchange";
// Before main(): the secret is read once per process.
const bool kSecretSet = (setenv("RERAIL_JOB_SECRET", kSecret, 1), true);

std::unique_ptr<Job> MakeJob() {
  JobSpec s;
  s.hosts.push_back("127.78." + std::to_string(getpid() % 200) + ".1");
  s.ranks_per_host = 2;
  s.port_base = 20000 + static_cast<int>((getpid() * 41) % 9000);
  s.port_span = 512;
  s.job_id = "job-S";
  std::unique_ptr<Job> job;
  Status st = Job::Create(s, &job);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return job;
}

std::string BlobOf(int rank) { return "blob-of-rank-" + std::to_string(rank) + std::string(8, 'x'); }

// Sends a 40-byte request carrying `magic` (the rest zero) and returns the 24-byte answer's magic and reply.
void Ask(const SockAddr& a, uint64_t magic, uint64_t* got_magic, uint32_t* reply) {
  int fd = socket(a.u.sa.sa_family, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(connect(fd, &a.u.sa, a.len), 0) << strerror(errno);
  unsigned char req[40] = {};
  std::memcpy(req, &magic, 8);
  ASSERT_EQ(write(fd, req, sizeof(req)), 40);
  unsigned char resp[24] = {};
  size_t got = 0;
  while (got < sizeof(resp)) {
    ssize_t n = read(fd, resp + got, sizeof(resp) - got);
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  close(fd);
  ASSERT_EQ(got, sizeof(resp));
  std::memcpy(got_magic, resp, 8);
  std::memcpy(reply, resp + 8, 4);
}

TEST(BootExchangeSecret, StrangersWithoutTheSecretGetNothingAndRanksComplete) {
  ASSERT_TRUE(kSecretSet);
  ASSERT_EQ(auth::JobSecret(), kSecret);
  auto job = MakeJob();
  std::mutex mu;
  std::vector<std::string> warns;
  log::SetCapture([&](log::Level l, const std::string& line) {
    std::lock_guard<std::mutex> lk(mu);
    if (l == log::Level::kWarn) warns.push_back(line);
  });
  ExchangeOptions o;
  o.rank = 1;
  o.blob = BlobOf(1);
  o.timeout_ms = 20000;
  std::unique_ptr<Exchange> ex;
  ASSERT_TRUE(Exchange::Start(*job, o, &ex).ok());
  const SockAddr a = job->Address(1, 0);

  // The job's plain magic: what a process of this job id without the secret sends.
  uint64_t plain = job->Magic(0), m = 1;
  uint32_t reply = 0;
  Ask(a, plain, &m, &reply);
  EXPECT_EQ(reply, 1u) << "wrong magic";
  EXPECT_EQ(m, 0u) << "the keyed magic is withheld from strangers";
  // Keyed with another secret.
  auth::Tag t;
  ASSERT_TRUE(auth::Hmac("another-secret", "rerail-boot-magic-v1", &plain, sizeof(plain), &t));
  uint64_t wrong;
  std::memcpy(&wrong, t.data(), 8);
  Ask(a, wrong, &m, &reply);
  EXPECT_EQ(reply, 1u);
  EXPECT_EQ(m, 0u);

  ExchangeOptions p = o;
  p.rank = 0;
  p.blob = BlobOf(0);
  std::vector<std::string> out0, out1;
  Status s0 = AllGather(*job, p, &out0);
  Status s1 = ex->Wait(&out1);
  ex->Close();
  log::SetCapture(nullptr);
  ASSERT_TRUE(s0.ok()) << s0.ToString();
  ASSERT_TRUE(s1.ok()) << s1.ToString();
  EXPECT_EQ(out0[1], BlobOf(1));
  EXPECT_EQ(out1[0], BlobOf(0));
  EXPECT_GE(ex->Stats().strangers, 2);
  ASSERT_EQ(warns.size(), 2u);
  for (const auto& w : warns) {
    EXPECT_NE(w.find("is not this job's"), std::string::npos) << w;
    EXPECT_EQ(w.find(kSecret), std::string::npos) << "the secret is never logged";
  }
}

}  // namespace
}  // namespace rr::boot
