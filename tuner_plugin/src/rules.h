// rerail tuner — the optional rule file (RERAIL_TUNER_CONFIG).
//
// Format: one rule per line, fields separated by blanks, '#' starts a comment, blank lines ignored.
//
//   <when> <collective> <min_bytes> <max_bytes> <algorithm> <protocol> <channels>
//
//   when        healthy | degraded | any          (rail health of this process)
//   collective  allreduce | allgather | reducescatter | broadcast | reduce | alltoall | scatter |
//               gather | *
//   min, max    message size in bytes, inclusive; suffix K, M or G (powers of 1024); * = unbounded
//   algorithm   tree | ring | collnet_direct | collnet_chain | nvls | nvls_tree | pat | *
//   protocol    ll | ll128 | simple | *
//   channels    N (1..64: cap the task's channels), rails (healthy rails x RERAIL_TUNER_CHANNELS_PER_RAIL),
//               or - (leave the channel count to the health policy / NCCL)
//
// The first rule that matches a collective applies, after the health scaling. A rule naming an
// algorithm and/or protocol forces the cheapest entry of NCCL's cost table that fits it (sets it to
// 0, so NCCL picks it); entries NCCL marked -1 (unsupported) are never chosen, so a rule whose
// combination is unsupported for that call changes no entry.
//
// Errors: ParseRules never fails as a whole. A malformed line yields a message
// "<file>:<line>: <what is wrong>: <the field>" in `errors` and is ignored; an unreadable file yields
// one message and no rules.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace rr::tuner {

enum class When : int { kAny = 0, kHealthy = 1, kDegraded = 2 };

struct Rule {
  When when = When::kAny;
  int coll = -1;             // ncclFunc_t value, -1 = any
  uint64_t min_bytes = 0;
  uint64_t max_bytes = UINT64_MAX;
  int algo = -1;             // -1 = any
  int proto = -1;            // -1 = any
  int channels = 0;          // 0 = leave, >0 = that many
  bool channels_rails = false;  // 'rails': healthy rails x channels-per-rail
  int line = 0;              // line number in the file, for logs
};

struct RuleSet {
  std::string path;
  std::vector<Rule> rules;
  std::vector<std::string> errors;
};

RuleSet ParseRules(const std::string& path);
RuleSet ParseRulesText(const std::string& text, const std::string& name);

// The first rule matching (coll, bytes, degraded), or nullptr.
const Rule* MatchRule(const std::vector<Rule>& rules, int coll, size_t bytes, bool degraded);

const char* AlgoName(int algo);   // "tree", ...; "*" for -1
const char* ProtoName(int proto); // "ll", ...; "*" for -1
const char* CollName(int coll);   // "allreduce", ...; "*" for -1

}  // namespace rr::tuner
