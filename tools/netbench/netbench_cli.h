// `rerail-perf netbench`: two-process loopback throughput (one way, NCCL's window of 8) and ping-pong
// latency of a net plugin, with a machine-readable RESULT line (scripts/bench-loopback.sh reads it).
//
// Contract
//   * CliMain(argc, argv, plugin) parses argv[1..] (argv[0] is the subcommand name) and returns the
//     process exit status: 0 ok, 1 a plugin or peer error (message on stderr), CLI11's code on bad flags.
//   * The peer is this same executable re-run as `<exe> netbench --peer` (commanded over fd 3), so the
//     host binary must route "netbench" to CliMain before parsing anything else.
//   * Blocking; one call per process.
#pragma once

#include <string>

namespace rr::netbench {

int CliMain(int argc, char** argv, const std::string& default_plugin);

}  // namespace rr::netbench
