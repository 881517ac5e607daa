// Unit tests: node lists, port checks, the symmetric address plan (no network).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "rerail/boot/job.h"

namespace rr::boot {
namespace {

std::vector<std::string> Expand(const std::string& s) {
  std::vector<std::string> out;
  Status st = ExpandHostList(s, &out);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return out;
}

std::string ExpandError(const std::string& s) {
  std::vector<std::string> out;
  Status st = ExpandHostList(s, &out);
  EXPECT_FALSE(st.ok()) << s;
  EXPECT_EQ(st.code(), Code::kInvalidUsage);
  return st.message();
}

TEST(BootHostList, SlurmRangesAndPadding) {
  EXPECT_EQ(Expand("gpu[001-004,010]"),
            (std::vector<std::string>{"gpu001", "gpu002", "gpu003", "gpu004", "gpu010"}));
  EXPECT_EQ(Expand("a,b , c"), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(Expand("n[8-11]"), (std::vector<std::string>{"n8", "n9", "n10", "n11"}));
  EXPECT_EQ(Expand("r[1-2]-g[0-1],x"), (std::vector<std::string>{"r1-g0", "r1-g1", "r2-g0", "r2-g1", "x"}));
  EXPECT_EQ(Expand("10.0.0.1,fd00::2,[fd00::3]"), (std::vector<std::string>{"10.0.0.1", "fd00::2", "fd00::3"}));
  EXPECT_EQ(Expand("gpu[9-10]-ib").back(), "gpu10-ib");
}

TEST(BootHostList, MalformedListsSayWhy) {
  EXPECT_NE(ExpandError("gpu[001-004").find("'[' without ']'"), std::string::npos);
  EXPECT_NE(ExpandError("gpu001-004]").find("']' without '['"), std::string::npos);
  EXPECT_NE(ExpandError("gpu[4-1]").find("goes backwards"), std::string::npos);
  EXPECT_NE(ExpandError("gpu[a-b]").find("is not <number>"), std::string::npos);
  EXPECT_NE(ExpandError("gpu[1-]").find("is not <number>"), std::string::npos);
  EXPECT_NE(ExpandError("a,,b").find("empty host name"), std::string::npos);
  EXPECT_NE(ExpandError("").find("empty host name"), std::string::npos);
  EXPECT_NE(ExpandError("gpu[[1-2]]").find("nested"), std::string::npos);
  EXPECT_NE(ExpandError("n[0-99999]").find("too many"), std::string::npos);
  EXPECT_NE(ExpandError("a b").find("blank"), std::string::npos);
  // Regression (tests/fuzz/fuzz_hostlist): brackets with ':' are an IPv6 literal only when they hold
  // one; this used to give the host name "fd00::4},16.:4".
  EXPECT_NE(ExpandError("[fd00::4},16.:4]").find("not an IPv6 literal"), std::string::npos);
  EXPECT_NE(ExpandError("[1:2]x[3]").find("not an IPv6 literal"), std::string::npos);
  EXPECT_NE(ExpandError("[fe80::1%]").find("not an IPv6 literal"), std::string::npos);
}

// The bound holds inside one bracket too: "[0-65535,0-65535,...]" used to build every value first.
TEST(BootHostList, BoundHoldsWithinOneBracket) {
  std::vector<std::string> h;
  EXPECT_TRUE(ExpandHostList("n[1-3,4-6]", &h, 6).ok());
  EXPECT_EQ(h.size(), 6u);
  rr::Status s = ExpandHostList("n[1-3,4-6]", &h, 5);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("too many"), std::string::npos) << s.message();
  std::string many = "n[";
  for (int i = 0; i < 100; ++i) many += "0-60000,";
  many += "1]";
  EXPECT_NE(ExpandError(many).find("too many"), std::string::npos);
}

TEST(BootHostList, Ipv6LiteralsKeepWorking) {
  std::vector<std::string> h;
  ASSERT_TRUE(ExpandHostList("[fd00::2],[fe80::1%eth0],[::ffff:10.0.0.1],n[1-2]", &h).ok());
  EXPECT_EQ(h, (std::vector<std::string>{"fd00::2", "fe80::1%eth0", "::ffff:10.0.0.1", "n1", "n2"}));
}

EphemeralPorts Eph(int lo, int hi) {
  EphemeralPorts e;
  e.lo = lo;
  e.hi = hi;
  return e;
}

JobSpec Spec(int base, int span, int rph = 8) {
  JobSpec s;
  s.hosts = {"127.0.0.1", "127.0.0.2"};
  s.port_base = base;
  s.port_span = span;
  s.ranks_per_host = rph;
  return s;
}

TEST(BootPorts, RangeAndEphemeralOverlap) {
  EXPECT_TRUE(CheckPorts(Spec(20000, 1024), Eph(32768, 60999)).ok());
  Status s = CheckPorts(Spec(32000, 1024), Eph(32768, 60999));
  EXPECT_EQ(s.code(), Code::kInvalidUsage);
  EXPECT_NE(s.message().find("overlap the ephemeral range 32768-60999"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("256 ports from 32768"), std::string::npos) << s.message();
  EXPECT_NE(CheckPorts(Spec(0, 10), Eph(32768, 60999)).message().find("out of range"), std::string::npos);
  EXPECT_NE(CheckPorts(Spec(65000, 1024), Eph(32768, 60999)).message().find("past 65535"), std::string::npos);
  EXPECT_NE(CheckPorts(Spec(20000, 4, 8), Eph(32768, 60999)).message().find("share a port"), std::string::npos);
  // Reserved ports are never handed out as ephemeral ports: no overlap.
  EphemeralPorts r = Eph(32768, 60999);
  r.reserved = {{32768, 33023}};
  EXPECT_TRUE(CheckPorts(Spec(32768, 256), r).ok());
  EXPECT_FALSE(CheckPorts(Spec(32768, 257), r).ok());
}

TEST(BootPorts, ReadsProcFiles) {
  char dir[] = "/tmp/rrboot-ephXXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  std::string range = std::string(dir) + "/range", reserved = std::string(dir) + "/reserved";
  std::ofstream(range) << "20000\t65535\n";
  std::ofstream(reserved) << "20100-20199,30000\n";
  EphemeralPorts e;
  ASSERT_TRUE(ReadEphemeralPorts(&e, range.c_str(), reserved.c_str()).ok());
  EXPECT_EQ(e.lo, 20000);
  EXPECT_EQ(e.hi, 65535);
  ASSERT_EQ(e.reserved.size(), 2u);
  EXPECT_EQ(e.reserved[0], std::make_pair(20100, 20199));
  EXPECT_EQ(e.reserved[1], std::make_pair(30000, 30000));
  std::ofstream(range) << "garbage\n";
  EXPECT_EQ(ReadEphemeralPorts(&e, range.c_str(), reserved.c_str()).code(), Code::kSystemError);
  unlink(range.c_str());
  unlink(reserved.c_str());
  rmdir(dir);
}

TEST(BootPlan, SymmetricAddressesWrapWithinSpan) {
  std::unique_ptr<Job> job;
  ASSERT_TRUE(Job::Create(Spec(20000, 20, 8), Eph(32768, 60999), &job).ok());
  EXPECT_EQ(job->nranks(), 16);
  EXPECT_EQ(job->Port(0, 0), 20000);
  EXPECT_EQ(job->Port(9, 0), 20001);   // host 1, local rank 1
  EXPECT_EQ(job->Port(3, 1), 20011);   // group 1 shifts by ranks per host
  EXPECT_EQ(job->Port(7, 2), 20003);   // 2*8+7 = 23 wraps to 3 within the span of 20
  EXPECT_EQ(job->Address(9, 0).ToString(), "127.0.0.2:20001");
  EXPECT_EQ(job->CommIdString(0, 1), "127.0.0.1:20008");
  // Consecutive groups never reuse a port within the span / ranks-per-host window.
  for (int r = 0; r < 8; ++r) EXPECT_NE(job->Port(r, 0), job->Port(r, 1));
  EXPECT_NE(job->Magic(0), job->Magic(1));
  EXPECT_NE(job->Magic(0), kNcclCommIdMagic);
  JobSpec other = Spec(20000, 20, 8);
  other.job_id = "another-job";
  std::unique_ptr<Job> job2;
  ASSERT_TRUE(Job::Create(other, Eph(32768, 60999), &job2).ok());
  EXPECT_NE(job->Magic(0), job2->Magic(0));
}

TEST(BootPlan, Ipv6AndNames) {
  JobSpec s = Spec(20000, 64, 2);
  s.hosts = {"localhost", "fd00::2", "::1"};
  std::unique_ptr<Job> job;
  ASSERT_TRUE(Job::Create(s, Eph(32768, 60999), &job).ok());
  EXPECT_EQ(job->CommIdString(0, 0), "localhost:20000");
  EXPECT_EQ(job->CommIdString(2, 0), "[fd00::2]:20000");
  EXPECT_EQ(job->Address(5, 0).ToString(), "[::1]:20001");
}

TEST(BootPlan, BadInputIsRejectedClearly) {
  std::unique_ptr<Job> job;
  JobSpec s = Spec(20000, 64, 2);
  s.hosts = {"127.0.0.1", "no-such-host.invalid"};
  Status st = Job::Create(s, Eph(32768, 60999), &job);
  EXPECT_EQ(st.code(), Code::kInvalidUsage);
  EXPECT_NE(st.message().find("host entry 1 ('no-such-host.invalid'): unknown host"), std::string::npos) << st.message();
  s = Spec(20000, 64, 2);
  s.nranks = 5;
  EXPECT_NE(Job::Create(s, Eph(32768, 60999), &job).message().find("does not fit"), std::string::npos);
  s.nranks = 0;
  s.hosts.clear();
  EXPECT_NE(Job::Create(s, Eph(32768, 60999), &job).message().find("no hosts"), std::string::npos);
}

TEST(BootPlan, ParseHostPortLikeNccl) {
  SockAddr a;
  ASSERT_TRUE(ParseHostPort("192.0.2.77:12345", &a).ok());
  EXPECT_EQ(a.ToString(), "192.0.2.77:12345");
  ASSERT_TRUE(ParseHostPort("[fd00::2]:29501", &a).ok());
  EXPECT_EQ(a.ToString(), "[fd00::2]:29501");
  ASSERT_TRUE(ParseHostPort("[fe80::1%lo]:4000", &a).ok());
  EXPECT_NE(a.u.sin6.sin6_scope_id, 0u);
  EXPECT_FALSE(ParseHostPort("192.0.2.77", &a).ok());
  EXPECT_FALSE(ParseHostPort("192.0.2.77:70000", &a).ok());
  EXPECT_FALSE(ParseHostPort("fd00::2:5000", &a).ok());
  EXPECT_FALSE(ParseHostPort("[fd00::zz]:5000", &a).ok());
  EXPECT_FALSE(ParseHostPort("[fe80::1%nosuchif0]:5000", &a).ok());
}

}  // namespace
}  // namespace rr::boot
