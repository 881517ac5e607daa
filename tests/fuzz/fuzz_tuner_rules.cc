// libFuzzer target: the tuner's rule file (RERAIL_TUNER_CONFIG, tuner_plugin/src/rules.cc
// ParseRulesText), text a user hands to every rank.
// Invariants: every non-blank, non-comment line gives a rule or an error naming its line; an accepted
// rule is in range (known collective other than send/recv, min <= max, known algorithm and protocol,
// channels 0..64 or 'rails', changes something); writing the rules back as text and parsing that gives
// the same rules (parse -> serialize -> parse) and no error.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "rules.h"

using namespace rr::tuner;

namespace {

[[noreturn]] void Fail() { std::abort(); }

std::string Bytes(uint64_t v, uint64_t unbounded) { return v == unbounded && unbounded != 0 ? "*" : std::to_string(v); }

std::string Write(const Rule& r) {
  const char* when = r.when == When::kHealthy ? "healthy" : r.when == When::kDegraded ? "degraded" : "any";
  std::string ch = r.channels_rails ? "rails" : r.channels == 0 ? "-" : std::to_string(r.channels);
  return std::string(when) + " " + CollName(r.coll) + " " + Bytes(r.min_bytes, 0) + " " + Bytes(r.max_bytes, UINT64_MAX) +
         " " + AlgoName(r.algo) + " " + ProtoName(r.proto) + " " + ch + "\n";
}

bool Same(const Rule& a, const Rule& b) {
  return a.when == b.when && a.coll == b.coll && a.min_bytes == b.min_bytes && a.max_bytes == b.max_bytes &&
         a.algo == b.algo && a.proto == b.proto && a.channels == b.channels && a.channels_rails == b.channels_rails;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // 1 KiB holds a dozen rules: longer files only repeat lines (each line costs an istringstream).
  if (size > 1024) return 0;
  const std::string text(reinterpret_cast<const char*>(data), size);
  RuleSet rs = ParseRulesText(text, "fuzz");
  std::string again;
  int last_line = 0;
  for (const Rule& r : rs.rules) {
    if (r.line <= last_line) Fail();  // in file order, one per line
    last_line = r.line;
    if (r.coll < -1 || r.coll > 10 || std::string(CollName(r.coll)) == "sendrecv" ||
        std::string(CollName(r.coll)) == "send" || std::string(CollName(r.coll)) == "recv")
      Fail();
    if (r.min_bytes > r.max_bytes || r.algo < -1 || r.algo > 6 || r.proto < -1 || r.proto > 2) Fail();
    if (r.channels < 0 || r.channels > 64 || (r.channels_rails && r.channels != 0)) Fail();
    if (r.algo == -1 && r.proto == -1 && r.channels == 0 && !r.channels_rails) Fail();
    again += Write(r);
  }
  for (const std::string& e : rs.errors)
    if (e.compare(0, 5, "fuzz:") != 0) Fail();  // every error names the file and line
  RuleSet rt = ParseRulesText(again, "again");
  if (!rt.errors.empty() || rt.rules.size() != rs.rules.size()) Fail();
  for (size_t i = 0; i < rs.rules.size(); ++i)
    if (!Same(rs.rules[i], rt.rules[i])) Fail();
  return 0;
}
