#include <gtest/gtest.h>

#include <cerrno>

#include "rerail/clock.h"
#include "rerail/log.h"
#include "rerail/status.h"

namespace {

rr::Status Fails() { return rr::Status::Remote("peer 10.0.0.2 gone"); }
rr::Status Propagates(int* reached) {
  RR_CHECK(Fails());
  ++*reached;
  return rr::Status::Ok();
}
rr::Status SysFails() {
  errno = ECONNREFUSED;
  RR_SYSCHECK(-1, "connect(10.0.0.2:5000)");
  return rr::Status::Ok();
}

TEST(Status, CheckPropagatesAndLogsChain) {
  std::vector<std::string> lines;
  rr::log::SetCapture([&](rr::log::Level, const std::string& m) { lines.push_back(m); });
  int reached = 0;
  rr::Status s = Propagates(&reached);
  rr::log::SetCapture(nullptr);
  EXPECT_EQ(reached, 0);
  EXPECT_EQ(s.code(), rr::Code::kRemoteError);
  EXPECT_EQ(s.ToString(), "remoteError: peer 10.0.0.2 gone");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("-> remoteError"), std::string::npos);
}

TEST(Status, SyscheckCarriesErrno) {
  rr::Status s = SysFails();
  EXPECT_EQ(s.code(), rr::Code::kSystemError);
  EXPECT_EQ(s.message(), "connect(10.0.0.2:5000): Connection refused");
}

std::string g_got;
void TestLogger(int level, unsigned long, const char*, int, const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  g_got = std::to_string(level) + " " + buf;
}

TEST(Log, CustomLoggerGetsPrefixedLines) {
  rr::log::SetLogger(&TestLogger);
  rr::log::SetPrefix("TUNER/rerail");
  RR_WARN("rail %d down", 3);
  rr::log::SetLogger(nullptr);
  rr::log::SetPrefix("NET/rerail");
  EXPECT_EQ(g_got, "2 TUNER/rerail : rail 3 down");
}

TEST(Clock, DeadlineExpires) {
  rr::Deadline never;
  EXPECT_FALSE(never.Expired());
  rr::Deadline d = rr::Deadline::AfterMs(5);
  EXPECT_FALSE(d.Expired());
  uint64_t t0 = rr::NowMs();
  while (!d.Expired()) {}
  EXPECT_GE(rr::NowMs() - t0, 4u);
  EXPECT_EQ(d.RemainingMs(), 0u);
}

}  // namespace
