// rerail tuner — one implementation behind the v5/v6 ABI shims (abi/tuner_v5.cc, abi/tuner_v6.cc).
//
// What it decides (per communicator, per collective):
//   * Cost table. When this process has lost network capacity (fewer healthy rails than rails), every
//     usable entry (>= 0) of NCCL's table for a communicator that spans nodes has its bandwidth term
//     divided by the capacity left: t' = lat + (t - lat) / capacity, where lat is the latency part
//     estimated from NCCL's tuning constants (base latency + NET hop latency x hops of the
//     algorithm). Small, latency-bound messages barely move; large ones pay for the lost rails, which
//     shifts NCCL's algorithm/protocol crossovers. Entries of -1 (unsupported) are never touched,
//     entries below lat (e.g. already forced to 0) stay as they are.
//   * Channel count. When degraded, *nChannels = healthy rails x RERAIL_TUNER_CHANNELS_PER_RAIL (0
//     disables), so channels divide evenly over the rails left; healthy: 0 (NCCL's choice). Only for
//     messages of at least that many channels x 32 KiB (NCCL would use fewer channels below that,
//     and the tuner's value replaces NCCL's size-based count).
//   * Rules of RERAIL_TUNER_CONFIG (rules.h), applied after the above.
//
// Contract
//   * Nothing here fails or throws across the ABI: any internal problem is logged once (WARN) and the
//     call leaves NCCL's table and channel count as they came (the shims catch everything as well).
//   * Rail health is re-read at most once per RERAIL_TUNER_REFRESH_MS (0 = every call); in between,
//     GetCollInfo costs a coarse clock read and a pass over the 21 table entries.
//   * Each change of the decision (rails healthy, source, board gone) is logged once at INFO under
//     TUNER/rerail (subsystem TUNING); the first use of each rule after a change likewise.
//   * A CommTuner belongs to one communicator and is used by the thread enqueuing on it (NCCL does not
//     enqueue on one communicator from two threads at once). Tuners of different communicators are
//     independent. Process-wide settings and rules are loaded at the first init (Acquire) and kept
//     until the last finalize (Release).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "../abi/tuner_abi.h"
#include "rail_view.h"
#include "rules.h"

namespace rr::tuner {

struct Settings {
  bool enabled = true;
  // Rail health may change NCCL's choices (RERAIL_TUNER_HEALTH; the plugin's default is off, see
  // params_table.h: a choice that differs between ranks breaks the collective).
  bool use_health = true;
  uint64_t refresh_ns = 100'000'000;
  int channels_per_rail = 2;
  std::string board_path;  // resolved: RERAIL_TUNER_BOARD, else <RERAIL_BOARD_DIR>/rerail-board.<pid>.net
  std::shared_ptr<const RuleSet> rules;
};

// First init of the process (refcount 0 -> 1): reloads RERAIL_* and the rule file, logging problems
// through `log`. Later inits share the result. Never fails.
// abi_version (5, 6; 0 in tests) goes into the one INFO line of the first init.
std::shared_ptr<const Settings> Acquire(rrTunerLogger_t log, int abi_version = 0);
void Release();

class CommTuner {
 public:
  CommTuner(uint64_t comm_id, size_t nranks, size_t nnodes, rrTunerLogger_t log,
            const rrTunerConstants_v5_t* constants, std::shared_ptr<const Settings> settings);

  void GetCollInfo(int coll, size_t nbytes, float* table, int num_algo, int num_proto, int* nchannels);

  // Logs once per CommTuner, WARN; used by the shims for exceptions.
  void WarnOnce(const char* what);

 private:
  struct Decision {
    RailView view;
    float scale = 1.0f;  // multiplier of the bandwidth term (1 = leave the table)
    int channels = 0;    // 0 = leave NCCL's
  };

  void Refresh(uint64_t now_ns);
  void LogDecision(const Decision& d);
  void ApplyRule(const Rule& r, int coll, size_t nbytes, float* table, int num_algo, int num_proto, int* nchannels);
  void Log(int level, const char* fmt, ...) __attribute__((format(printf, 3, 4)));

  uint64_t comm_id_;
  size_t nranks_, nnodes_;
  rrTunerLogger_t log_;
  std::shared_ptr<const Settings> settings_;
  bool crosses_network_;                 // nNodes > 1: every algorithm has an inter-node phase
  float lat_[RR_TUNER_NUM_ALGORITHMS][RR_TUNER_NUM_PROTOCOLS] = {};  // latency part estimate, µs
  RailSource source_;
  Decision cur_;
  bool have_decision_ = false;
  uint64_t next_refresh_ns_ = 0;
  std::string last_problem_;
  std::vector<bool> rule_logged_;        // per rule: logged since the last decision change
  bool warned_ = false;
};

}  // namespace rr::tuner
