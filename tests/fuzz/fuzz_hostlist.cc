// libFuzzer target: the job's host list (bootstrap/src/hostlist.cc ExpandHostList), the text of
// RERAIL_HOSTS or SLURM_JOB_NODELIST: "gpu[001-004,010],login1,[fd00::2]".
// The bound on hosts is 512 here instead of 65536 (same code paths, a 128x cheaper worst case, so the
// fuzzer keeps its speed on inputs such as "n[0-99999]").
// Invariants: accepted => 1..512 hosts, each non-empty, without ',', blanks, '[' or ']' (an IPv6
// literal loses its brackets); joining the hosts with ',' and expanding again gives the same list
// (parse -> serialize -> parse); a rejection says why.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "rerail/boot/job.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Every construct fits in 512 bytes; longer inputs only repeat them, each exec costing more (the
  // parser copies the whole text into its messages).
  if (size > 512) return 0;
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> hosts;
  constexpr size_t kMax = 512;
  rr::Status st = rr::boot::ExpandHostList(text, &hosts, kMax);
  if (!st.ok()) {
    if (st.message().empty()) std::abort();
    return 0;
  }
  if (hosts.empty() || hosts.size() > kMax) std::abort();
  std::string joined;
  for (const auto& h : hosts) {
    if (h.empty() || h.find_first_of(",[] \t") != std::string::npos) std::abort();
    if (!joined.empty()) joined += ',';
    joined += h;
  }
  std::vector<std::string> again;
  if (!rr::boot::ExpandHostList(joined, &again, kMax).ok() || again != hosts) std::abort();
  return 0;
}
