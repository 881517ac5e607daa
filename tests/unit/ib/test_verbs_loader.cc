// The libibverbs loader (net_plugin/transports/ib/verbs_loader.h): absent, broken (unversioned
// symbols) and real libraries, the RERAIL_IB_* knobs' validation, and discovery's "none" reasons.
#include <gtest/gtest.h>

#include <cstdlib>

#include "rerail/params.h"
#include "transports/ib/ib_devices.h"
#include "transports/ib/ib_qp.h"
#include "transports/ib/verbs_loader.h"

namespace {

using rr::ib::VerbsLib;

class EnvGuard {
 public:
  EnvGuard(const char* name, const char* value) : name_(name) {
    if (value) setenv(name, value, 1);
    else unsetenv(name);
    (void)rr::Params::Reload();
  }
  ~EnvGuard() {
    unsetenv(name_);
    (void)rr::Params::Reload();
  }

 private:
  const char* name_;
};

TEST(VerbsLoader, BogusPathIsAbsent) {
  auto lib = VerbsLib::Open("/nonexistent/rerail-test/libibverbs.so.1");
  EXPECT_EQ(lib->state(), VerbsLib::State::kAbsent);
  EXPECT_FALSE(lib->loaded());
  EXPECT_NE(lib->why().find("No such file"), std::string::npos) << lib->why();
  EXPECT_EQ(lib->Describe().rfind("absent: ", 0), 0u) << lib->Describe();
  EXPECT_EQ(lib->get_device_list, nullptr);
  EXPECT_EQ(lib->query_port, nullptr);
}

// A library of the same name from elsewhere (a stub, a foreign build) must not be used: under another
// version node dlvsym(..., "IBVERBS_1.1") finds nothing in it.
TEST(VerbsLoader, ForeignVersionedLibraryIsBroken) {
  auto lib = VerbsLib::Open(RERAIL_FAKE_FOREIGN_VERBS);
  EXPECT_EQ(lib->state(), VerbsLib::State::kBroken) << lib->Describe();
  EXPECT_NE(lib->why().find("has no ibv_get_device_list@IBVERBS_1.1"), std::string::npos) << lib->why();
  EXPECT_EQ(lib->get_device_list, nullptr);
  EXPECT_FALSE(lib->has_reg_dmabuf_mr());
}

// An unversioned library: glibc's dlvsym takes its definitions for any version when the object has no
// version table at all (the plain build), and refuses them when it has one (a sanitizer build links a
// versioned libc reference in). Either way it is broken: the first entry point missing is named, which is
// ibv_get_device_name (the fixture lacks it) or, where nothing unversioned matches, ibv_get_device_list.
TEST(VerbsLoader, IncompleteLibraryIsBroken) {
  auto lib = VerbsLib::Open(RERAIL_FAKE_UNVERSIONED_VERBS);
  EXPECT_EQ(lib->state(), VerbsLib::State::kBroken) << lib->Describe();
  bool named = lib->why().find("has no ibv_get_device_name@IBVERBS_1.1") != std::string::npos ||
               lib->why().find("has no ibv_get_device_list@IBVERBS_1.1") != std::string::npos;
  EXPECT_TRUE(named) << lib->why();
  EXPECT_EQ(lib->get_device_list, nullptr) << "a broken library hands out no entry point";
  EXPECT_EQ(lib->free_device_list, nullptr);
}

// Where libibverbs is installed (Debian: libibverbs1, rdma-core 44 here), every entry point resolves at
// its version; IBVERBS_1.8 and 1.12 exist since rdma-core 21 and 34.
TEST(VerbsLoader, RealLibraryLoads) {
  auto lib = VerbsLib::Open("libibverbs.so.1");
  if (lib->state() == VerbsLib::State::kAbsent) GTEST_SKIP() << "no libibverbs.so.1 on this host: " << lib->why();
  ASSERT_TRUE(lib->loaded()) << lib->Describe();
  EXPECT_NE(lib->path().find("libibverbs.so.1"), std::string::npos) << lib->path();
  for (auto* p : {reinterpret_cast<void*>(lib->get_device_list), reinterpret_cast<void*>(lib->query_port),
                  reinterpret_cast<void*>(lib->query_gid), reinterpret_cast<void*>(lib->create_qp),
                  reinterpret_cast<void*>(lib->modify_qp), reinterpret_cast<void*>(lib->get_async_event)})
    EXPECT_NE(p, nullptr);
  EXPECT_TRUE(lib->has_reg_mr_iova2());
  EXPECT_TRUE(lib->has_reg_dmabuf_mr());
  // The library is usable; whether the kernel has RDMA is discovery's business.
  std::string s = lib->port_state_str(rr::ib::vx::kPortActive);
  EXPECT_EQ(s, "active");
}

TEST(VerbsLoader, DiscoveryReportsWhyWithoutLibrary) {
  auto lib = VerbsLib::Open("/nonexistent/rerail-test/libibverbs.so.1");
  rr::ib::IbDiscovery d;
  ASSERT_TRUE(rr::ib::DiscoverIb(*lib, rr::ib::IbOptions(), &d).ok());
  EXPECT_TRUE(d.ports.empty());
  EXPECT_EQ(d.why.rfind("libibverbs absent: ", 0), 0u) << d.why;
  auto off = VerbsLib::Disabled("RERAIL_IB_LIB=none");
  ASSERT_TRUE(rr::ib::DiscoverIb(*off, rr::ib::IbOptions(), &d).ok());
  EXPECT_EQ(d.why, "libibverbs disabled: RERAIL_IB_LIB=none");
}

TEST(VerbsLoader, DiscoveryRejectsBadFilterBeforeTouchingDevices) {
  auto lib = VerbsLib::Open("/nonexistent/rerail-test/libibverbs.so.1");
  rr::ib::IbOptions opt;
  opt.hca = "mlx5_0:one";
  rr::ib::IbDiscovery d;
  rr::Status st = rr::ib::DiscoverIb(*lib, opt, &d);
  EXPECT_EQ(st.code(), rr::Code::kInvalidUsage);
  EXPECT_NE(st.message().find("RERAIL_IB_HCA='mlx5_0:one'"), std::string::npos) << st.message();
}

TEST(IbKnobs, EmptyLibIsAnError) {
  EnvGuard g("RERAIL_IB_LIB", "");
  rr::Status st = VerbsLib::CheckLibParam();
  EXPECT_EQ(st.code(), rr::Code::kInvalidUsage);
  EXPECT_NE(st.message().find("RERAIL_IB_LIB is empty"), std::string::npos) << st.message();
}

TEST(IbKnobs, MalformedValuesNameTheVariable) {
  {
    EnvGuard g("RERAIL_IB_GID_INDEX", "three");
    rr::Status st = rr::Params::Load();
    EXPECT_EQ(st.code(), rr::Code::kInvalidUsage);
    EXPECT_NE(st.message().find("RERAIL_IB_GID_INDEX='three'"), std::string::npos) << st.message();
  }
  {
    EnvGuard g("RERAIL_IB_GID_INDEX", "4096");
    EXPECT_EQ(rr::Params::Load().code(), rr::Code::kInvalidUsage);
  }
  {
    EnvGuard g("RERAIL_IB_ADDR_FAMILY", "ipx");
    EXPECT_EQ(rr::Params::Load().code(), rr::Code::kInvalidUsage);
  }
  for (const char* v : {"0", "17", "two"}) {  // QPs per link: 1..16 (a link's streams)
    EnvGuard g("RERAIL_IB_QPS_PER_LINK", v);
    rr::Status st = rr::Params::Load();
    EXPECT_EQ(st.code(), rr::Code::kInvalidUsage) << v;
    EXPECT_NE(st.message().find("RERAIL_IB_QPS_PER_LINK"), std::string::npos) << st.message();
  }
  for (const char* v : {"maybe", "2", ""}) {  // a boolean: 0/1, true/false, yes/no, on/off
    EnvGuard g("RERAIL_IB_TCP_FALLBACK", v);
    rr::Status st = rr::Params::Load();
    EXPECT_EQ(st.code(), rr::Code::kInvalidUsage) << v;
    EXPECT_NE(st.message().find("RERAIL_IB_TCP_FALLBACK='" + std::string(v) + "' is not a boolean"), std::string::npos)
        << st.message();
  }
  {
    EnvGuard g("RERAIL_IB_HCA", "mlx5_0,,mlx5_1");
    rr::ib::IbOptions o;
    rr::Status st = rr::ib::IbOptions::FromParams(&o);
    EXPECT_EQ(st.code(), rr::Code::kInvalidUsage);
    EXPECT_NE(st.message().find("empty element"), std::string::npos) << st.message();
  }
  {
    EnvGuard g("RERAIL_IB_GID_INDEX", "3");
    EnvGuard g2("RERAIL_IB_ADDR_FAMILY", "ipv6");
    rr::ib::IbOptions o;
    ASSERT_TRUE(rr::ib::IbOptions::FromParams(&o).ok());
    EXPECT_EQ(o.gid_index, 3);
    EXPECT_EQ(o.af, rr::ib::AddrFamily::kIpv6);
    EXPECT_EQ(o.roce_version, 2);
  }
}

// Issue 12: the defaults declare a dead path in well under a second (NCCL's 20/7 take ~34 s).
TEST(IbKnobs, QpTimeoutsDeclareADeadPathFast) {
  rr::ib::QpOptions o = rr::ib::QpOptions::FromParams();
  EXPECT_EQ(o.timeout, 14);
  EXPECT_EQ(o.retry_cnt, 3);
  EXPECT_LT(rr::ib::DeadPathMs(o.timeout, o.retry_cnt), 500.0);
  EXPECT_NEAR(rr::ib::DeadPathMs(14, 3), 268.4, 0.1);
  EXPECT_NEAR(rr::ib::DeadPathMs(20, 7), 34360.0, 1.0);
  EnvGuard g("RERAIL_IB_TIMEOUT", "18");
  EnvGuard g2("RERAIL_IB_RETRY_CNT", "7");
  o = rr::ib::QpOptions::FromParams();
  EXPECT_EQ(o.timeout, 18);
  EXPECT_EQ(o.retry_cnt, 7);
  EnvGuard g3("RERAIL_IB_RETRY_CNT", "8");
  EXPECT_EQ(rr::Params::Load().code(), rr::Code::kInvalidUsage) << "retry_cnt is 3 bits";
}

}  // namespace
