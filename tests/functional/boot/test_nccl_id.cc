// Store-less ids against the real libnccl: ncclGetUniqueId under NCCL_COMM_ID must return exactly the
// bytes rerail computes locally. Each NCCL call runs in a child process (NCCL caches its bootstrap
// interface once per process). Skips when no libnccl can be loaded.
#include <arpa/inet.h>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <ifaddrs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <thread>

#include "rerail/boot/nccl.h"
#include "rerail/bootstrap.h"

namespace rr::boot {
namespace {

struct ChildResult {
  bool ok = false;
  std::string id;     // 128 bytes when ok
  std::string error;  // NCCL's failure otherwise
};

// Runs ncclGetUniqueId with NCCL_COMM_ID=comm_id in a child process.
ChildResult NcclIdInChild(const std::string& comm_id) {
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    setenv("NCCL_COMM_ID", comm_id.c_str(), 1);
    setenv("NCCL_DEBUG", "NONE", 1);
    std::unique_ptr<NcclLib> lib;
    Status s = NcclLib::Open(RERAIL_TEST_NCCL_LIB, &lib);
    unsigned char id[kNcclIdBytes];
    if (s.ok()) s = lib->GetUniqueId(id);
    std::string msg = s.ok() ? "K" + std::string(reinterpret_cast<char*>(id), kNcclIdBytes) : "E" + s.ToString();
    (void)!write(fds[1], msg.data(), msg.size());
    _exit(0);
  }
  close(fds[1]);
  std::string msg;
  char buf[512];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof(buf))) > 0) msg.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  ChildResult r;
  if (!msg.empty() && msg[0] == 'K') r.ok = true, r.id = msg.substr(1);
  else r.error = msg.empty() ? "child died" : msg.substr(1);
  return r;
}

std::string Hex(const std::string& b) {
  std::string h;
  char x[4];
  for (unsigned char c : b) std::snprintf(x, sizeof(x), "%02x", c), h += x;
  return h;
}

class BootNcclId : public ::testing::Test {
 protected:
  void SetUp() override {
    std::unique_ptr<NcclLib> lib;
    Status s = NcclLib::Open(RERAIL_TEST_NCCL_LIB, &lib);
    if (!s.ok()) GTEST_SKIP() << "no libnccl to compare with: " << s.message();
    version_ = lib->version();
  }
  void ExpectSameAsNccl(const std::string& comm_id) {
    ChildResult nccl = NcclIdInChild(comm_id);
    ASSERT_TRUE(nccl.ok) << "NCCL refused NCCL_COMM_ID=" << comm_id << ": " << nccl.error;
    unsigned char mine[kNcclIdBytes];
    ASSERT_TRUE(BuildNcclId(comm_id, kNcclCommIdMagic, mine).ok());
    std::string m(reinterpret_cast<char*>(mine), kNcclIdBytes);
    EXPECT_EQ(Hex(m), Hex(nccl.id)) << "NCCL_COMM_ID=" << comm_id << " (NCCL " << version_ << ")";
    std::printf("NCCL_COMM_ID=%-24s id[0:40]=%s  equal=%d\n", comm_id.c_str(), Hex(m.substr(0, 40)).c_str(), m == nccl.id);
  }
  int version_ = 0;
};

TEST_F(BootNcclId, Ipv4EqualsNcclBytes) { ExpectSameAsNccl("127.0.0.1:29500"); }
TEST_F(BootNcclId, Ipv6EqualsNcclBytes) { ExpectSameAsNccl("[::1]:29501"); }
TEST_F(BootNcclId, HostNameEqualsNcclBytes) { ExpectSameAsNccl("localhost:4000"); }

// Every non-loopback address of this machine (eth0 here: an IPv4 and a global IPv6).
TEST_F(BootNcclId, LocalInterfaceAddressesEqualNcclBytes) {
  ifaddrs* list = nullptr;
  ASSERT_EQ(getifaddrs(&list), 0);
  int n = 0;
  for (ifaddrs* i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr || std::strcmp(i->ifa_name, "lo") == 0) continue;
    char host[INET6_ADDRSTRLEN];
    if (i->ifa_addr->sa_family == AF_INET) {
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, host, sizeof(host));
      ExpectSameAsNccl(std::string(host) + ":12345"), ++n;
    } else if (i->ifa_addr->sa_family == AF_INET6 && !IN6_IS_ADDR_LINKLOCAL(&reinterpret_cast<sockaddr_in6*>(i->ifa_addr)->sin6_addr)) {
      inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(i->ifa_addr)->sin6_addr, host, sizeof(host));
      ExpectSameAsNccl("[" + std::string(host) + "]:29501"), ++n;
    }
  }
  freeifaddrs(list);
  if (n == 0) GTEST_SKIP() << "no non-loopback address on this machine";
}

// Through the exported C API of librerail-bootstrap.so, for a job and a group.
TEST_F(BootNcclId, JobGroupIdThroughSharedLibrary) {
  void* so = dlopen(RERAIL_TEST_BOOT_SO, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(so, nullptr) << dlerror();
  auto create = reinterpret_cast<decltype(&rerailJobCreate)>(dlsym(so, "rerailJobCreate"));
  auto uid0 = reinterpret_cast<decltype(&rerailUniqueId)>(dlsym(so, "rerailUniqueId"));
  auto uid = reinterpret_cast<decltype(&rerailUniqueIdEx)>(dlsym(so, "rerailUniqueIdEx"));
  auto commid = reinterpret_cast<decltype(&rerailCommIdString)>(dlsym(so, "rerailCommIdString"));
  auto destroy = reinterpret_cast<decltype(&rerailJobDestroy)>(dlsym(so, "rerailJobDestroy"));
  ASSERT_TRUE(create && uid0 && uid && commid && destroy);
  EXPECT_EQ(dlsym(so, "_ZN2rr4boot3Job6CreateERKNS0_7JobSpecEPSt10unique_ptrIS1_St14default_deleteIS1_EE"), nullptr)
      << "C++ internals must stay hidden";
  rerailJob* job = nullptr;
  ASSERT_EQ(create("localhost,127.0.0.2", 8, 21000, 512, "id-test", &job), RERAIL_SUCCESS);
  for (uint64_t group : {0ull, 1ull, 41ull}) {
    char cid[128];
    ASSERT_EQ(commid(job, group, cid, sizeof(cid)), RERAIL_SUCCESS);
    rerailUniqueId_t id, jid;
    ASSERT_EQ(uid0(job, group, &id), RERAIL_SUCCESS);
    ASSERT_EQ(uid(job, group, RERAIL_ID_JOB_MAGIC, &jid), RERAIL_SUCCESS);
    ChildResult nccl = NcclIdInChild(cid);
    ASSERT_TRUE(nccl.ok) << nccl.error;
    EXPECT_EQ(Hex(std::string(id.internal, 128)), Hex(nccl.id)) << cid;
    EXPECT_NE(std::memcmp(jid.internal, id.internal, 8), 0);                // own magic
    EXPECT_EQ(std::memcmp(jid.internal + 8, id.internal + 8, 120), 0);      // same address
  }
  destroy(job);
  dlclose(so);
}

// NCCL and rerail apply the same subnet rule: no local interface on 10.1.2.3's subnet here.
TEST_F(BootNcclId, SubnetRuleAgreesWithNccl) {
  SockAddr a;
  ASSERT_TRUE(ParseHostPort("10.1.2.3:5000", &a).ok());
  std::string ifname;
  Status mine = FindInterfaceOnSubnet(a, &ifname);
  ChildResult nccl = NcclIdInChild("10.1.2.3:5000");
  if (mine.ok()) GTEST_SKIP() << "this machine has an interface on 10.1.2.0 (" << ifname << ")";
  EXPECT_FALSE(nccl.ok) << "NCCL accepted an address no local interface shares a subnet with";
  EXPECT_NE(mine.message().find("no local interface is on the subnet of 10.1.2.3:5000"), std::string::npos);
  ASSERT_TRUE(ParseHostPort("127.0.0.1:5000", &a).ok());
  EXPECT_TRUE(FindInterfaceOnSubnet(a, &ifname).ok());
  EXPECT_EQ(ifname, "lo");
}

// Multi-root init without a store: the block roots' ncclGetUniqueId ids (each starts a real NCCL root
// in its process) reach every rank through the rootless exchange. Child process: NCCL state stays there.
TEST_F(BootNcclId, ScalableRootIdsReachEveryRank) {
  EXPECT_EQ(ScalableRootRank(6, 2, 1), 3);
  EXPECT_EQ(ScalableRootRank(7, 3, 2), 5);  // blocks of 3, 2, 2
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    unsetenv("NCCL_COMM_ID");
    setenv("NCCL_DEBUG", "NONE", 1);
    std::string verdict = "ok";
    std::unique_ptr<NcclLib> lib;
    JobSpec spec;
    spec.hosts = {"127.77.201.1", "127.77.201.2"};
    spec.ranks_per_host = 3;
    spec.port_base = 20000 + static_cast<int>(getpid() % 9000);
    spec.port_span = 64;
    std::unique_ptr<Job> job;
    if (!NcclLib::Open(RERAIL_TEST_NCCL_LIB, &lib).ok() || !Job::Create(spec, &job).ok()) verdict = "setup failed";
    std::vector<std::string> ids(6);
    std::vector<Status> st(6);
    std::vector<std::thread> t;
    for (int r = 0; verdict == "ok" && r < 6; ++r)
      t.emplace_back([&, r] { st[r] = GatherRootIds(*lib, *job, 0, r, 2, 20000, &ids[r]); });
    for (auto& th : t) th.join();
    for (int r = 0; verdict == "ok" && r < 6; ++r) {
      if (!st[r].ok()) verdict = "rank " + std::to_string(r) + ": " + st[r].ToString();
      else if (ids[r] != ids[0] || ids[r].size() != 2 * kNcclIdBytes) verdict = "rank " + std::to_string(r) + " differs";
    }
    if (verdict == "ok") {
      uint64_t m0, m1;
      std::memcpy(&m0, ids[0].data(), 8);
      std::memcpy(&m1, ids[0].data() + kNcclIdBytes, 8);
      uint16_t fam;
      std::memcpy(&fam, ids[0].data() + 8, 2);
      if (m0 == kNcclCommIdMagic || m0 == m1) verdict = "root ids are not two random-magic NCCL ids";
      if (fam != AF_INET && fam != AF_INET6) verdict = "root id has no socket address";
    }
    (void)!write(fds[1], verdict.data(), verdict.size());
    _exit(0);
  }
  close(fds[1]);
  std::string verdict;
  char buf[512];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof(buf))) > 0) verdict.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  waitpid(pid, nullptr, 0);
  EXPECT_EQ(verdict, "ok");
}

TEST(BootNcclLib, NotALibncclIsRejectedClearly) {
  std::unique_ptr<NcclLib> lib;
  Status s = NcclLib::Open("libc.so.6", &lib);
  EXPECT_EQ(s.code(), Code::kInvalidUsage);
  EXPECT_NE(s.message().find("is not a usable libnccl: it has no ncclGetVersion"), std::string::npos) << s.message();
  s = NcclLib::Open("/nonexistent/libnccl.so.2", &lib);
  EXPECT_NE(s.message().find("cannot load libnccl"), std::string::npos) << s.message();
}

TEST(BootNcclLib, LocalAddressCheck) {
  SockAddr a;
  ASSERT_TRUE(ParseHostPort("127.0.0.2:1", &a).ok());
  EXPECT_TRUE(IsLocalAddress(a));
  ASSERT_TRUE(ParseHostPort("203.0.113.9:1", &a).ok());
  EXPECT_FALSE(IsLocalAddress(a));
}

}  // namespace
}  // namespace rr::boot
