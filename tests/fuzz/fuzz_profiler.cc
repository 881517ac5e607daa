// libFuzzer target: the profiler's intake of what NCCL and other plugins hand over (issue 15):
// CheckNetDescr on a net-plugin event id and descriptor bytes (rerail's own, another plugin's, truncated,
// NULL), and SafeUtf8/DumpJson/PromLabel on arbitrary text (commName, reason strings).
// Invariants: a descriptor accepted is rerail's version-1 id with its magic and a full size; the
// sanitised text is valid UTF-8 no longer than its input allows and DumpJson never throws.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "profiler.h"
#include "rerail/prof_net_event.h"
#include "safe_text.h"

namespace {

bool ValidUtf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xc0) != 0x80) return false;
    }
    i += n;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 9) return 0;
  const uint8_t mode = data[0];
  int64_t id = 0;
  std::memcpy(&id, data + 1, 8);
  data += 9, size -= 9;
  if (mode & 1) id = RR_PROF_NET_PLUGIN_ID;                                   // rerail's id
  else if (mode & 2) id = static_cast<int64_t>(RR_PROF_NET_TYPE_RERAIL) | (id & 0xffff);  // another version
  // The descriptor, in a buffer of its exact size (at least the 8 bytes the contract lets it read):
  // ASan reports any read past it.
  std::vector<uint8_t> d(data, data + size);
  if (d.size() < 8) d.resize(8);
  if (mode & 4) {
    const uint32_t magic = RR_PROF_NET_MAGIC;
    std::memcpy(d.data(), &magic, 4);
  }
  rr::prof::NetReject why{};
  const void* descr = (mode & 8) ? nullptr : d.data();
  if (rr::prof::CheckNetDescr(id, descr, &why)) {
    uint32_t magic = 0, dsize = 0;
    std::memcpy(&magic, d.data(), 4);
    std::memcpy(&dsize, d.data() + 4, 4);
    if (id != RR_PROF_NET_PLUGIN_ID || descr == nullptr || magic != RR_PROF_NET_MAGIC ||
        dsize < sizeof(rrProfNetEvent_v1_t)) {
      std::abort();
    }
  } else if (static_cast<int>(why) < 0 || static_cast<int>(why) >= rr::prof::kNetRejectKinds) {
    std::abort();
  }
  // Text: the same bytes as a string NCCL might hand over (not NUL-terminated within max_bytes).
  const size_t max_bytes = mode >> 4;
  const std::string text(reinterpret_cast<const char*>(data), size);
  const std::string s = rr::prof::SafeUtf8(text.c_str(), max_bytes == 15 ? text.size() : max_bytes * 8);
  if (!ValidUtf8(s)) std::abort();
  nlohmann::json j = {{"comm", s}, {"raw", text}};
  const std::string out = rr::prof::DumpJson(j);  // must not throw, even on invalid UTF-8 in "raw"
  if (out.empty()) std::abort();
  (void)rr::prof::PromLabel(s);
  return 0;
}
