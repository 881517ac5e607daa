// Text from NCCL or another plugin made safe for the profiler's outputs (issue 15).
//
// Contract
//   * Every string the profiler did not write itself (commName, coll/p2p func, datatype, algo, proto, the
//     net descriptor's reason, ...) goes through SafeUtf8() before it reaches a JSON value or a Prometheus
//     label: the result is valid UTF-8 of at most `max_bytes` input bytes, invalid or truncated sequences
//     replaced by U+FFFD. nlohmann::json throws type_error 316 on invalid UTF-8 at dump(); DumpJson() is
//     the second guard (error_handler replace), so no dump can throw on text.
//   * PromLabel() escapes a (sanitised) value for a Prometheus label ("\\", "\"", "\n").
//   * Pure functions; any thread. SafeUtf8 reads at most `max_bytes` bytes and stops at the first NUL.
#pragma once

#include <cstddef>
#include <string>

#include <nlohmann/json.hpp>

namespace rr::prof {

std::string SafeUtf8(const char* s, size_t max_bytes);
inline std::string SafeUtf8(const std::string& s) { return SafeUtf8(s.c_str(), s.size()); }
std::string PromLabel(const std::string& s);
std::string DumpJson(const nlohmann::json& j, int indent = -1);

}  // namespace rr::prof
