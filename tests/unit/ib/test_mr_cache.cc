// MrCache (net_plugin/transports/ib/ib_mr_cache.h) over an in-memory registrar: page alignment, one
// registration per rail, reuse of containing ranges, reference counts, rollback when a rail fails.
// The same cache over real verbs runs in the rxe guest (tests/functional/ib/verbs_rc_test.cc).
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <utility>

#include "transports/ib/ib_mr_cache.h"

namespace {

using rr::ib::MrCache;
using rr::ib::MrHandle;

// Hands out distinct keys, remembers what is registered per rail, fails the n-th call on a rail.
class TableRegistrar : public rr::ib::MrRegistrar {
 public:
  explicit TableRegistrar(int rails) : rails_(rails) {}
  int rails() const override { return rails_; }
  rr::Status Register(int rail, void* addr, size_t len, uint32_t* lkey, uint32_t* rkey, void** token) override {
    ++calls;
    if (rail == fail_rail) return rr::Status(rr::Code::kSystemError, "ibv_reg_mr(rail): Cannot allocate memory");
    uint32_t k = ++next_;
    *lkey = 0x1000 + k;
    *rkey = 0x2000 + k;
    live[k] = {rail, {reinterpret_cast<uintptr_t>(addr), len}};
    *token = reinterpret_cast<void*>(static_cast<uintptr_t>(k));
    return rr::Status::Ok();
  }
  void Deregister(int rail, void* token) override {
    auto k = static_cast<uint32_t>(reinterpret_cast<uintptr_t>(token));
    auto it = live.find(k);
    ASSERT_NE(it, live.end()) << "double or foreign deregistration";
    EXPECT_EQ(it->second.first, rail);
    live.erase(it);
  }
  int fail_rail = -1;
  int calls = 0;
  std::map<uint32_t, std::pair<int, std::pair<uintptr_t, size_t>>> live;  // key -> (rail, range)

 private:
  int rails_;
  uint32_t next_ = 0;
};

void* P(uintptr_t a) { return reinterpret_cast<void*>(a); }

TEST(MrCache, AlignsToPagesAndRegistersOnEveryRail) {
  TableRegistrar reg(3);
  MrCache cache(&reg, 4096);
  MrHandle* h = nullptr;
  ASSERT_TRUE(cache.Register(P(0x10010), 100, &h).ok());
  EXPECT_EQ(h->base, 0x10000u);
  EXPECT_EQ(h->len, 4096u);
  ASSERT_EQ(h->keys.size(), 3u);
  ASSERT_EQ(reg.live.size(), 3u);
  std::set<int> rails;
  for (auto& [k, v] : reg.live) {
    rails.insert(v.first);
    EXPECT_EQ(v.second, std::make_pair(uintptr_t{0x10000}, size_t{4096}));
  }
  EXPECT_EQ(rails, (std::set<int>{0, 1, 2}));
  EXPECT_NE(h->keys[0].rkey, h->keys[1].rkey);
  // A range that straddles a page boundary covers both pages.
  MrHandle* h2 = nullptr;
  ASSERT_TRUE(cache.Register(P(0x20ff0), 0x20, &h2).ok());
  EXPECT_EQ(h2->base, 0x20000u);
  EXPECT_EQ(h2->len, 8192u);
}

TEST(MrCache, ReusesAContainingRangeAndCountsReferences) {
  TableRegistrar reg(2);
  MrCache cache(&reg, 4096);
  MrHandle *big = nullptr, *inner = nullptr, *other = nullptr;
  ASSERT_TRUE(cache.Register(P(0x40000), 3 * 4096, &big).ok());
  int calls = reg.calls;
  ASSERT_TRUE(cache.Register(P(0x41005), 10, &inner).ok());
  EXPECT_EQ(inner, big) << "contained: same registration";
  EXPECT_EQ(reg.calls, calls) << "nothing registered again";
  ASSERT_TRUE(cache.Register(P(0x42000), 2 * 4096, &other).ok());
  EXPECT_NE(other, big) << "reaches beyond: a new registration";
  EXPECT_EQ(cache.entries(), 2u);
  ASSERT_TRUE(cache.Deregister(big).ok());
  EXPECT_EQ(reg.live.size(), 4u) << "one reference left";
  ASSERT_TRUE(cache.Deregister(inner).ok());
  EXPECT_EQ(reg.live.size(), 2u) << "last reference: every rail deregistered";
  EXPECT_EQ(cache.entries(), 1u);
  ASSERT_TRUE(cache.Deregister(other).ok());
  EXPECT_TRUE(reg.live.empty());
}

TEST(MrCache, FailureOnOneRailRollsBackTheOthers) {
  TableRegistrar reg(3);
  reg.fail_rail = 2;
  MrCache cache(&reg, 4096);
  MrHandle* h = nullptr;
  rr::Status st = cache.Register(P(0x10000), 4096, &h);
  EXPECT_EQ(st.code(), rr::Code::kSystemError);
  EXPECT_NE(st.message().find("regMr on rail 2"), std::string::npos) << st.message();
  EXPECT_TRUE(reg.live.empty()) << "rails 0 and 1 deregistered again";
  EXPECT_EQ(cache.entries(), 0u);
}

TEST(MrCache, MisuseIsReportedAndLeftoversReleased) {
  TableRegistrar reg(2);
  {
    MrCache cache(&reg, 4096);
    MrHandle stranger;
    EXPECT_EQ(cache.Deregister(&stranger).code(), rr::Code::kInternalError);
    MrHandle* h = nullptr;
    EXPECT_EQ(cache.Register(nullptr, 10, &h).code(), rr::Code::kInvalidArgument);
    EXPECT_EQ(cache.Register(P(0x1000), 0, &h).code(), rr::Code::kInvalidArgument);
    ASSERT_TRUE(cache.Register(P(0x1000), 10, &h).ok());
    EXPECT_EQ(reg.live.size(), 2u);
  }
  EXPECT_TRUE(reg.live.empty()) << "the cache's destructor deregisters what NCCL left";
}

}  // namespace
