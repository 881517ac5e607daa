// rerail — typed access to the RERAIL_* parameter table (params_table.h).
//
// Contract
//   * Values are parsed from the environment once, on first use (or by Params::Load()), and cached;
//     later reads are a plain array load. Reload() re-reads (tests only; not thread-safe vs readers).
//   * A malformed value (not a number, out of range, unknown enum choice) is reported by Load() as
//     Code::kInvalidUsage naming the variable, the bad value and what is accepted; the default is used
//     for that parameter meanwhile. Plugins fail init with ncclInvalidUsage on such an error.
//   * RERAIL_DUMP_PARAMS=1 prints every parameter once at Load() via the logger.
//   * Thread-safe after Load().
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rerail/params_table.h"
#include "rerail/status.h"

namespace rr {

enum class ParamType { kInt, kBool, kString, kEnum };

enum class ParamId : int {
#define RR_PARAM_ID(id, name, type, def, units, range, help) id,
  RERAIL_PARAM_TABLE(RR_PARAM_ID)
#undef RR_PARAM_ID
  kCount
};

struct ParamDef {
  ParamId id;
  const char* name;   // without the RERAIL_ prefix
  ParamType type;
  const char* def;
  const char* units;
  const char* range;  // "min:max" for ints, "a|b|c" for enums
  const char* help;
};

// One parameter as it is in effect now (rerail-info, RERAIL_DUMP_PARAMS).
struct ParamState {
  enum class Source {
    kDefault,     // not in the environment: the built-in default
    kEnv,         // parsed from the environment
    kEnvInvalid,  // in the environment but malformed: the default is in effect (Load() reported it)
  };
  const ParamDef* def;
  std::string value;  // the effective value as text; "(hidden)" for a non-empty RERAIL_JOB_SECRET
  std::string env;    // the raw environment text when present (also hidden for the secret), else ""
  Source source;
};
const char* SourceName(ParamState::Source s);  // "default", "env", "env-invalid"

class Params {
 public:
  // Parse every parameter from the environment (idempotent; first call wins unless Reload()).
  static Status Load();
  static Status Reload();

  static int64_t Int(ParamId id);
  static bool Bool(ParamId id) { return Int(id) != 0; }
  static const std::string& Str(ParamId id);  // kString and kEnum (the chosen choice)
  static bool IsSet(ParamId id);               // the variable was present in the environment

  static const std::vector<ParamDef>& Table();
  // Markdown table of every parameter (for the README).
  static std::string Markdown();
  // One "RERAIL_NAME=value (set|default) units" line per parameter.
  static std::vector<std::string> Dump();
  // Every parameter in table order with its effective value and where it came from.
  static std::vector<ParamState> State();
  // Names (without RERAIL_) of RERAIL_* environment variables that are no parameter: most likely typos.
  static std::vector<std::string> UnknownInEnv();
};

}  // namespace rr
