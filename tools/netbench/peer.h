// rerail-netbench — the remote side of a plugin test or benchmark, commanded over the OOB channel.
//
// The peer process (rerail-netbench --peer, or the conformance suite's conformance_peer) loads the
// plugin itself and executes JSON commands, one reply per command:
//   {"cmd":"open","plugin":P,"dev":D}        init + devices       → {"ok","ndev","fds","threads"}
//   {"cmd":"listen","n":N}                   N listens            → {"ok","handles":[hex,...]}, then
//                                            accepts all (polled, closeListen after each) → {"ok"}
//   {"cmd":"connect","handles":[hex,...]}    polled connects      → {"ok"}
//   {"cmd":"run","plan":{...}}               RunPlan on its comms →
//   {"ok","bytes_sent","bytes_received","seconds"}
//   {"cmd":"run_async","plan":{...}}         RunPlan on a second (progress) thread → {"ok"} at once;
//   {"cmd":"wait"}                           joins it             → the run's reply
//   {"cmd":"pingpong","size","warmup","iters","initiator"} on comm 0 → {"ok","rtt_us"}
//   {"cmd":"close"} closes every comm; {"cmd":"finalize"}  → {"ok","fds","threads"}
//   {"cmd":"warns"} → {"ok","warns":[...]};  {"cmd":"exit"} → {"ok"} and the process exits.
// A failed command replies {"ok":false,"code":<ncclResult_t>,"error":text,"warns":[captured WARNs]}.
// Comms are numbered in creation order: connect appends send comms, listen/accept appends recv comms.
//
// PeerClient is the commanding side: Call() sends one command and waits (bounded) for its reply; an
// {"ok":false} reply becomes a Status with the peer's code. Not thread-safe.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "oob.h"
#include "proxy_driver.h"

namespace rr::netbench {

// Runs the command loop on `oob` until "exit" or the channel closes; returns the process exit code.
int RunPeer(Oob& oob);

std::string ToHex(const Handle& h);
bool FromHex(const std::string& s, Handle* h);

class PeerClient {
 public:
  Status Spawn(const std::string& exe, const std::vector<std::string>& args,
               const std::vector<std::string>& env) {
    return peer_.Spawn(exe, args, env);
  }
  Status Call(const nlohmann::json& req, nlohmann::json* resp, uint64_t timeout_ms);
  Status Send(const nlohmann::json& req) { return peer_.oob().Send(req.dump()); }
  Status Reply(nlohmann::json* resp, uint64_t timeout_ms);
  Peer& peer() { return peer_; }

 private:
  Peer peer_;
};

}  // namespace rr::netbench
