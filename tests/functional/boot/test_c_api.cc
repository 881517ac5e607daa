// The exported C API of librerail-bootstrap.so, loaded the way an application or framework would
// (dlopen RTLD_NOW | RTLD_LOCAL): argument errors, last-error text, environment aliases, the
// rootless all-gather, and store-less init reaching the real libnccl.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <thread>

#include "rerail/bootstrap.h"

namespace {

struct Api {
  void* so = nullptr;
#define RR_API_FN(name) decltype(&::name) name = nullptr;
  RR_API_FN(rerailJobCreate)
  RR_API_FN(rerailJobFromEnv)
  RR_API_FN(rerailJobDestroy)
  RR_API_FN(rerailJobNumRanks)
  RR_API_FN(rerailRootlessRequested)
  RR_API_FN(rerailAddress)
  RR_API_FN(rerailCommIdString)
  RR_API_FN(rerailUniqueIdEx)
  RR_API_FN(rerailUniqueIdFromString)
  RR_API_FN(rerailAllGather)
  RR_API_FN(rerailCommInitStoreless)
  RR_API_FN(rerailCommRecover)
  RR_API_FN(rerailGetLastError)
#undef RR_API_FN
  // fresh: a private copy (dlmopen into a new namespace) whose parameter cache is still empty, for
  // cases that set RERAIL_* variables; a process reads its parameters once.
  bool Load(bool fresh = false) {
    so = fresh ? dlmopen(LM_ID_NEWLM, RERAIL_TEST_BOOT_SO, RTLD_NOW) : dlopen(RERAIL_TEST_BOOT_SO, RTLD_NOW | RTLD_LOCAL);
    if (!so) return false;
#define RR_API_SYM(name) name = reinterpret_cast<decltype(name)>(dlsym(so, #name)); if (!name) return false;
    RR_API_SYM(rerailJobCreate) RR_API_SYM(rerailJobFromEnv) RR_API_SYM(rerailJobDestroy) RR_API_SYM(rerailJobNumRanks)
    RR_API_SYM(rerailRootlessRequested) RR_API_SYM(rerailAddress) RR_API_SYM(rerailCommIdString)
    RR_API_SYM(rerailUniqueIdEx) RR_API_SYM(rerailUniqueIdFromString) RR_API_SYM(rerailAllGather)
    RR_API_SYM(rerailCommInitStoreless) RR_API_SYM(rerailCommRecover) RR_API_SYM(rerailGetLastError)
#undef RR_API_SYM
    return true;
  }
};

// Runs the C helper (a fresh process: parameters are read once per process) with `env` added.
std::string RunChild(const char* which, const std::vector<std::pair<const char*, const char*>>& env,
                     const std::vector<const char*>& unset = {}) {
  int fds[2];
  if (pipe(fds) != 0) return "pipe failed";
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    for (const char* u : unset) unsetenv(u);
    for (const auto& kv : env) setenv(kv.first, kv.second, 1);
    execl(RERAIL_TEST_CHILD, RERAIL_TEST_CHILD, RERAIL_TEST_BOOT_SO, which, static_cast<char*>(nullptr));
    _exit(127);
  }
  close(fds[1]);
  std::string out;
  char buf[1024];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  waitpid(pid, nullptr, 0);
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

const std::vector<const char*> kJobVars = {"RERAIL_HOSTS", "SLURM_JOB_NODELIST", "RERAIL_PORT_BASE", "HPCT_PORT_BASE",
                                           "RERAIL_RANKS_PER_HOST", "N_PROC_PER_NODE", "RERAIL_ROOTLESS",
                                           "HPCT_USE_ROOTLESS", "RERAIL_NCCL_LIB"};

class BootCApi : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(api_.Load()) << "cannot load " << RERAIL_TEST_BOOT_SO << ": " << dlerror();
    setenv("NCCL_DEBUG", "NONE", 1);  // expected WARN lines are asserted through rerailGetLastError
  }
  Api api_;
};

TEST_F(BootCApi, BadInputGetsClearErrors) {
  rerailJob* job = nullptr;
  EXPECT_EQ(api_.rerailJobCreate(nullptr, 1, 20000, 0, nullptr, &job), RERAIL_INVALID_ARGUMENT);
  EXPECT_STREQ(api_.rerailGetLastError(), "invalidArgument: hosts is NULL");
  EXPECT_EQ(api_.rerailJobCreate("gpu[001-004", 1, 20000, 0, nullptr, &job), RERAIL_INVALID_USAGE);
  EXPECT_NE(std::strstr(api_.rerailGetLastError(), "malformed node list"), nullptr) << api_.rerailGetLastError();
  EXPECT_EQ(api_.rerailJobCreate("no-such-host.invalid", 1, 20000, 0, nullptr, &job), RERAIL_INVALID_USAGE);
  EXPECT_NE(std::strstr(api_.rerailGetLastError(), "unknown host 'no-such-host.invalid'"), nullptr);
  EXPECT_EQ(api_.rerailJobCreate("127.0.0.1", 1, 70000, 0, nullptr, &job), RERAIL_INVALID_USAGE);
  EXPECT_NE(std::strstr(api_.rerailGetLastError(), "out of range"), nullptr);
  EXPECT_EQ(api_.rerailJobCreate("127.0.0.1", 1, 40000, 0, nullptr, &job), RERAIL_INVALID_USAGE);
  EXPECT_NE(std::strstr(api_.rerailGetLastError(), "ephemeral range"), nullptr);
  EXPECT_EQ(job, nullptr);

  ASSERT_EQ(api_.rerailJobCreate("127.0.0.1,127.0.0.2", 2, 20000, 64, "c-api", &job), RERAIL_SUCCESS);
  EXPECT_STREQ(api_.rerailGetLastError(), "");
  EXPECT_EQ(api_.rerailJobNumRanks(job), 4);
  char buf[64];
  EXPECT_EQ(api_.rerailAddress(job, 4, 0, buf, sizeof(buf)), RERAIL_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(api_.rerailGetLastError(), "rank 4 is outside 0..3"), nullptr);
  EXPECT_EQ(api_.rerailAddress(job, 3, 0, buf, 4), RERAIL_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(api_.rerailGetLastError(), "too small"), nullptr);
  ASSERT_EQ(api_.rerailAddress(job, 3, 5, buf, sizeof(buf)), RERAIL_SUCCESS);
  EXPECT_STREQ(buf, "127.0.0.2:20011");
  rerailUniqueId_t id;
  EXPECT_EQ(api_.rerailUniqueIdEx(job, 0, 7, &id), RERAIL_INVALID_ARGUMENT);
  EXPECT_EQ(api_.rerailUniqueIdFromString("10.0.0.1", 0, &id), RERAIL_INVALID_USAGE);
  EXPECT_NE(std::strstr(api_.rerailGetLastError(), "is not <ipv4-or-name>:<port>"), nullptr);
  int comm = 0;
  EXPECT_EQ(api_.rerailCommRecover(job, nullptr, 0, &comm, nullptr, 0, 9, 0, &comm), RERAIL_INVALID_ARGUMENT);
  api_.rerailJobDestroy(job);
  api_.rerailJobDestroy(nullptr);
}

TEST_F(BootCApi, EnvironmentAndHpctAliases) {
  EXPECT_EQ(RunChild("env", {{"SLURM_JOB_NODELIST", "127.0.0.[1-2]"}, {"N_PROC_PER_NODE", "4"},
                             {"HPCT_PORT_BASE", "21000"}, {"HPCT_USE_ROOTLESS", "1"}, {"SLURM_JOB_ID", "4242"}},
                     kJobVars),
            "8 127.0.0.1:21004 rootless=1");
  // The RERAIL_ name wins over its alias.
  EXPECT_EQ(RunChild("env", {{"RERAIL_HOSTS", "127.0.0.1"}, {"HPCT_PORT_BASE", "21000"}, {"RERAIL_PORT_BASE", "22000"},
                             {"HPCT_USE_ROOTLESS", "0"}}, kJobVars),
            "1 127.0.0.1:22001 rootless=0");
  std::string out = RunChild("env", {}, kJobVars);
  EXPECT_NE(out.find("no hosts: set RERAIL_HOSTS"), std::string::npos) << out;
  out = RunChild("env", {{"RERAIL_HOSTS", "127.0.0.1"}, {"HPCT_PORT_BASE", "abc"}}, kJobVars);
  EXPECT_NE(out.find("HPCT_PORT_BASE='abc' is not an integer in 1..65535"), std::string::npos) << out;
  out = RunChild("env", {{"RERAIL_HOSTS", "127.0.0.1"}, {"RERAIL_PORT_BASE", "40000"}}, kJobVars);
  EXPECT_NE(out.find("overlap the ephemeral range"), std::string::npos) << out;
}

TEST_F(BootCApi, AllGatherAcrossThreads) {
  rerailJob* job = nullptr;
  int base = 20000 + static_cast<int>(getpid() % 9000);
  ASSERT_EQ(api_.rerailJobCreate("127.0.0.1,127.0.0.2,127.0.0.3", 3, base, 512, "c-api-ag", &job), RERAIL_SUCCESS);
  const int n = 9;
  std::vector<std::vector<uint64_t>> recv(n, std::vector<uint64_t>(n));
  std::vector<int> rc(n);
  std::vector<std::thread> t;
  for (int r = 0; r < n; ++r)
    t.emplace_back([&, r] {
      uint64_t mine = 1000 + static_cast<uint64_t>(r);
      rc[r] = api_.rerailAllGather(job, 7, r, &mine, sizeof(mine), recv[r].data(), 20000);
    });
  for (auto& th : t) th.join();
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(rc[r], RERAIL_SUCCESS) << r;
    for (int i = 0; i < n; ++i) EXPECT_EQ(recv[r][i], 1000u + static_cast<uint64_t>(i));
  }
  uint64_t x = 0;
  EXPECT_EQ(api_.rerailAllGather(job, 7, 0, &x, 0, &x, 100), RERAIL_INVALID_ARGUMENT);
  api_.rerailJobDestroy(job);
}

// Store-less init drives the real libnccl up to ncclCommInitRank. Without a GPU NCCL refuses there;
// with one, a 1-rank communicator is created and recovered by re-creation with the next group.
TEST_F(BootCApi, CommInitStorelessReachesNccl) {
  void* nccl = dlopen(RERAIL_TEST_NCCL_LIB, RTLD_NOW | RTLD_LOCAL);
  if (!nccl) GTEST_SKIP() << "no libnccl: " << dlerror();
  dlclose(nccl);
  std::string base = std::to_string(20000 + getpid() % 9000);
  std::string out = RunChild("init", {{"RERAIL_HOSTS", "127.0.0.1"}, {"RERAIL_PORT_BASE", base.c_str()},
                                      {"RERAIL_NCCL_LIB", RERAIL_TEST_NCCL_LIB}, {"NCCL_DEBUG", "NONE"}}, kJobVars);
  // NCCL_COMM_ID was set to rank 0's planned address before NCCL was called.
  EXPECT_NE(out.find(" env=127.0.0.1:" + base), std::string::npos) << out;
  if (out.rfind("rc=0", 0) == 0) {
    EXPECT_NE(out.find("recover=0 group=1"), std::string::npos) << out;
  } else {
    EXPECT_NE(out.find("ncclCommInitRank failed"), std::string::npos) << out;  // NCCL itself refused (no GPU)
  }
  std::printf("%s\n", out.c_str());
}

TEST_F(BootCApi, CommInitScalableReachesNccl) {
  void* nccl = dlopen(RERAIL_TEST_NCCL_LIB, RTLD_NOW | RTLD_LOCAL);
  if (!nccl) GTEST_SKIP() << "no libnccl: " << dlerror();
  dlclose(nccl);
  std::string base = std::to_string(20000 + getpid() % 9000);
  std::string out = RunChild("scalable", {{"RERAIL_HOSTS", "127.0.0.1"}, {"RERAIL_PORT_BASE", base.c_str()},
                                          {"RERAIL_NCCL_LIB", RERAIL_TEST_NCCL_LIB}, {"NCCL_DEBUG", "NONE"}}, kJobVars);
  if (out.rfind("rc=0", 0) != 0) {
    EXPECT_NE(out.find("ncclCommInitRankScalable failed"), std::string::npos) << out;  // NCCL refused (no GPU)
  }
  std::printf("%s\n", out.c_str());
}

TEST_F(BootCApi, MissingLibncclIsReportedClearly) {
  std::string out = RunChild("init", {{"RERAIL_HOSTS", "127.0.0.1"}, {"RERAIL_PORT_BASE", "20000"},
                                      {"RERAIL_NCCL_LIB", "/nonexistent/libnccl.so.2"}}, kJobVars);
  EXPECT_EQ(out.rfind("rc=5 env= err=invalidUsage: cannot load libnccl '/nonexistent/libnccl.so.2'", 0), 0u) << out;
}

}  // namespace
