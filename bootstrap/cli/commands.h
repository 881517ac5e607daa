// rerail-bootstrap subcommands (internal to the CLI). Each returns the process exit code and prints
// its report on stdout; errors go through rr::log (stderr).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rerail/boot/exchange.h"
#include "rerail/boot/job.h"

namespace rr::boot::cli {

struct CheckOptions {
  uint64_t group = 0;
  int connect_timeout_ms = 1000;
};
int RunCheck(const JobSpec& spec, const CheckOptions& o);

struct BenchOptions {
  std::vector<int> ranks = {8, 16, 32, 64, 128, 256};
  int hosts = 4;     // simulated hosts: loopback addresses 127.78.0.1..
  int port_base = 22000;
  int repeats = 3;
  std::string algorithm = "both";  // bruck | ring | both
};

// "bruck" / "ring" -> algorithm; false for anything else.
bool ParseAlgorithm(const std::string& name, ExchangeAlgorithm* out);
int RunBench(const BenchOptions& o);

// The blob `rerail-bootstrap exchange` contributes for `rank` unless --blob is given: 64 bytes,
// deterministic, so --verify can check every received blob and a restarted rank sends the same.
std::string DefaultBlob(const Job& job, int rank);

}  // namespace rr::boot::cli
