// rerail-perf — a rank's communicator: the loaded plugin, its devices and every connection the
// requested collectives need, established the way NCCL's proxy does it (reference §3.2).
//
// Contract
//   * Setup() loads the plugin (netdrv: v12 > v11 > v10), calls init once with a commId shared by all
//     ranks, listens once per receiving connection on device (channel mod ndev), exchanges the
//     128-byte handles over the Oob, then polls connect() and accept() (NULL = not yet) until every
//     connection is up or `timeout_ms` passes; accept is followed by closeListen, as in NCCL.
//   * Connections live until the Comm is destroyed; destruction closes them, then finalizes the plugin.
//   * Errors: plugin failures and timeouts come back as Status naming the call, peer and channel.
//   * The plugin's log lines go to stderr (prefixed with the rank) and its WARN lines are kept with
//     their time (PluginWarnings) for the timeline's failover markers.
//   * Not thread-safe except PluginWarnings (the plugin may log from its own threads).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "conn.h"
#include "net_loader.h"
#include "oob.h"
#include "plan.h"

namespace rr::perf {

struct PluginWarning {
  uint64_t t_ns;
  std::string text;
};

class Comm {
 public:
  ~Comm();
  // `prof`: the profiler callback handed to the plugin's init (NULL: a callback that creates nothing,
  // as NCCL passes when no profiler is loaded).
  static Status Setup(const std::string& plugin_path, Oob* oob, const std::vector<ConnKey>& keys,
                      int timeout_ms, rrNcclProfilerCallback_t prof, std::unique_ptr<Comm>* out);
  // The commId every rank passes to init (and to the profiler): NCCL passes the comm hash.
  static uint64_t CommId(int nranks);

  Conn* Find(const ConnKey& k) const;
  netdrv::NetPlugin* net() const { return net_.get(); }
  int ndev() const { return ndev_; }
  const std::vector<std::string>& dev_names() const { return dev_names_; }
  int DevOf(int channel) const { return channel % ndev_; }

  // WARN lines the plugin logged so far (copied under a lock).
  static std::vector<PluginWarning> PluginWarnings();
  static void SetLogRank(int rank);

 private:
  Comm() = default;
  Status Connect(Oob* oob, const std::vector<ConnKey>& keys, int timeout_ms);
  Status Poll(std::vector<std::pair<ConnKey, void*>>* pending, int timeout_ms);

  std::unique_ptr<netdrv::NetPlugin> net_;
  void* ctx_ = nullptr;
  bool inited_ = false;
  int ndev_ = 0;
  std::vector<std::string> dev_names_;
  std::map<ConnKey, std::unique_ptr<Conn>> conns_;
  std::vector<std::unique_ptr<std::string>> handles_;  // peers' listen handles, stable while connecting
  int my_rank_ = 0;
};

}  // namespace rr::perf
