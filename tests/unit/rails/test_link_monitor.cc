// Unit tests: link monitor basics that need no privileges (the fault tier covers real link-down).
#include <dirent.h>
#include <poll.h>

#include <gtest/gtest.h>

#include "rerail/rails/link_monitor.h"

namespace {

using rr::rails::LinkEvent;
using rr::rails::LinkMonitor;

TEST(LinkMonitor, SnapshotKnowsLoopbackAtStart) {
  std::unique_ptr<LinkMonitor> m;
  rr::Status s = LinkMonitor::Start({{"lo"}, ""}, nullptr, &m);
  ASSERT_TRUE(s.ok()) << s.ToString();
  LinkEvent lo;
  ASSERT_TRUE(m->Lookup("lo", &lo));
  EXPECT_TRUE(lo.admin_up);
  EXPECT_TRUE(lo.up);
  EXPECT_GT(lo.ifindex, 0);
  EXPECT_FALSE(m->Lookup("no-such-if0", &lo));
  EXPECT_TRUE(m->Drain().empty());  // the start-up snapshot is state, not events
  pollfd p{m->event_fd(), POLLIN, 0};
  EXPECT_EQ(poll(&p, 1, 0), 0);
  m->Stop();
  m->Stop();  // idempotent
}

TEST(LinkMonitor, FilterHidesOtherInterfaces) {
  std::unique_ptr<LinkMonitor> m;
  ASSERT_TRUE(LinkMonitor::Start({{"rail0"}, ""}, nullptr, &m).ok());
  LinkEvent e;
  EXPECT_FALSE(m->Lookup("lo", &e));
}

TEST(LinkMonitor, BadNamespaceIsAClearError) {
  std::unique_ptr<LinkMonitor> m;
  rr::Status s = LinkMonitor::Start({{}, "/run/netns/rrrails-does-not-exist"}, nullptr, &m);
  EXPECT_EQ(s.code(), rr::Code::kSystemError);
  EXPECT_NE(s.message().find("rrrails-does-not-exist"), std::string::npos) << s.ToString();
  EXPECT_FALSE(m);
}

int OpenFds() {
  int n = 0;
  DIR* d = opendir("/proc/self/fd");
  while (readdir(d) != nullptr) ++n;
  closedir(d);
  return n;
}

TEST(LinkMonitor, ManyStartStopCyclesLeakNoDescriptors) {
  int before = OpenFds();
  for (int i = 0; i < 50; ++i) {
    std::unique_ptr<LinkMonitor> m;
    ASSERT_TRUE(LinkMonitor::Start({}, [](const LinkEvent&) {}, &m).ok());
  }
  EXPECT_EQ(OpenFds(), before);
}

}  // namespace
