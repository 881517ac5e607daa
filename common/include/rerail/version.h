// rerail — the version string every artifact reports.
//
// Contract
//   * Version() is the string cmake/version.cmake derived from `git describe --tags --always --dirty`
//     at configure time ("0.1.0+g3b1d39b", "0.2.0", "0.2.0-3-g1a2b3c4-dirty"), or the project
//     version when the source is not a git checkout. Static storage; never null; thread-safe.
//   * It is what the init log lines print (`NET/rerail : rerail <version> ...`), what rerail-info and
//     the profiler trace report, and the version of the .deb.
#pragma once

namespace rr {

const char* Version();

}  // namespace rr
