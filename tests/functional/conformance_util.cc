#include "conformance_util.h"

#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

namespace conf {

using nlohmann::json;
using rr::Status;

namespace {
char g_case_name[256] = "?";
void OnAlarm(int) {
  const char* m1 = "\nconformance WATCHDOG: case ";
  const char* m2 = " ran past its time bound (plugin hang?)\n";
  (void)!write(2, m1, strlen(m1));
  (void)!write(2, g_case_name, strlen(g_case_name));
  (void)!write(2, m2, strlen(m2));
  _exit(3);  // the peer dies with us (PR_SET_PDEATHSIG)
}
}  // namespace

void UseShortFailureBounds() {
  setenv("RERAIL_GIVEUP_MS", std::to_string(kGiveupMs).c_str(), 1);
  setenv("RERAIL_CONNECT_TIMEOUT_MS", std::to_string(kConnectTimeoutMs).c_str(), 1);
}

void ArmWatchdog(unsigned seconds) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  if (info != nullptr)
    snprintf(g_case_name, sizeof(g_case_name), "%s.%s", info->test_suite_name(), info->name());
  signal(SIGALRM, OnAlarm);
  alarm(seconds * TimeScale());
}

Status Pair::Open(const std::vector<std::string>& peer_env) {
  std::vector<std::string> args;
  if (EchoPluginLog()) args.push_back("-v");
  RR_CHECK(peer_.Spawn(PeerExe(), args, peer_env));
  json r;
  RR_CHECK(peer_.Call({{"cmd", "open"}, {"plugin", PluginPath()}, {"dev", 0}}, &r, ScaledMs(30000)));
  return nb::Endpoint::Open(PluginPath(), 0, &ep_);
}

Status Pair::Wire(int n_out, int n_in) {
  json r;
  if (n_out > 0) {  // the peer listens, this side connects
    RR_CHECK(peer_.Call({{"cmd", "listen"}, {"n", n_out}}, &r, ScaledMs(30000)));
    std::vector<nb::Handle> hs;
    for (const auto& hex : r.at("handles")) {
      nb::Handle h;
      if (!nb::FromHex(hex.get<std::string>(), &h)) return Status::Internal("bad handle hex from peer");
      hs.push_back(h);
    }
    std::vector<void*> comms;
    Status s = ep_->ConnectAll(hs, &comms, ScaledMs(30000));
    Status pr = peer_.Reply(&r, ScaledMs(30000));
    RR_CHECK(s);
    RR_CHECK(pr);
    send_.insert(send_.end(), comms.begin(), comms.end());
  }
  if (n_in > 0) {  // this side listens, the peer connects
    std::vector<void*> lcomms;
    json handles = json::array();
    for (int i = 0; i < n_in; ++i) {
      nb::Handle h;
      void* l = nullptr;
      RR_CHECK(ep_->Listen(&h, &l));
      lcomms.push_back(l);
      handles.push_back(nb::ToHex(h));
    }
    RR_CHECK(peer_.Send({{"cmd", "connect"}, {"handles", handles}}));
    std::vector<void*> comms;
    Status s = ep_->AcceptAll(lcomms, &comms, ScaledMs(30000));
    Status pr = peer_.Reply(&r, ScaledMs(30000));
    RR_CHECK(s);
    RR_CHECK(pr);
    recv_.insert(recv_.end(), comms.begin(), comms.end());
  }
  return Status::Ok();
}

Status Pair::Run(const nb::Plan& unscaled, nb::PlanResult* result) {
  nb::Plan plan = unscaled;
  plan.timeout_ms = ScaledMs(plan.timeout_ms);
  RR_CHECK(peer_.Send({{"cmd", "run"}, {"plan", plan.Mirror().ToJson()}}));
  nb::PlanResult local;
  Status s = nb::RunPlan(ep_->net(), plan, send_, recv_, &local);
  json r;
  // If this side failed the peer may be stuck waiting for it; its own plan timeout bounds the wait.
  Status pr = peer_.Reply(&r, plan.timeout_ms + 15000);
  if (result != nullptr) *result = local;
  RR_CHECK(s);
  return pr;
}

Status Pair::CloseAll() {
  json r;
  Status st = peer_.Call({{"cmd", "close"}}, &r, ScaledMs(30000));
  for (void* c : send_)
    if (Status s = nb::FromNccl(ep_->net().CloseSend(c), "closeSend"); !s.ok()) st = s;
  for (void* c : recv_)
    if (Status s = nb::FromNccl(ep_->net().CloseRecv(c), "closeRecv"); !s.ok()) st = s;
  send_.clear(), recv_.clear();
  return st;
}

std::vector<unsigned long> SocketInodes() {
  std::vector<unsigned long> out;
  DIR* d = opendir("/proc/self/fd");
  if (d == nullptr) return out;
  while (dirent* e = readdir(d)) {
    char link[300], target[128];
    snprintf(link, sizeof(link), "/proc/self/fd/%s", e->d_name);
    ssize_t n = readlink(link, target, sizeof(target) - 1);
    if (n <= 0) continue;
    target[n] = '\0';
    unsigned long ino = 0;
    if (sscanf(target, "socket:[%lu]", &ino) == 1) out.push_back(ino);
  }
  closedir(d);
  return out;
}

std::vector<ListenPort> ListeningPorts() {
  std::vector<unsigned long> inodes = SocketInodes();
  std::set<unsigned long> mine(inodes.begin(), inodes.end());
  std::vector<ListenPort> ports;
  for (const char* file : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    bool v6 = std::strstr(file, "tcp6") != nullptr;
    std::ifstream in(file);
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
      std::istringstream ss(line);
      std::string sl, local, remote, state, txrx, trwhen, retr, uid, timeout;
      unsigned long inode = 0;
      ss >> sl >> local >> remote >> state >> txrx >> trwhen >> retr >> uid >> timeout >> inode;
      if (state != "0A" || mine.count(inode) == 0) continue;  // 0A = LISTEN
      ports.push_back({static_cast<int>(std::stoul(local.substr(local.find(':') + 1), nullptr, 16)), v6});
    }
  }
  return ports;
}

}  // namespace conf
