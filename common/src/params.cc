#include "rerail/params.h"

#include <strings.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>

#include "rerail/log.h"

extern char** environ;

namespace rr {
namespace {

struct Value {
  int64_t i = 0;
  std::string s;
  bool set = false;
  bool invalid = false;  // present in the environment but malformed (the default is in effect)
};

const std::vector<ParamDef>& Defs() {
  static const std::vector<ParamDef> defs = {
#define RR_PARAM_DEF(id, name, type, def, units, range, help) \
  ParamDef{ParamId::id, name, ParamType::type, def, units, range, help},
      RERAIL_PARAM_TABLE(RR_PARAM_DEF)
#undef RR_PARAM_DEF
  };
  return defs;
}

Value g_values[static_cast<int>(ParamId::kCount)];
std::once_flag g_once;
Status g_load_status;

bool ParseInt(const std::string& text, int64_t* out) {
  if (text.empty()) return false;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 0);
  if (errno != 0 || end == text.c_str()) return false;
  // Optional size suffix K/M/G (binary) for byte values.
  if (*end == 'k' || *end == 'K') v <<= 10, ++end;
  else if (*end == 'm' || *end == 'M') v <<= 20, ++end;
  else if (*end == 'g' || *end == 'G') v <<= 30, ++end;
  if (*end != '\0') return false;
  *out = v;
  return true;
}

bool ParseBool(const std::string& text, int64_t* out) {
  const char* t = text.c_str();
  if (!strcasecmp(t, "1") || !strcasecmp(t, "true") || !strcasecmp(t, "yes") || !strcasecmp(t, "on")) {
    *out = 1;
    return true;
  }
  if (!strcasecmp(t, "0") || !strcasecmp(t, "false") || !strcasecmp(t, "no") || !strcasecmp(t, "off")) {
    *out = 0;
    return true;
  }
  return false;
}

bool InRange(const char* range, int64_t v) {
  long long lo = 0, hi = 0;
  if (std::sscanf(range, "%lld:%lld", &lo, &hi) != 2) return true;
  return v >= lo && v <= hi;
}

bool EnumChoice(const char* choices, const std::string& text, std::string* out) {
  std::stringstream ss(choices);
  std::string c;
  while (std::getline(ss, c, '|')) {
    if (!strcasecmp(c.c_str(), text.c_str())) {
      *out = c;
      return true;
    }
  }
  return false;
}

// Parses one value; on error returns a message and leaves *v at the default.
std::string ParseOne(const ParamDef& d, const std::string& text, Value* v) {
  switch (d.type) {
    case ParamType::kInt:
      if (!ParseInt(text, &v->i)) return "is not an integer";
      if (!InRange(d.range, v->i)) return std::string("is out of range ") + d.range;
      return "";
    case ParamType::kBool:
      if (!ParseBool(text, &v->i)) return "is not a boolean (0/1, true/false, yes/no, on/off)";
      return "";
    case ParamType::kEnum:
      if (!EnumChoice(d.range, text, &v->s)) return std::string("is not one of ") + d.range;
      return "";
    case ParamType::kString:
      v->s = text;
      return "";
  }
  return "has an unknown type";
}

Status LoadAll() {
  std::string errors;
  for (const ParamDef& d : Defs()) {
    Value& v = g_values[static_cast<int>(d.id)];
    v = Value{};
    std::string err = ParseOne(d, d.def, &v);
    if (!err.empty()) errors += std::string("built-in default of RERAIL_") + d.name + " " + err + "; ";
    std::string env_name = std::string("RERAIL_") + d.name;
    const char* env = std::getenv(env_name.c_str());
    if (env == nullptr) continue;
    Value parsed;
    err = ParseOne(d, env, &parsed);
    if (!err.empty()) {
      errors += env_name + "='" + env + "' " + err + " (" + d.help + "); ";
      v.invalid = true;
      continue;
    }
    parsed.set = true;
    v = parsed;
  }
  Status st = errors.empty() ? Status::Ok() : Status::InvalidUsage(errors.substr(0, errors.size() - 2));
  if (!st.ok()) RR_WARN("bad configuration: %s", st.message().c_str());
  if (g_values[static_cast<int>(ParamId::DumpParams)].i != 0) {
    for (const std::string& line : Params::Dump()) RR_INFO(log::kFlagInit | log::kFlagEnv, "%s", line.c_str());
  }
  return st;
}

}  // namespace

Status Params::Load() {
  std::call_once(g_once, [] { g_load_status = LoadAll(); });
  return g_load_status;
}

Status Params::Reload() {
  bool first = false;
  std::call_once(g_once, [&] {
    g_load_status = LoadAll();
    first = true;
  });
  if (!first) g_load_status = LoadAll();
  return g_load_status;
}

int64_t Params::Int(ParamId id) {
  Load().ok();
  return g_values[static_cast<int>(id)].i;
}

const std::string& Params::Str(ParamId id) {
  Load().ok();
  return g_values[static_cast<int>(id)].s;
}

bool Params::IsSet(ParamId id) {
  Load().ok();
  return g_values[static_cast<int>(id)].set;
}

const std::vector<ParamDef>& Params::Table() { return Defs(); }

const char* SourceName(ParamState::Source s) {
  switch (s) {
    case ParamState::Source::kDefault: return "default";
    case ParamState::Source::kEnv: return "env";
    case ParamState::Source::kEnvInvalid: return "env-invalid";
  }
  return "?";
}

// The values as they are now, without Load() (LoadAll itself dumps them under RERAIL_DUMP_PARAMS).
static std::vector<ParamState> Snapshot() {
  std::vector<ParamState> out;
  for (const ParamDef& d : Defs()) {
    const Value& v = g_values[static_cast<int>(d.id)];
    ParamState p{&d, (d.type == ParamType::kInt || d.type == ParamType::kBool) ? std::to_string(v.i) : v.s, "",
                 v.set ? ParamState::Source::kEnv
                       : (v.invalid ? ParamState::Source::kEnvInvalid : ParamState::Source::kDefault)};
    const char* env = std::getenv((std::string("RERAIL_") + d.name).c_str());
    if (env != nullptr) p.env = env;
    if (d.id == ParamId::JobSecret) {  // a secret never reaches a log or a report
      if (!p.value.empty()) p.value = "(hidden)";
      if (!p.env.empty()) p.env = "(hidden)";
    }
    out.push_back(std::move(p));
  }
  return out;
}

std::vector<ParamState> Params::State() {
  Load().ok();
  return Snapshot();
}

std::vector<std::string> Params::Dump() {
  std::vector<std::string> lines;
  for (const ParamState& p : Snapshot()) {
    lines.push_back(std::string("RERAIL_") + p.def->name + "=" + p.value +
                    (p.source == ParamState::Source::kEnv ? " (set)" : " (default)") +
                    (p.def->units[0] ? std::string(" ") + p.def->units : std::string()));
  }
  return lines;
}

std::vector<std::string> Params::UnknownInEnv() {
  std::vector<std::string> unknown;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "RERAIL_", 7) != 0) continue;
    std::string name(*e + 7, std::strcspn(*e + 7, "="));
    bool known = false;
    for (const ParamDef& d : Defs()) known = known || name == d.name;
    if (!known) unknown.push_back(name);
  }
  return unknown;
}

std::string Params::Markdown() {
  std::string md = "| variable | type | default | units | accepted | meaning |\n|---|---|---|---|---|---|\n";
  static const char* kTypeNames[] = {"int", "bool", "string", "enum"};
  for (const ParamDef& d : Defs()) {
    std::string def = d.def[0] ? std::string("`") + d.def + "`" : std::string("(empty)");
    auto cell = [](std::string text) {  // a '|' inside a cell would end it
      for (size_t at = text.find('|'); at != std::string::npos; at = text.find('|', at + 2)) text.insert(at, "\\");
      return text;
    };
    md += std::string("| `RERAIL_") + d.name + "` | " + kTypeNames[static_cast<int>(d.type)] + " | " + def +
          " | " + d.units + " | " + cell(d.range) + " | " + cell(d.help) + " |\n";
  }
  return md;
}

}  // namespace rr
