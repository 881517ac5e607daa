// rerail-perf — command-line options (CLI11) with nccl-tests meanings.
//
// Contract
//   * Parse() fills Options from argv; on a bad flag or value it returns a Status (kInvalidUsage) whose
//     message names the flag, the value and what is accepted; --help returns kInProgress with the
//     usage text as message (the caller prints it and exits 0).
//   * Sizes accept nccl-tests suffixes (K, M, G; powers of 1024), e.g. "-b 8 -e 128M".
//   * The internal flags (--rank, --nranks, --rendezvous, --t0-ns) are set by the launcher for the rank
//     processes it starts; users never need them.
//   * Pure functions, no I/O; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rerail/status.h"

namespace rr::perf {

// The collectives rerail-perf can run (nccl-tests binary names without "_perf").
enum class Coll { kAllReduce, kAllGather, kReduceScatter, kBroadcast, kSendRecv, kAllToAll };
enum class DataType { kFloat, kInt32 };

const char* CollName(Coll c);
const char* TypeName(DataType t);
size_t TypeSize(DataType t);

// One --fault: at `at_ms` after start, apply `kind` to rail `rail` of simulated host `host`.
struct FaultSpec {
  uint64_t at_ms = 0;
  int host = 0;
  int rail = 0;
  std::string kind;  // "down", "blackhole", "slow", "heal"
  std::string rate;  // for "slow": tc rate such as "100mbit"
  std::string text;  // the flag as given (for the timeline)
};

struct Options {
  std::vector<Coll> colls{Coll::kAllReduce};
  int nranks = 2;              // -N
  int hosts = 0;               // --hosts: 0 = all ranks on this host, no namespaces
  std::string netns_prefix;     // --netns-prefix (default RERAIL_NETNS_PREFIX); host h = <prefix>-h<h>
  std::string rails_script;    // --rails-script: path of scripts/netns-rails.sh
  std::string plugin;          // --plugin
  int channels = 2;            // -C
  uint64_t min_bytes = 32ull << 20;  // -b
  uint64_t max_bytes = 32ull << 20;  // -e
  uint64_t step_bytes = 0;     // -i (additive step); 0 = use the factor
  double step_factor = 2;      // -f
  int iters = 20;              // -n
  int warmup = 5;              // -w
  int check = 1;               // -c: check iterations per size (0 = no verification)
  DataType dtype = DataType::kFloat;  // -d
  std::string op = "sum";      // -o
  int root = 0;                // -r (broadcast)
  std::string json_path;       // -J
  std::string timeline_path;   // --timeline (.csv or .json)
  int timeline_bin_ms = 100;   // --timeline-bin-ms: width of a timeline bin
  double duration_s = 0;       // --duration: each timed loop runs this long instead of -n iterations
  std::vector<FaultSpec> faults;  // --fault (repeatable)
  std::string profiler;        // --profiler: profiler plugin emulated per rank (prof::NcclEmu)
  int timeout_s = 300;         // --timeout: whole run bound
  bool quiet_progress = false; // --no-progress
  // Internal: set by the launcher (or taken from OMPI_COMM_WORLD_* / PMI_*).
  int rank = -1;
  std::string rendezvous;      // unix socket path, or host:port for TCP
  uint64_t t0_ns = 0;          // common start time (CLOCK_MONOTONIC) for the timeline
  std::string events_path;     // file where the launcher appends executed fault events
};

// Parses argv. See the contract above for errors and --help.
Status Parse(int argc, char** argv, Options* out);

// "2s", "500ms", "1.5s" → milliseconds.
Status ParseDurationMs(const std::string& s, uint64_t* ms);
// "at=2s,host=0,rail=1,kind=down|blackhole|slow:RATE|heal"
Status ParseFault(const std::string& s, FaultSpec* out);
// "8", "128K", "1M", "2G" → bytes.
Status ParseSize(const std::string& s, uint64_t* bytes);

}  // namespace rr::perf
