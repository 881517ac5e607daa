// Slurm-style node list expansion (see ExpandHostList in rerail/boot/job.h).
#include <cctype>
#include <string>
#include <vector>

#include "rerail/boot/job.h"

namespace rr::boot {
namespace {

bool AllDigits(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

std::string Pad(unsigned long v, size_t width) {
  std::string s = std::to_string(v);
  if (s.size() < width) s.insert(0, width - s.size(), '0');
  return s;
}

// "001-004,010" -> {"001","002","003","004","010"}
Status ExpandBracket(const std::string& body, const std::string& whole, size_t max_hosts, std::vector<std::string>* out) {
  size_t pos = 0;
  while (pos <= body.size()) {
    size_t comma = body.find(',', pos);
    std::string item = body.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    size_t dash = item.find('-');
    std::string lo = item.substr(0, dash);
    std::string hi = dash == std::string::npos ? lo : item.substr(dash + 1);
    if (!AllDigits(lo) || !AllDigits(hi) || lo.size() > 9 || hi.size() > 9)
      return Status::InvalidUsage("malformed node list '" + whole + "': range '" + item +
                                  "' is not <number> or <number>-<number>");
    unsigned long a = std::stoul(lo), b = std::stoul(hi);
    if (b < a)
      return Status::InvalidUsage("malformed node list '" + whole + "': range '" + item + "' goes backwards");
    // Bounded per range and in total, so "[0-65535,0-65535,...]" cannot allocate without limit.
    if (b - a >= max_hosts || out->size() + (b - a) >= max_hosts)
      return Status::InvalidUsage("node list '" + whole + "' expands to too many hosts");
    for (unsigned long v = a; v <= b; ++v) out->push_back(Pad(v, lo.size()));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return Status::Ok();
}

// "fd00::2", "::ffff:10.0.0.1", "fe80::1%eth0": hex digits, ':' and '.', then an optional "%<interface>".
bool Ipv6Literal(const std::string& s) {
  size_t pct = s.find('%');
  std::string addr = s.substr(0, pct);
  if (addr.find(':') == std::string::npos || addr.find_first_not_of("0123456789abcdefABCDEF:.") != std::string::npos)
    return false;
  if (pct == std::string::npos) return true;
  std::string ifname = s.substr(pct + 1);
  return !ifname.empty() && ifname.size() < 16 &&
         ifname.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") == std::string::npos;
}

// One top-level item: literal text with any number of [..] groups (cartesian product).
Status ExpandItem(const std::string& item, const std::string& whole, size_t max_hosts, std::vector<std::string>* out) {
  // "[fd00::2]" is an IPv6 literal, not a range; anything else with ':' in brackets is malformed (it
  // would become a host name holding ',' or ']': found by tests/fuzz/fuzz_hostlist).
  if (item.front() == '[' && item.back() == ']' && item.find(':') != std::string::npos) {
    std::string inner = item.substr(1, item.size() - 2);
    if (!Ipv6Literal(inner))
      return Status::InvalidUsage("malformed node list '" + whole + "': '" + item + "' is not an IPv6 literal");
    out->push_back(inner);
    return Status::Ok();
  }
  std::vector<std::string> partial = {""};
  size_t pos = 0;
  while (pos < item.size()) {
    size_t open = item.find('[', pos);
    std::string lit = item.substr(pos, open == std::string::npos ? std::string::npos : open - pos);
    if (lit.find(']') != std::string::npos)
      return Status::InvalidUsage("malformed node list '" + whole + "': ']' without '['");
    for (auto& p : partial) p += lit;
    if (open == std::string::npos) break;
    size_t close = item.find(']', open);
    if (close == std::string::npos)
      return Status::InvalidUsage("malformed node list '" + whole + "': '[' without ']'");
    std::vector<std::string> values;
    RR_CHECK(ExpandBracket(item.substr(open + 1, close - open - 1), whole, max_hosts, &values));
    if (partial.size() * values.size() > max_hosts)
      return Status::InvalidUsage("node list '" + whole + "' expands to more than " + std::to_string(max_hosts) + " hosts");
    std::vector<std::string> next;
    for (const auto& p : partial)
      for (const auto& v : values) next.push_back(p + v);
    partial.swap(next);
    pos = close + 1;
  }
  for (auto& p : partial) out->push_back(std::move(p));
  return Status::Ok();
}

}  // namespace

Status ExpandHostList(const std::string& text, std::vector<std::string>* out, size_t max_hosts) {
  out->clear();
  std::string item;
  int depth = 0;
  auto flush = [&]() -> Status {
    // Surrounding blanks are harmless; blanks inside a name are not.
    size_t b = item.find_first_not_of(" \t"), e = item.find_last_not_of(" \t");
    std::string trimmed = b == std::string::npos ? "" : item.substr(b, e - b + 1);
    if (trimmed.empty()) return Status::InvalidUsage("malformed node list '" + text + "': empty host name");
    if (trimmed.find_first_of(" \t") != std::string::npos)
      return Status::InvalidUsage("malformed node list '" + text + "': blank inside '" + trimmed + "'");
    RR_CHECK(ExpandItem(trimmed, text, max_hosts, out));
    if (out->size() > max_hosts)
      return Status::InvalidUsage("node list '" + text + "' has more than " + std::to_string(max_hosts) + " hosts");
    item.clear();
    return Status::Ok();
  };
  for (char c : text) {
    if (c == '[') ++depth;
    if (c == ']' && --depth < 0) return Status::InvalidUsage("malformed node list '" + text + "': ']' without '['");
    if (depth > 1) return Status::InvalidUsage("malformed node list '" + text + "': nested '['");
    if (c == ',' && depth == 0) {
      RR_CHECK(flush());
      continue;
    }
    item += c;
  }
  if (depth != 0) return Status::InvalidUsage("malformed node list '" + text + "': '[' without ']'");
  RR_CHECK(flush());
  return Status::Ok();
}

}  // namespace rr::boot
