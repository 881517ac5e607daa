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

// The rail's peer acknowledges `bytes_per_10ms` every 10 ms for 2 s while the sockets stay backlogged.
void LearnRate(Scheduler& s, int link, size_t bytes_per_10ms) {
  uint64_t t = 1'000'000'000;
  s.OnDelivered(link, 0, true, t);
  for (int i = 0; i < 200; ++i) s.OnDelivered(link, bytes_per_10ms, true, t += 10'000'000);
}
void LearnSlowRail(Scheduler& s, int link) { LearnRate(s, link, 100000); }  // 80 Mb/s

constexpr size_t kChunk = 131072;

// A rail's load as the send path reports it: bytes handed to its links (not yet acknowledged by the
// receiver) that also sit in the kernel (written, not yet acknowledged by TCP).
void Load(Scheduler& s, int link, int64_t bytes) {
  s.OnQueued(link, bytes);
  if (bytes > 0) s.OnWritten(link, static_cast<size_t>(bytes));
}

TEST(Scheduler, EvenlyLoadedRailsKeepThePrimary) {
  Scheduler s;
  s.Reset({0, 1, 2}, {10e9, 10e9, 10e9}, nullptr);
  std::vector<bool> all{true, true, true};
  EXPECT_TRUE(s.Admit(0, all, kChunk, kChunk));
  EXPECT_TRUE(s.Admit(1, all, kChunk, kChunk)) << "idle rails: any of them may take work";
  uint64_t t = 1'000'000'000;
  for (int i = 0; i < 3; ++i) Load(s, i, 4 << 20);  // every rail busy
  Load(s, 0, 512 << 10);
  s.Observe(t += 1'000'000'000);  // for longer than the smoothing time
  EXPECT_TRUE(s.Admit(0, all, kChunk, 64 << 20)) << "rails of the same speed: 12 % behind is no reason to move";
  EXPECT_FALSE(s.Admit(1, all, kChunk, 64 << 20));
  Load(s, 0, 3584 << 10);  // the primary rail carries twice the others' load (two channels on it)
  EXPECT_FALSE(s.Admit(1, all, kChunk, 64 << 20)) << "not for a moment: the smoothed load decides";
  s.Observe(t += 1'000'000'000);
  EXPECT_TRUE(s.Admit(1, all, kChunk, 64 << 20)) << "twice as far behind: spill";
  EXPECT_TRUE(s.Admit(2, all, kChunk, 64 << 20));
  EXPECT_TRUE(s.Admit(0, all, kChunk, 64 << 20)) << "64 MiB pending: every rail works";
  EXPECT_FALSE(s.Admit(0, all, kChunk, kChunk)) << "the last chunk goes where it finishes first";
  Load(s, 0, -(8 << 20));
  Load(s, 1, -(4 << 20));
  Load(s, 2, -(4 << 20));
  EXPECT_EQ(s.queued(0), 0);
  EXPECT_EQ(s.rail_backlog(0), 0) << "nothing unacknowledged by the receiver: nothing left in the kernel";
  EXPECT_TRUE(s.Admit(0, all, kChunk, kChunk));
}

TEST(Scheduler, ARailRunningDryTakesWorkFromABusyPrimary) {
  Scheduler s;
  s.Reset({0, 1}, {10e9, 10e9}, nullptr);
  Load(s, 0, 8 << 20);
  Load(s, 1, 8 << 20);
  EXPECT_FALSE(s.Admit(1, {true, true}, kChunk, 16 << 20)) << "both rails busy: the primary keeps its chunks";
  s.OnKernelQueue(1, 0);  // rail 1's kernel drained (its own channel is done)
  EXPECT_TRUE(s.Admit(1, {true, true}, kChunk, 16 << 20)) << "an idle rail next to a queue of 8 MiB";
  s.OnWritten(1, 512 << 10);  // rail 1 took its share and is busy again
  EXPECT_FALSE(s.Admit(1, {true, true}, kChunk, 16 << 20)) << "busy again: the primary keeps the rest";
  s.OnKernelQueue(0, 0);
  EXPECT_TRUE(s.Admit(0, {true, true}, kChunk, 16 << 20));
  EXPECT_FALSE(s.Admit(1, {true, true}, kChunk, 16 << 20)) << "the primary ran dry: it takes the work";
}

// One connection striped over equal rails (rerail-perf -C 1): the busy non-primary rails refuse more
// than their dry share, and the primary took everything else (10 of a 16-chunk burst), so each
// message waited for the primary's queue. The primary now keeps a chunk only if no other rail would
// finish it clearly sooner (or the rest is long enough); the chunk waits for the first rail to drain.
TEST(Scheduler, ThePrimaryDoesNotTakeWhatAnotherRailFinishesSooner) {
  Scheduler s;
  s.Reset({0, 1}, {10e9, 10e9}, nullptr);
  Load(s, 0, 6 * kChunk);
  Load(s, 1, 3 * kChunk);
  std::vector<bool> both{true, true};
  EXPECT_FALSE(s.Admit(1, both, kChunk, kChunk)) << "rail 1 is busy (beyond two chunks): the bias keeps it";
  EXPECT_FALSE(s.Admit(0, both, kChunk, kChunk)) << "rail 1 finishes this chunk 3 chunks sooner";
  EXPECT_TRUE(s.Admit(0, both, kChunk, 16 * kChunk)) << "much pending: every rail works";
  s.OnKernelQueue(1, kChunk);  // rail 1 drained to one chunk: running dry
  EXPECT_TRUE(s.Admit(1, both, kChunk, kChunk));
}

// A quarter-rate rail helps while the fast one has more to do than its own chunk takes, and stays
// out when the last chunk would finish sooner on the fast rail.
TEST(Scheduler, ASlowerRailHelpsOnlyWhileTheFastOneHasMoreToDo) {
  Scheduler s;
  s.Reset({0, 1}, {1e9, 250e6}, nullptr);
  std::vector<bool> both{true, true};
  Load(s, 0, 2 * kChunk);  // the next chunk: 3 chunk times of the fast rail there, 4 on the slow one
  EXPECT_TRUE(s.Admit(1, both, kChunk, 16 * kChunk)) << "the fast rail has 18 chunks' work: help";
  EXPECT_FALSE(s.Admit(1, both, kChunk, kChunk)) << "one chunk left: it finishes first on the fast rail";
  EXPECT_TRUE(s.Admit(0, both, kChunk, 16 * kChunk));
}

// "Running dry" is judged beyond the bytes the path holds in flight: a fast rail with a long round
// trip has more than two chunks in flight at full rate, and a bare chunk count would feed it only
// when half of its pipe was empty (one comm on 4 x 400 Gbit/s at 10 us: 0.74 of the link sum).
TEST(Scheduler, ARailRunningDryCountsItsBandwidthDelayProduct) {
  Scheduler s;
  s.Reset({0, 1}, {400e9, 400e9}, nullptr);
  Load(s, 0, 8 << 20);
  Load(s, 1, 400 << 10);  // 400 KB written: less than 400 Gbit/s x 10 us (500 KB) in flight
  EXPECT_FALSE(s.Admit(1, {true, true}, kChunk, 16 << 20)) << "no RTT known: 400 KB is more than two chunks";
  s.OnRtt(1, 10'000);
  EXPECT_TRUE(s.Admit(1, {true, true}, kChunk, 16 << 20)) << "less than its pipe holds: the rail is running dry";
  s.OnWritten(1, 512 << 10);  // beyond the pipe plus two chunks
  EXPECT_FALSE(s.Admit(1, {true, true}, kChunk, 16 << 20)) << "full pipe and a queue: the primary keeps its chunks";
}

// The backlog cap covers the bandwidth-delay product: on a long rail a fixed time cap would keep fewer
// bytes in flight than one round trip carries and hold the rail below its rate.
TEST(Scheduler, TheBacklogCapGrowsWithTheRoundTrip) {
  Scheduler s;
  s.Reset({0, 1}, {10e9, 10e9}, nullptr);
  LearnSlowRail(s, 0);  // 10 MB/s
  s.OnWritten(0, 2 * kChunk);
  EXPECT_TRUE(s.RailFull(0, kChunk)) << "no RTT known: 20 ms of queue (200 KB)";
  s.OnRtt(0, 50'000'000);  // a 50 ms WAN rail: 2 RTTs + 20 ms at 10 MB/s = 1.2 MB
  EXPECT_FALSE(s.RailFull(0, kChunk));
  s.OnWritten(0, 7 * kChunk);
  EXPECT_TRUE(s.RailFull(0, kChunk));
  s.OnRtt(0, 0);  // an unknown RTT keeps the last measurement
  EXPECT_EQ(s.RttNs(0), 50'000'000u);
  s.ClearQueued(0);
}

TEST(Scheduler, AFullRailTakesNothingUntilTheKernelDrains) {
  Scheduler s;
  s.Reset({0, 1}, {10e9, 10e9}, nullptr);
  LearnSlowRail(s, 0);  // 10 MB/s: 20 ms of queue is 200 KB, less than two chunks
  EXPECT_FALSE(s.RailFull(0, kChunk));
  s.OnWritten(0, kChunk);
  EXPECT_FALSE(s.RailFull(0, kChunk)) << "two chunks are always allowed";
  s.OnWritten(0, kChunk);
  EXPECT_TRUE(s.RailFull(0, kChunk));
  EXPECT_FALSE(s.Admit(0, {true, false}, kChunk, 64 << 20)) << "even the only eligible link waits";
  s.OnKernelQueue(0, 4096);  // TCP acknowledged most of it
  EXPECT_FALSE(s.RailFull(0, kChunk));
  EXPECT_TRUE(s.Admit(0, {true, false}, kChunk, 64 << 20));
  EXPECT_EQ(s.rail_backlog(0), 4096);
  s.ClearQueued(0);
  EXPECT_EQ(s.rail_backlog(0), 0) << "a failed link leaves no backlog behind";
}

TEST(Scheduler, IneligibleLinksDoNotBlockOthers) {
  Scheduler s;
  s.Reset({0, 1}, {10e9, 10e9}, nullptr);
  Load(s, 1, 16 << 20);
  EXPECT_FALSE(s.Admit(1, {true, true}, kChunk, kChunk));
  EXPECT_TRUE(s.Admit(1, {false, true}, kChunk, kChunk)) << "the only eligible link is always admitted";
  s.ClearQueued(1);
  EXPECT_EQ(s.queued(1), 0);
  EXPECT_EQ(s.rail_queued(1), 0);
}

// Several channels (rerail-perf -C 4, X,X,X,X/4 at 200 Mbit/s: a 128 KiB chunk takes 21 ms on the
// 50 Mbit/s rail, more than a fast rail's kernel queue holds): one comm's pending work alone never
// justified the slow rail, which idled (0.92 of the link sum). Every comm's waiting work counts.
TEST(Scheduler, OtherCommsPendingWorkKeepsASlowRailBusy) {
  RailLoad loads[kMaxRails];
  Scheduler a, b;
  a.Reset({0, 1}, {1e9, 250e6}, loads);
  b.Reset({0, 1}, {1e9, 250e6}, loads);
  Load(a, 0, 2 * kChunk);
  a.SetPending(kChunk);
  std::vector<bool> both{true, true};
  EXPECT_FALSE(a.Admit(1, both, kChunk, kChunk)) << "3 chunks of work: the fast rail finishes sooner";
  b.SetPending(16 * kChunk);
  EXPECT_EQ(loads[0].pending.load(), 17 * static_cast<int64_t>(kChunk));
  EXPECT_TRUE(a.Admit(1, both, kChunk, kChunk)) << "b's 16 chunks keep the fast rail busy longer";
  b.SetPending(0);
  a.SetPending(0);
  EXPECT_EQ(loads[0].pending.load(), 0);
}

TEST(Scheduler, CommsSharingARailSeeEachOthersLoad) {
  RailLoad loads[kMaxRails];
  Scheduler a, b;
  a.Reset({0, 1}, {10e9, 10e9}, loads);  // a's primary is rail 0
  b.Reset({1, 0}, {10e9, 10e9}, loads);  // b's primary is rail 1
  Load(a, 0, 8 << 20);                     // a is busy on rail 0
  EXPECT_EQ(b.rail_queued(1), 8 << 20) << "b's link 1 runs on rail 0";
  EXPECT_EQ(b.rail_backlog(1), 8 << 20);
  EXPECT_TRUE(b.Admit(0, {true, true}, kChunk, 64 << 20));
  EXPECT_FALSE(b.Admit(1, {true, true}, kChunk, 64 << 20)) << "rail 0 is 8 MiB behind: b keeps off it";
  a.ClearQueued(0);
  EXPECT_EQ(loads[0].queued.load(), 0);
  EXPECT_EQ(loads[0].backlog.load(), 0);
}

TEST(Scheduler, BackloggedSamplesLearnASlowRail) {
  Scheduler s;
  s.Reset({0, 1}, {10e9, 10e9}, nullptr);
  Load(s, 1, 1 << 20);
  LearnSlowRail(s, 1);
  EXPECT_LT(s.BandwidthBps(1), 0.1e9);
  EXPECT_GT(s.BandwidthBps(1), 0.06e9);
  EXPECT_NEAR(s.BandwidthBps(0), 10e9, 1e6) << "rail 0 was never sampled: nominal";
  // Rail 0 has as much queued but is 100x faster: rail 1 gets nothing more.
  Load(s, 0, 1 << 20);
  EXPECT_TRUE(s.Admit(0, {true, true}, kChunk, 64 << 20));
  EXPECT_FALSE(s.Admit(1, {true, true}, kChunk, 64 << 20));
}

TEST(Scheduler, ASlowRailKeepsItsShareWhileMuchIsPending) {
  Scheduler s;
  s.Reset({0, 1}, {0.2e9, 10e9}, nullptr);  // primary 200 Mb/s (nominal), rail 1 learns 80 Mb/s
  LearnSlowRail(s, 1);
  Load(s, 0, 400 << 10);  // the primary holds its 20 ms of queue
  EXPECT_TRUE(s.Admit(1, {true, true}, kChunk, 16 << 20))
      << "16 MiB pending: the primary needs far longer than the slow rail needs for one chunk";
  s.OnKernelQueue(0, 0);  // the primary drained
  EXPECT_FALSE(s.Admit(1, {true, true}, kChunk, kChunk)) << "the last chunk stays on the fast primary";
  Load(s, 0, 400 << 10);
  Load(s, 1, 256 << 10);
  EXPECT_FALSE(s.Admit(1, {true, true}, kChunk, 16 << 20)) << "the slow rail holds its two chunks";
}

TEST(Scheduler, ASlowPrimarySpillsByCompletionTime) {
  Scheduler s;
  s.Reset({0, 1}, {10e9, 10e9}, nullptr);
  Load(s, 0, 1 << 20);
  LearnSlowRail(s, 0);  // the primary: far slower than rail 1
  EXPECT_TRUE(s.Admit(1, {true, true}, kChunk, 64 << 20)) << "1 MiB on a slow primary: the fast rail finishes first";
  EXPECT_FALSE(s.Admit(0, {true, true}, kChunk, 64 << 20));
  s.OnKernelQueue(0, 0);  // the primary drained, the fast rail is as far behind in time
  Load(s, 1, 20 << 20);
  EXPECT_TRUE(s.Admit(0, {true, true}, kChunk, kChunk));
  EXPECT_FALSE(s.Admit(1, {true, true}, kChunk, kChunk));
}

TEST(Scheduler, APrimaryMeasurablySlowerThanASurvivorIsDegraded) {
  Scheduler s;
  s.Reset({0, 1, 2}, {10e9, 10e9, 10e9}, nullptr);
  std::vector<bool> usable{true, true, true};
  EXPECT_FALSE(s.PrimaryDegraded(usable, false)) << "nothing measured";
  LearnRate(s, 0, 100000);  // 10 MB/s
  EXPECT_FALSE(s.PrimaryDegraded(usable, false)) << "the others' nominal 10 Gb/s says nothing: not measured";
  LearnRate(s, 2, 400000);  // 40 MB/s
  int faster = -1;
  EXPECT_TRUE(s.PrimaryDegraded(usable, false, &faster)) << "a quarter of a survivor's measured rate";
  EXPECT_EQ(faster, 2);
  EXPECT_FALSE(s.PrimaryDegraded({true, true, false}, false)) << "only usable rails compare";
  Scheduler t;
  t.Reset({0, 1}, {10e9, 10e9}, nullptr);
  LearnRate(t, 0, 200000);
  LearnRate(t, 1, 400000);  // the primary at half the other's rate: inside the hysteresis band
  EXPECT_FALSE(t.PrimaryDegraded({true, true}, false)) << "healthy stays healthy above 0.4";
  EXPECT_TRUE(t.PrimaryDegraded({true, true}, true)) << "degraded stays degraded below 0.6";
  EXPECT_TRUE(t.PrimaryDegraded({false, true}, true)) << "a primary that is not usable: undecided, unchanged";
}

TEST(Scheduler, DemandLimitedWindowsAreNotSamples) {
  Scheduler s;
  s.Reset({0}, {10e9}, nullptr);
  uint64_t t = 1'000'000'000;
  s.OnDelivered(0, 0, false, t);
  // One small chunk at a time: the sockets never hold unsent bytes, so the rate is the demand's.
  for (int i = 0; i < 40; ++i) s.OnDelivered(0, 4096, false, t += 10'000'000);
  // Mostly idle windows do not count either.
  for (int i = 0; i < 40; ++i) s.OnDelivered(0, 4096, i % 4 == 0, t += 10'000'000);
  EXPECT_NEAR(s.BandwidthBps(0), 10e9, 1e6);
}

// Backlogged is judged by time, not by the number of reports: a window with a quiet report after
// 35 ms and a backlogged one after 25 more (a failover had just moved a dead rail's chunks here) is
// mostly idle. Counted per report it was "half backlogged" and its 40 bytes over 60 ms became the
// rail's estimate: 8 kbit/s, and the rail carried a chunk per report for good (sim seed 4045415).
TEST(Scheduler, AMostlyIdleWindowIsNoSampleEvenWithFewReports) {
  Scheduler s;
  s.Reset({0}, {326e6}, nullptr);
  uint64_t t = 1'000'000'000;
  s.OnDelivered(0, 0, false, t);
  s.OnDelivered(0, 40, false, t += 35'000'000);
  s.OnDelivered(0, 0, true, t += 25'000'000);
  EXPECT_NEAR(s.BandwidthBps(0), 326e6, 1e6) << "the idle window became a sample";
  // The same window with the sockets backlogged for most of it is a sample.
  s.OnDelivered(0, 100000, false, t += 10'000'000);
  s.OnDelivered(0, 1000000, true, t += 50'000'000);
  EXPECT_NEAR(s.BandwidthBps(0), 1.1e6 / 60e-3 * 8, 1e6);
}

// An estimate far too low caps the rail's queue so short that no window is backlogged any more, so no
// window was a sample: the rail stayed throttled to a chunk per report. A window that delivers more
// than the estimate is a lower bound on the rail's rate, backlogged or not: the estimate climbs back.
TEST(Scheduler, AnEstimateFarTooLowClimbsBackOnceTheRailCarriesMore) {
  Scheduler s;
  s.Reset({0}, {10e9}, nullptr);
  LearnRate(s, 0, 10);  // 8 kbit/s
  EXPECT_LT(s.BandwidthBps(0), 1e5);
  uint64_t t = 3'000'000'000;
  for (int i = 0; i < 300; ++i) s.OnDelivered(0, 400000, false, t += 10'000'000);  // 320 Mb/s, never backlogged
  EXPECT_NEAR(s.BandwidthBps(0), 320e6, 5e6);
  // A demand-limited window below the estimate still is no sample.
  for (int i = 0; i < 100; ++i) s.OnDelivered(0, 4096, false, t += 10'000'000);
  EXPECT_NEAR(s.BandwidthBps(0), 320e6, 5e6);
}

// Comms share a rail's cap; the room a draining rail frees went to the comms already writing there
// (their own kernel reads find it first), and a comm with a new message waited for a whole chunk's
// room while they kept the rail at its cap (sim seed 3398388: 55.6 ms for 4 bytes). A comm with
// nothing of its own queued on a full rail gets one chunk in; the next waits for the cap.
// Only while the rail drains: a full rail whose peer acknowledges nothing (a black hole no watchdog
// has caught yet) takes no such chunk, or every comm would put one into it and stall.
TEST(Scheduler, ACommWithNothingOnAFullRailStillGetsOneChunkIn) {
  RailLoad loads[kMaxRails];
  Scheduler busy, fresh;
  busy.Reset({0}, {1e9}, loads);
  fresh.Reset({0}, {1e9}, loads);
  Load(busy, 0, 20 * static_cast<int64_t>(kChunk));  // far over the cap (1 Gbit/s x 20 ms = 2.5 MB)
  uint64_t t = 1'000'000'000;
  busy.OnDelivered(0, 0, true, t);
  busy.OnDelivered(0, 600000, true, t += 5'000'000);  // the rail drains
  fresh.Observe(t + 1'000'000);
  EXPECT_TRUE(busy.RailFull(0, kChunk));
  fresh.OnWritten(0, 40);  // a heartbeat of its own is nothing queued
  EXPECT_FALSE(fresh.RailFull(0, kChunk)) << "a comm with nothing queued waits for others to drain";
  Load(fresh, 0, kChunk);
  EXPECT_TRUE(fresh.RailFull(0, kChunk)) << "one chunk beyond the cap, not more";
  EXPECT_TRUE(busy.RailFull(0, kChunk));
  Load(fresh, 0, -static_cast<int64_t>(kChunk));  // its chunk was acknowledged
  EXPECT_FALSE(fresh.RailFull(0, kChunk));
  fresh.Observe(t + Scheduler::kDrainingNs + 1'000'000);  // nothing acknowledged since: not draining
  EXPECT_TRUE(fresh.RailFull(0, kChunk)) << "a chunk into a rail that stopped moving";
}

// One window's rate above the estimate replaces it at once: a quarter of the way per window (the
// EWMA) took seconds from a collapsed estimate back to the rail's rate.
TEST(Scheduler, AWindowAboveTheEstimateReplacesIt) {
  Scheduler s;
  s.Reset({0}, {10e9}, nullptr);
  LearnRate(s, 0, 10);  // 8 kbit/s; LearnRate's last window closed at 3 s
  uint64_t t = 3'000'000'000;
  for (int i = 0; i < 5; ++i) s.OnDelivered(0, 400000, false, t += 10'000'000);  // one 50 ms window, 320 Mb/s
  EXPECT_NEAR(s.BandwidthBps(0), 320e6, 5e6);
}

// A backlogged rail that acknowledges nothing (a black hole) loses its estimate within a few windows,
// long before a stall watchdog fires (1 s): the estimate is shared, so comms with nothing on the rail
// keep their chunks off it. Treated as "no rate" (tried for sim seed 13124969, whose cause was the
// receiver's closed window), the rail looked healthy to them once the stalled comms had failed over;
// they moved in and stalled a second later (netns 1 Gbit/s -C 4: 0.97 -> 0.84 of 3X after a black hole).
TEST(Scheduler, ABackloggedRailThatDeliversNothingLosesItsEstimate) {
  Scheduler s;
  s.Reset({0, 1}, {1e9, 1e9}, nullptr);
  LearnRate(s, 0, 1250000);  // 1 Gbit/s
  LearnRate(s, 1, 1250000);
  Load(s, 0, 2 * static_cast<int64_t>(kChunk));  // two chunks sit unacknowledged in the dead rail
  uint64_t t = 3'000'000'000;
  for (int i = 0; i < 30; ++i) s.OnDelivered(0, 0, true, t += 10'000'000);  // 300 ms of nothing
  EXPECT_LT(s.BandwidthBps(0), 0.3e9);
  EXPECT_FALSE(s.Admit(0, {true, true}, kChunk, 1 << 20)) << "a comm with nothing on it still picks the dead rail";
  EXPECT_TRUE(s.Admit(1, {true, true}, kChunk, 1 << 20));
}

// The smallest cap holds two chunks WITH their headers: counted bare, a chunk and its header already
// filled half of it, and a rail with a low estimate carried one chunk per round trip, not two.
TEST(Scheduler, TheSmallestCapHoldsTwoChunksWithTheirHeaders) {
  Scheduler s;
  s.Reset({0}, {10e9}, nullptr);
  LearnRate(s, 0, 10);  // 8 kbit/s: the cap is its floor
  Load(s, 0, kChunk + 40);
  EXPECT_FALSE(s.RailFull(0, kChunk)) << "a second chunk does not fit next to one with its header";
  Load(s, 0, kChunk + 40);
  EXPECT_TRUE(s.RailFull(0, kChunk));
}

// A rail's links go down for a second while backlogged, then the first report after it comes: the
// silence between reports is not a rate. (Counted as one window, 0.8 MB over 1 s read as 6 Mb/s on a
// 300 Mb/s rail, and the healed rail was never given a chunk again.)
TEST(Scheduler, AWindowAcrossASilenceIsNoSample) {
  Scheduler s;
  s.Reset({0}, {10e9}, nullptr);
  LearnRate(s, 0, 400000);  // 40 MB/s = 320 Mb/s
  const double before = s.BandwidthBps(0);
  EXPECT_NEAR(before, 320e6, 5e6);
  uint64_t t = 3'000'000'000;  // LearnRate ended at 3 s
  s.OnDelivered(0, 400000, true, t += 10'000'000);
  s.OnDelivered(0, 100000, true, t += 1'000'000'000);  // the first report after 1 s without any
  for (int i = 0; i < 3; ++i) s.OnDelivered(0, 400000, true, t += 10'000'000);
  EXPECT_GT(s.BandwidthBps(0), 0.9 * before) << "the outage counted as a slow window";
}

// A failed link is back: the estimate measured before (here: while a fault starved the rail) no longer
// describes the path. The rail restarts from its nominal speed, so it gets chunks, becomes backlogged
// and is measured again; with the stale figure it would never be given a chunk.
TEST(Scheduler, AHealedRailStartsOverFromItsNominalSpeed) {
  Scheduler s;
  s.Reset({0, 1}, {10e9, 10e9}, nullptr);
  LearnRate(s, 0, 7500);    // 6 Mb/s: what a starved window measured
  LearnRate(s, 1, 400000);  // 320 Mb/s
  Load(s, 1, 4 * kChunk);  // as measured: 0.65 MB on the other rail, 1 MB pending
  EXPECT_FALSE(s.Admit(0, {true, true}, kChunk, 1 << 20)) << "the stale figure keeps the rail idle";
  s.OnLinkBack(0);
  EXPECT_NEAR(s.BandwidthBps(0), 10e9, 1e6) << "nominal again";
  EXPECT_TRUE(s.Admit(0, {true, true}, kChunk, 1 << 20));
  EXPECT_NEAR(s.BandwidthBps(1), 320e6, 5e6) << "the other rail keeps its estimate";
  LearnRate(s, 0, 400000);  // measured again once it carries data
  EXPECT_NEAR(s.BandwidthBps(0), 320e6, 5e6);
}

}  // namespace
