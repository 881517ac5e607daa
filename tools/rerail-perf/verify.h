// rerail-perf — input patterns and full verification of every collective's result.
//
// Contract
//   * Inputs are small integers (-15..15) that depend on (rank, element, seed), so sums over up to
//     ~500,000 ranks stay exact in float32 and the expected value of every output element can be
//     computed locally by every rank without any communication.
//   * FillInput() writes this rank's input; Poison() marks the output so stale data cannot pass.
//   * CountWrong() compares EVERY output element with its expected value and returns the number
//     of mismatches (nccl-tests' #wrong); it never samples.
//   * Pure functions on caller-owned memory; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>

#include "options.h"
#include "plan.h"

namespace rr::perf {

struct VerifyArgs {
  Coll coll;
  DataType dtype;
  int nranks, rank, root;
  size_t count;   // Plan::count
  uint32_t seed;  // differs per check iteration
};

void FillInput(const VerifyArgs& a, char* in, size_t in_bytes);
void Poison(const VerifyArgs& a, char* out, size_t out_bytes);
uint64_t CountWrong(const VerifyArgs& a, const char* out, size_t out_bytes);

}  // namespace rr::perf
