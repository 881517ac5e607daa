#include <gtest/gtest.h>

#include "link_state.h"
#include "scheduler.h"

namespace {

using namespace rr::net;

TEST(LinkFsm, FollowsTheTableAndRefusesTheRest) {
  LinkFsm f("test link");
  EXPECT_EQ(f.state(), LinkState::kConnecting);
  EXPECT_FALSE(f.Transition(LinkState::kProbing, "not allowed from connecting"));
  EXPECT_TRUE(f.Transition(LinkState::kHealthy, "connected"));
  EXPECT_TRUE(f.usable());
  EXPECT_FALSE(f.Transition(LinkState::kProbing, "must fail first"));
  EXPECT_TRUE(f.Transition(LinkState::kFailed, "error"));
  EXPECT_FALSE(f.usable());
  EXPECT_FALSE(f.Transition(LinkState::kHealthy, "no re-admission without a probe"));
  EXPECT_TRUE(f.Transition(LinkState::kProbing, "back-off"));
  EXPECT_TRUE(f.Transition(LinkState::kFailed, "probe failed"));
  EXPECT_TRUE(f.Transition(LinkState::kProbing, "back-off"));
  EXPECT_TRUE(f.Transition(LinkState::kHealthy, "probe answered"));
  EXPECT_STREQ(LinkStateName(f.state()), "healthy");
}

TEST(Scheduler, EqualLinksAreAllAdmitted) {
  Scheduler s;
  s.Reset({10e9, 10e9, 10e9});
  std::vector<bool> all{true, true, true};
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(s.Admit(i, all, 131072));
  s.OnQueued(0, 4 << 20);
  EXPECT_TRUE(s.Admit(1, all, 131072));
  EXPECT_FALSE(s.Admit(0, all, 131072)) << "4 MiB queued at 10 Gb/s is 3.4 ms behind the others";
  s.OnQueued(0, -(4 << 20));
  EXPECT_TRUE(s.Admit(0, all, 131072));
}

TEST(Scheduler, IneligibleLinksDoNotBlockOthers) {
  Scheduler s;
  s.Reset({10e9, 10e9});
  s.OnQueued(1, 64 << 20);
  EXPECT_FALSE(s.Admit(1, {true, true}, 131072));
  EXPECT_TRUE(s.Admit(1, {false, true}, 131072)) << "the only eligible link is always admitted";
  s.ClearQueued(1);
  EXPECT_EQ(s.queued(1), 0);
}

TEST(Scheduler, BackloggedSamplesLearnASlowLink) {
  Scheduler s;
  s.Reset({10e9, 10e9});
  // Link 1 accepts 100 KB per 5 ms while backlogged (160 Mb/s); link 0 stays nominal.
  uint64_t t = 1'000'000'000;
  s.OnWritten(1, 0, t);
  for (int i = 0; i < 40; ++i) {
    s.OnBlocked(1, t + 1);
    t += Scheduler::kSampleNs;
    s.OnWritten(1, 100000, t);
  }
  EXPECT_LT(s.BandwidthBps(1), 0.5e9);
  EXPECT_GT(s.BandwidthBps(1), 0.1e9);
  // Equal queues: the slow link would finish much later, so it is not admitted.
  s.OnQueued(0, 1 << 20);
  s.OnQueued(1, 1 << 20);
  EXPECT_TRUE(s.Admit(0, {true, true}, 131072));
  EXPECT_FALSE(s.Admit(1, {true, true}, 131072));
}

TEST(Scheduler, DemandLimitedWindowsAreNotSamples) {
  Scheduler s;
  s.Reset({10e9});
  uint64_t t = 1'000'000'000;
  s.OnWritten(0, 0, t);
  for (int i = 0; i < 40; ++i) s.OnWritten(0, 10, t += Scheduler::kSampleNs);  // trickle, never blocked
  EXPECT_NEAR(s.BandwidthBps(0), 10e9, 1e6);
}

}  // namespace
