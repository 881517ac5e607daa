#include "peer.h"

#include <cstdio>
#include <memory>
#include <mutex>
#include <thread>

#include "plan.h"

namespace rr::netbench {

using nlohmann::json;

std::string ToHex(const Handle& h) {
  static const char* kDigits = "0123456789abcdef";
  std::string s;
  for (char c : h) {
    s += kDigits[(static_cast<unsigned char>(c) >> 4) & 0xf];
    s += kDigits[static_cast<unsigned char>(c) & 0xf];
  }
  return s;
}

bool FromHex(const std::string& s, Handle* h) {
  if (s.size() != 2 * h->size()) return false;
  auto nib = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
  for (size_t i = 0; i < h->size(); ++i) (*h)[i] = static_cast<char>(nib(s[2 * i]) << 4 | nib(s[2 * i + 1]));
  return true;
}

Status PeerClient::Reply(json* resp, uint64_t timeout_ms) {
  std::string text;
  RR_CHECK(peer_.oob().Recv(&text, timeout_ms));
  *resp = json::parse(text, nullptr, false);
  if (resp->is_discarded()) return Status::Internal("peer sent a malformed reply: " + text);
  if (resp->value("ok", false)) return Status::Ok();
  return Status(static_cast<Code>(resp->value("code", 3)), "peer: " + resp->value("error", std::string("?")));
}

Status PeerClient::Call(const json& req, json* resp, uint64_t timeout_ms) {
  RR_CHECK(Send(req));
  return Reply(resp, timeout_ms);
}

namespace {

json Fail(const Status& s) {
  json warns = json::array();
  for (const auto& l : LogCapture::Snapshot())
    if (l.level == 2) warns.push_back(l.text);
  return {{"ok", false}, {"code", static_cast<int>(s.code())}, {"error", s.ToString()}, {"warns", warns}};
}

class PeerState {
 public:
  explicit PeerState(Oob& oob) : oob_(oob) {}
  ~PeerState() {
    if (async_.joinable()) async_.join();
  }
  // Returns false when the loop must end.
  bool Dispatch(const json& req);

 private:
  json Open(const json& req);
  json Listen(const json& req);
  json Connect(const json& req);
  json Run(const Plan& plan);
  json Close();
  json Counts() { return {{"ok", true}, {"fds", CountOpenFds()}, {"threads", CountThreads()}}; }
  void Reply(const json& j) { (void)oob_.Send(j.dump()); }

  Oob& oob_;
  std::unique_ptr<Endpoint> ep_;
  std::mutex mu_;  // guards the comm lists: the setup thread appends while run_async reads a copy
  std::vector<void*> send_, recv_;
  std::thread async_;
  json async_result_;
};

json PeerState::Open(const json& req) {
  Status s = Endpoint::Open(req.at("plugin").get<std::string>(), req.value("dev", 0), &ep_);
  if (!s.ok()) return Fail(s);
  json r = Counts();
  r["ndev"] = ep_->ndev();
  return r;
}

json PeerState::Listen(const json& req) {
  int n = req.at("n").get<int>();
  std::vector<void*> lcomms;
  json handles = json::array();
  for (int i = 0; i < n; ++i) {
    Handle h;
    void* l = nullptr;
    Status s = ep_->Listen(&h, &l);
    if (!s.ok()) return Fail(s);
    lcomms.push_back(l);
    handles.push_back(ToHex(h));
  }
  Reply({{"ok", true}, {"handles", handles}});
  std::vector<void*> comms;
  Status s = ep_->AcceptAll(lcomms, &comms, req.value("timeout_ms", 30000));
  if (!s.ok()) return Fail(s);
  std::lock_guard<std::mutex> lk(mu_);
  recv_.insert(recv_.end(), comms.begin(), comms.end());
  return {{"ok", true}};
}

json PeerState::Connect(const json& req) {
  std::vector<Handle> hs;
  for (const auto& hex : req.at("handles")) {
    Handle h;
    if (!FromHex(hex.get<std::string>(), &h)) return Fail(Status::InvalidArg("bad handle hex"));
    hs.push_back(h);
  }
  std::vector<void*> comms;
  Status s = ep_->ConnectAll(hs, &comms, req.value("timeout_ms", 30000));
  if (!s.ok()) return Fail(s);
  std::lock_guard<std::mutex> lk(mu_);
  send_.insert(send_.end(), comms.begin(), comms.end());
  return {{"ok", true}};
}

json PeerState::Run(const Plan& plan) {
  std::vector<void*> sc, rc;
  {
    std::lock_guard<std::mutex> lk(mu_);
    sc = send_, rc = recv_;
  }
  PlanResult res;
  Status s = RunPlan(ep_->net(), plan, sc, rc, &res);
  if (!s.ok()) return Fail(s);
  return {{"ok", true},
          {"bytes_sent", res.bytes_sent},
          {"bytes_received", res.bytes_received},
          {"seconds", res.seconds}};
}

json PeerState::Close() {
  std::lock_guard<std::mutex> lk(mu_);
  Status st;
  for (void* c : send_)
    if (Status s = FromNccl(ep_->net().CloseSend(c), "closeSend"); !s.ok()) st = s;
  for (void* c : recv_)
    if (Status s = FromNccl(ep_->net().CloseRecv(c), "closeRecv"); !s.ok()) st = s;
  send_.clear(), recv_.clear();
  return st.ok() ? Counts() : Fail(st);
}

bool PeerState::Dispatch(const json& req) {
  std::string cmd = req.value("cmd", "");
  if (cmd == "exit") {
    Reply({{"ok", true}});
    return false;
  }
  if (cmd == "open") return Reply(Open(req)), true;
  if (cmd == "warns") {
    json f = Fail(Status::Ok());
    return Reply({{"ok", true}, {"warns", f["warns"]}}), true;
  }
  if (!ep_) return Reply(Fail(Status::Internal("'" + cmd + "' before 'open'"))), true;
  if (cmd == "listen") return Reply(Listen(req)), true;
  if (cmd == "connect") return Reply(Connect(req)), true;
  if (cmd == "run") return Reply(Run(Plan::FromJson(req.at("plan")))), true;
  if (cmd == "run_async") {
    if (async_.joinable()) async_.join();
    Plan plan = Plan::FromJson(req.at("plan"));
    async_ = std::thread([this, plan] { async_result_ = Run(plan); });
    return Reply({{"ok", true}}), true;
  }
  if (cmd == "wait") {
    if (async_.joinable()) async_.join();
    return Reply(async_result_.is_null() ? Fail(Status::Internal("nothing to wait for")) : async_result_),
           true;
  }
  if (cmd == "pingpong") {
    std::vector<void*> sc, rc;
    {
      std::lock_guard<std::mutex> lk(mu_);
      sc = send_, rc = recv_;
    }
    if (sc.empty() || rc.empty())
      return Reply(Fail(Status::Internal("pingpong needs a send and a recv comm"))), true;
    RttStats rtt;
    Status s =
        PingPong(ep_->net(), sc[0], rc[0], req.at("size").get<size_t>(), req.at("warmup").get<uint64_t>(),
                 req.at("iters").get<uint64_t>(), req.at("initiator").get<bool>(), 60000, &rtt);
    return Reply(s.ok() ? json{{"ok", true}, {"rtt_us", rtt.mean_us}, {"rtt_p50_us", rtt.p50_us}} : Fail(s)),
           true;
  }
  if (cmd == "close") return Reply(Close()), true;
  if (cmd == "finalize") {
    Status s = ep_->Finalize();
    return Reply(s.ok() ? Counts() : Fail(s)), true;
  }
  Reply(Fail(Status::InvalidArg("unknown command '" + cmd + "'")));
  return true;
}

}  // namespace

int RunPeer(Oob& oob) {
  PeerState st(oob);
  for (;;) {
    std::string text;
    Status s = oob.Recv(&text, 600000);
    if (!s.ok()) return 2;  // the commanding process is gone
    json req = json::parse(text, nullptr, false);
    if (req.is_discarded()) {
      (void)oob.Send(Fail(Status::InvalidArg("malformed command")).dump());
      continue;
    }
    try {
      if (!st.Dispatch(req)) return 0;
    } catch (const std::exception& e) {
      (void)oob.Send(Fail(Status::InvalidArg(std::string("bad command: ") + e.what())).dump());
    }
  }
}

}  // namespace rr::netbench
