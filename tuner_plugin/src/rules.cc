// RERAIL_TUNER_CONFIG parser (rules.h).
#include "rules.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <strings.h>

#include "../abi/tuner_abi.h"

namespace rr::tuner {
namespace {

const char* const kAlgos[RR_TUNER_NUM_ALGORITHMS] = {"tree", "ring", "collnet_direct", "collnet_chain",
                                                     "nvls", "nvls_tree", "pat"};
const char* const kProtos[RR_TUNER_NUM_PROTOCOLS] = {"ll", "ll128", "simple"};
const char* const kColls[RR_FUNC_COUNT] = {"broadcast", "reduce", "allgather", "reducescatter", "allreduce",
                                           "sendrecv", "send", "recv", "alltoall", "scatter", "gather"};

// Index of `s` in names (case-insensitive), -1 for "*", -2 when unknown.
int Lookup(const std::string& s, const char* const* names, int n) {
  if (s == "*") return -1;
  for (int i = 0; i < n; ++i) {
    if (strcasecmp(s.c_str(), names[i]) == 0) return i;
  }
  return -2;
}

bool ParseBytes(const std::string& s, uint64_t unbounded, uint64_t* out) {
  if (s == "*") {
    *out = unbounded;
    return true;
  }
  if (s.empty() || s[0] < '0' || s[0] > '9') return false;
  errno = 0;
  char* end = nullptr;
  unsigned long long v = strtoull(s.c_str(), &end, 10);
  if (errno != 0) return false;
  uint64_t mult = 1;
  if (*end == 'K' || *end == 'k') mult = 1ull << 10, ++end;
  else if (*end == 'M' || *end == 'm') mult = 1ull << 20, ++end;
  else if (*end == 'G' || *end == 'g') mult = 1ull << 30, ++end;
  if (*end != '\0') return false;
  if (v > UINT64_MAX / mult) return false;
  *out = v * mult;
  return true;
}

// Parses one non-empty, comment-stripped line; returns "" or what is wrong.
std::string ParseLine(const std::vector<std::string>& f, Rule* r) {
  if (f.size() != 7) return "expected 7 fields (when collective min max algorithm protocol channels), got " +
                            std::to_string(f.size());
  if (strcasecmp(f[0].c_str(), "any") == 0) r->when = When::kAny;
  else if (strcasecmp(f[0].c_str(), "healthy") == 0) r->when = When::kHealthy;
  else if (strcasecmp(f[0].c_str(), "degraded") == 0) r->when = When::kDegraded;
  else return "unknown condition (healthy|degraded|any): " + f[0];
  r->coll = Lookup(f[1], kColls, RR_FUNC_COUNT);
  if (r->coll == -2 || r->coll == RR_FUNC_SENDRECV || r->coll == RR_FUNC_SEND || r->coll == RR_FUNC_RECV)
    return "unknown collective: " + f[1];
  if (!ParseBytes(f[2], 0, &r->min_bytes)) return "bad minimum size: " + f[2];
  if (!ParseBytes(f[3], UINT64_MAX, &r->max_bytes)) return "bad maximum size: " + f[3];
  if (r->min_bytes > r->max_bytes) return "minimum size above maximum: " + f[2] + " > " + f[3];
  r->algo = Lookup(f[4], kAlgos, RR_TUNER_NUM_ALGORITHMS);
  if (r->algo == -2) return "unknown algorithm: " + f[4];
  r->proto = Lookup(f[5], kProtos, RR_TUNER_NUM_PROTOCOLS);
  if (r->proto == -2) return "unknown protocol: " + f[5];
  if (f[6] == "-") {
    r->channels = 0;
  } else if (strcasecmp(f[6].c_str(), "rails") == 0) {
    r->channels_rails = true;
  } else {
    char* end = nullptr;
    errno = 0;
    long c = strtol(f[6].c_str(), &end, 10);
    if (errno != 0 || end == f[6].c_str() || *end != '\0' || c < 1 || c > 64)
      return "bad channel count (1..64, rails or -): " + f[6];
    r->channels = static_cast<int>(c);
  }
  if (r->algo == -1 && r->proto == -1 && r->channels == 0 && !r->channels_rails)
    return "rule changes nothing (algorithm, protocol and channels all unset)";
  return "";
}

}  // namespace

const char* AlgoName(int algo) { return algo >= 0 && algo < RR_TUNER_NUM_ALGORITHMS ? kAlgos[algo] : "*"; }
const char* ProtoName(int proto) { return proto >= 0 && proto < RR_TUNER_NUM_PROTOCOLS ? kProtos[proto] : "*"; }
const char* CollName(int coll) { return coll >= 0 && coll < RR_FUNC_COUNT ? kColls[coll] : "*"; }

RuleSet ParseRulesText(const std::string& text, const std::string& name) {
  RuleSet rs;
  rs.path = name;
  std::istringstream in(text);
  std::string line;
  int lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    size_t hash = line.find('#');
    if (hash != std::string::npos) line.resize(hash);
    std::istringstream ls(line);
    std::vector<std::string> fields;
    for (std::string w; ls >> w;) fields.push_back(w);
    if (fields.empty()) continue;
    Rule r;
    r.line = lineno;
    std::string why = ParseLine(fields, &r);
    if (!why.empty()) {
      rs.errors.push_back(name + ":" + std::to_string(lineno) + ": " + why + " (line ignored)");
      continue;
    }
    rs.rules.push_back(r);
  }
  return rs;
}

RuleSet ParseRules(const std::string& path) {
  std::ifstream f(path);
  if (!f) {
    RuleSet rs;
    rs.path = path;
    rs.errors.push_back(path + ": cannot read the rule file: " + strerror(errno) + " (no rules)");
    return rs;
  }
  std::stringstream buf;
  buf << f.rdbuf();
  return ParseRulesText(buf.str(), path);
}

const Rule* MatchRule(const std::vector<Rule>& rules, int coll, size_t bytes, bool degraded) {
  for (const Rule& r : rules) {
    if (r.when == When::kHealthy && degraded) continue;
    if (r.when == When::kDegraded && !degraded) continue;
    if (r.coll != -1 && r.coll != coll) continue;
    if (bytes < r.min_bytes || bytes > r.max_bytes) continue;
    return &r;
  }
  return nullptr;
}

}  // namespace rr::tuner
