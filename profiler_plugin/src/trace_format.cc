#include "trace_format.h"

#include <cstring>
#include <string>

#include "prof_abi.h"
#include "safe_text.h"

namespace rr::prof {
namespace {

using nlohmann::json;

// The payload is the descriptor union copied at start; view it through the ABI struct.
rrProfEventDescr_v5_t View(const EventRec& ev) {
  rrProfEventDescr_v5_t d;
  std::memset(&d, 0, sizeof(d));
  std::memcpy(reinterpret_cast<char*>(&d) + offsetof(rrProfEventDescr_v5_t, coll), ev.payload, kPayloadBytes);
  return d;
}
rrProfEventDescr_v6_t View6(const EventRec& ev) {
  rrProfEventDescr_v6_t d;
  std::memset(&d, 0, sizeof(d));
  std::memcpy(d.v5Union, ev.payload, kPayloadBytes);
  return d;
}

// NCCL's strings (func, datatype, algo, ...): bounded and made valid UTF-8 (safe_text.h).
constexpr size_t kMaxText = 64;
std::string Str(const char* s) {
  return SafeUtf8(s, kMaxText);
}
std::string Name(const char* s, const char* fallback) {
  return s != nullptr ? SafeUtf8(s, kMaxText) : std::string(fallback);
}

json StatesJson(const EventRec& ev, const std::function<double(uint64_t)>& us) {
  json a = json::array();
  for (const auto& m : ev.states)
    a.push_back({{"state", StateName(m.state)}, {"ts", us(m.ts)}, {"arg", m.arg}});
  return a;
}

void NetArgs(const rrProfNetEvent_v1_t& n, json* args) {
  (*args)["kind"] = NetKindName(n.kind);
  (*args)["rail"] = n.rail;
  if (n.toRail >= 0) (*args)["to_rail"] = n.toRail;
  if (n.peer >= 0) (*args)["peer"] = n.peer;
  if (n.connId != 0) (*args)["conn"] = n.connId;
  if (n.bytes != 0) (*args)["bytes"] = n.bytes;
  if (n.count != 0) (*args)["count"] = n.count;
  if (n.stallNs != 0) (*args)["stall_ns"] = n.stallNs;
  if (n.kind == RR_PROF_NET_EV_RAIL_STATE) {
    (*args)["state"] = RailStateName(n.state);
    (*args)["prev_state"] = RailStateName(n.prevState);
  }
  if (n.kind == RR_PROF_NET_EV_IO) (*args)["dir"] = (n.flags & RR_PROF_NET_FLAG_SEND) ? "send" : "recv";
  if (n.reason[0] != '\0') (*args)["reason"] = SafeUtf8(n.reason, sizeof(n.reason));
}

// NCCL API events (v5) and copy-engine collective events (v6).
std::string DescribeApiCe(const EventRec& ev, json* args) {
  const rrProfEventDescr_v5_t d = View(ev);
  const rrProfEventDescr_v6_t d6 = View6(ev);
  switch (ev.type) {
    case RR_PROF_GROUP_API:
      *args = {{"groupDepth", d.groupApi.groupDepth}, {"graphCaptured", d.groupApi.graphCaptured}};
      return "GroupApi";
    case RR_PROF_COLL_API:
      *args = {{"count", d.collApi.count},
               {"datatype", Str(d.collApi.datatype)},
               {"root", d.collApi.root},
               {"graphCaptured", d.collApi.graphCaptured}};
      return Name(d.collApi.func, "Coll") + "Api";
    case RR_PROF_P2P_API:
      *args = {{"count", d.p2pApi.count},
               {"datatype", Str(d.p2pApi.datatype)},
               {"graphCaptured", d.p2pApi.graphCaptured}};
      return Name(d.p2pApi.func, "P2p") + "Api";
    case RR_PROF_KERNEL_LAUNCH:
      return "KernelLaunch";
    case RR_PROF_CE_COLL: {
      *args = {{"seq", d6.ceColl.seqNumber},          {"count", d6.ceColl.count},
               {"datatype", Str(d6.ceColl.datatype)}, {"syncStrategy", Str(d6.ceColl.syncStrategy)},
               {"batchSize", d6.ceColl.batchSize},    {"numBatches", d6.ceColl.numBatches}};
      return "CE " + Name(d6.ceColl.func, "Coll");
    }
    case RR_PROF_CE_SYNC: {
      *args = {{"nRanks", d6.ceSync.nRanks}, {"isComplete", d6.ceSync.isComplete}};
      return "CE Sync";
    }
    case RR_PROF_CE_BATCH: {
      *args = {{"numOps", d6.ceBatch.numOps}, {"totalBytes", d6.ceBatch.totalBytes}};
      return "CE Batch";
    }
    default:
      return "Event";
  }
}

// Fills name and the type-specific args; returns the name.
std::string Describe(const EventRec& ev, json* args) {
  const rrProfEventDescr_v5_t d = View(ev);
  switch (ev.type) {
    case RR_PROF_GROUP:
      return "Group";
    case RR_PROF_COLL:
      *args = {{"seq", d.coll.seqNumber},          {"count", d.coll.count},
               {"datatype", Str(d.coll.datatype)}, {"root", d.coll.root},
               {"algo", Str(d.coll.algo)},         {"proto", Str(d.coll.proto)},
               {"nChannels", d.coll.nChannels},    {"nWarps", d.coll.nWarps}};
      return Name(d.coll.func, "Coll");
    case RR_PROF_P2P:
      *args = {{"peer", d.p2p.peer},
               {"count", d.p2p.count},
               {"datatype", Str(d.p2p.datatype)},
               {"nChannels", d.p2p.nChannels}};
      return Name(d.p2p.func, "P2p");
    case RR_PROF_PROXY_OP:
      *args = {{"channel", d.proxyOp.channelId},
               {"peer", d.proxyOp.peer},
               {"nSteps", d.proxyOp.nSteps},
               {"chunkSize", d.proxyOp.chunkSize},
               {"pid", d.proxyOp.pid}};
      return d.proxyOp.isSend ? "ProxySend" : "ProxyRecv";
    case RR_PROF_PROXY_STEP: {
      (*args)["step"] = d.proxyStep.step;
      uint64_t trans = 0;
      for (const auto& m : ev.states) trans = m.arg > trans ? m.arg : trans;
      if (trans != 0) (*args)["transSize"] = trans;
      return "Step " + std::to_string(d.proxyStep.step);
    }
    case RR_PROF_PROXY_CTRL:
      return "ProxyCtrl";
    case RR_PROF_KERNEL_CH:
      *args = {{"channel", d.kernelCh.channelId}, {"pTimerStart", d.kernelCh.pTimer}};
      for (const auto& m : ev.states)
        if (m.state == RR_PROF_STATE_KERNEL_CH_STOP) (*args)["pTimerStop"] = m.arg;
      return "KernelCh " + std::to_string(d.kernelCh.channelId);
    case RR_PROF_NET_PLUGIN: {
      rrProfNetEvent_v1_t n;
      if (NetDescr(ev, &n)) {
        NetArgs(n, args);
        return NetKindName(n.kind);
      }
      char id[32];
      std::snprintf(id, sizeof(id), "0x%llx", static_cast<unsigned long long>(d.netPlugin.id));
      (*args)["pluginId"] = id;
      (*args)["opaque"] = true;  // not rerail's (or not a valid one): never interpreted (issue 15)
      return "NetPlugin";
    }
    default:
      return DescribeApiCe(ev, args);
  }
}

}  // namespace

bool NetDescr(const EventRec& ev, rrProfNetEvent_v1_t* out) {
  if (!ev.rerail_net) return false;
  std::memcpy(out, ev.payload, sizeof(*out));
  out->reason[sizeof(out->reason) - 1] = '\0';
  // Rails index per-rail tracks and statistics: a value no NIC count reaches is shown as "no rail"
  // rather than growing those tables without bound.
  constexpr int32_t kMaxRail = 256;
  if (out->rail < -1 || out->rail >= kMaxRail) out->rail = -1;
  if (out->toRail < -1 || out->toRail >= kMaxRail) out->toRail = -1;
  return true;
}

const char* NetKindName(int kind) {
  switch (kind) {
    case RR_PROF_NET_EV_IO:
      return "io";
    case RR_PROF_NET_EV_FAILOVER:
      return "failover";
    case RR_PROF_NET_EV_MIGRATION:
      return "migration";
    case RR_PROF_NET_EV_FAILBACK:
      return "failback";
    case RR_PROF_NET_EV_RETRANSMIT:
      return "retransmit";
    case RR_PROF_NET_EV_RAIL_STATE:
      return "rail-state";
    default:
      return "net-unknown";
  }
}

const char* RailStateName(int state) {
  switch (state) {
    case RR_PROF_RAIL_HEALTHY:
      return "healthy";
    case RR_PROF_RAIL_SUSPECT:
      return "suspect";
    case RR_PROF_RAIL_FAILED:
      return "failed";
    case RR_PROF_RAIL_RECOVERING:
      return "recovering";
    case RR_PROF_RAIL_PERM_FAILED:
      return "permanently-failed";
    default:
      return "unknown";
  }
}

const char* TypeName(uint32_t type) {
  static const char* const kNames[] = {"group",     "coll",         "p2p",    "proxyop",  "proxystep",
                                       "proxyctrl", "kernelch",     "net",    "groupapi", "collapi",
                                       "p2papi",    "kernellaunch", "cecoll", "cesync",   "cebatch"};
  int i = TypeIndex(type);
  return i < 0 ? "unknown" : kNames[i];
}

std::string StateName(int state) {
  switch (state) {
    case RR_PROF_STATE_PROXY_STEP_SEND_GPU_WAIT:
      return "SendGPUWait";
    case RR_PROF_STATE_PROXY_STEP_SEND_WAIT:
      return "SendWait";
    case RR_PROF_STATE_PROXY_STEP_RECV_WAIT:
      return "RecvWait";
    case RR_PROF_STATE_PROXY_STEP_RECV_FLUSH_WAIT:
      return "RecvFlushWait";
    case RR_PROF_STATE_PROXY_STEP_RECV_GPU_WAIT:
      return "RecvGPUWait";
    case RR_PROF_STATE_PROXY_CTRL_IDLE:
      return "Idle";
    case RR_PROF_STATE_PROXY_CTRL_ACTIVE:
      return "Active";
    case RR_PROF_STATE_PROXY_CTRL_SLEEP:
      return "Sleep";
    case RR_PROF_STATE_PROXY_CTRL_WAKEUP:
      return "Wakeup";
    case RR_PROF_STATE_PROXY_CTRL_APPEND:
      return "Append";
    case RR_PROF_STATE_PROXY_CTRL_APPEND_END:
      return "AppendEnd";
    case RR_PROF_STATE_PROXY_OP_IN_PROGRESS:
      return "InProgress";
    case RR_PROF_STATE_PROXY_STEP_SEND_PEER_WAIT:
      return "SendPeerWait";
    case RR_PROF_STATE_NET_PLUGIN_UPDATE:
      return "NetPluginUpdate";
    case RR_PROF_STATE_KERNEL_CH_STOP:
      return "KernelChStop";
    case RR_PROF_STATE_GROUP_START_API_STOP:
      return "GroupStartApiStop";
    case RR_PROF_STATE_GROUP_END_API_START:
      return "GroupEndApiStart";
    default:
      return "state" + std::to_string(state);
  }
}

std::string track::Name(int tid) {
  if (tid >= kLaneStride) return Name(tid % kLaneStride) + " #" + std::to_string(tid / kLaneStride + 1);
  if (tid == kCollectives) return "collectives";
  if (tid == kApi) return "NCCL API";
  if (tid == kProxyCtrl) return "proxy ctrl";
  if (tid == kNetOther) return "net plugin";
  if (tid >= kRailBase) return "rail " + std::to_string(tid - kRailBase);
  if (tid >= kKernelBase) return "kernel ch " + std::to_string(tid - kKernelBase);
  if (tid >= kProxyBase) {
    int x = tid - kProxyBase;
    return "proxy ch " + std::to_string(x / 2) + ((x & 1) ? " send" : " recv");
  }
  return "track " + std::to_string(tid);
}

json EventJson(const EventRec& ev, const std::function<double(uint64_t)>& us) {
  json args = json::object();
  std::string name = Describe(ev, &args);
  args["id"] = ev.seq;
  args["parent"] = ev.vis_parent;
  if (ev.parent_lost) args["parent_lost"] = true;
  if (ev.unfinished) args["unfinished"] = true;
  if (!ev.states.empty() && ev.type != RR_PROF_KERNEL_CH) args["states"] = StatesJson(ev, us);

  json j = {{"name", name},
            {"cat", TypeName(ev.type)},
            {"pid", ev.ctx->rank},
            {"tid", track::Tid(ev.track, ev.lane)}};
  rrProfNetEvent_v1_t n;
  if (NetDescr(ev, &n) && n.kind != RR_PROF_NET_EV_IO) {
    j["ph"] = "i";
    j["s"] = "t";
    j["ts"] = us(n.tsNs != 0 ? n.tsNs : ev.begin_ns);
  } else {
    j["ph"] = "X";
    j["ts"] = us(ev.begin_ns);
    uint64_t end = ev.last_ns > ev.begin_ns ? ev.last_ns : ev.begin_ns;
    j["dur"] = static_cast<double>(end - ev.begin_ns) / 1000.0;
  }
  j["args"] = std::move(args);
  return j;
}

}  // namespace rr::prof
