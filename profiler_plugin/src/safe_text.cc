#include "safe_text.h"

#include <cstdint>

namespace rr::prof {
namespace {

constexpr const char kReplacement[] = "\xEF\xBF\xBD";  // U+FFFD

// Length of the valid UTF-8 sequence at s[0..n) (RFC 3629: no overlongs, surrogates or > U+10FFFF),
// or 0 when it is not one.
size_t ValidSeq(const unsigned char* s, size_t n) {
  unsigned char c = s[0];
  if (c < 0x80) return 1;
  size_t len;
  unsigned char lo = 0x80, hi = 0xBF;  // bounds of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (n < len || s[1] < lo || s[1] > hi) return 0;
  for (size_t i = 2; i < len; ++i)
    if ((s[i] & 0xC0) != 0x80) return 0;
  return len;
}

}  // namespace

std::string SafeUtf8(const char* s, size_t max_bytes) {
  std::string out;
  if (s == nullptr) return out;
  size_t n = 0;
  while (n < max_bytes && s[n] != '\0') ++n;
  const auto* u = reinterpret_cast<const unsigned char*>(s);
  out.reserve(n);
  for (size_t i = 0; i < n;) {
    size_t len = ValidSeq(u + i, n - i);
    if (len == 0) {
      out += kReplacement;
      ++i;
    } else {
      out.append(s + i, len);
      i += len;
    }
  }
  return out;
}

std::string PromLabel(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string DumpJson(const nlohmann::json& j, int indent) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace rr::prof
