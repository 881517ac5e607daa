// ncclProfiler_v6 (NCCL 2.30): same implementation as v5; the v6 descriptor adds copy-engine members to the
// union, which Profiler::Start copies verbatim.
#include "profiler.h"
#include "rerail/log.h"

namespace {

using rr::prof::Context;
using rr::prof::Profiler;

rrProfResult_t Init(void** context, uint64_t commId, int* mask, const char* commName, int nNodes, int nRanks,
                    int rank, rrProfLogger_t logfn) {
  try {
    Context* ctx = nullptr;
    rr::Status st = Profiler::Init(&ctx, commId, mask, commName, nNodes, nRanks, rank, logfn, 6);
    if (context != nullptr) *context = ctx;
    return static_cast<rrProfResult_t>(st.code());
  } catch (...) {
    RR_WARN_P("PROFILER/rerail", "init: unexpected exception");
    return 3;
  }
}

rrProfResult_t StartEvent(void* context, void** eHandle, rrProfEventDescr_v6_t* d) {
  if (d == nullptr) {
    if (eHandle != nullptr) *eHandle = nullptr;
    return 0;
  }
  try {
    Profiler::Start(static_cast<Context*>(context), eHandle, d->type, d->parentObj, d->v5Union);
  } catch (...) {  // only a thread's first call allocates (its ring)
    if (eHandle != nullptr) *eHandle = nullptr;
  }
  return 0;
}

rrProfResult_t StopEvent(void* eHandle) {
  try {
    Profiler::Stop(eHandle);
  } catch (...) {  // only a thread's first call allocates (its ring)
  }
  return 0;
}

rrProfResult_t RecordEventState(void* eHandle, int eState, rrProfEventStateArgs_v6_t* args) {
  try {
    Profiler::State(eHandle, eState, args);
  } catch (...) {  // only a thread's first call allocates (its ring)
  }
  return 0;
}

rrProfResult_t Finalize(void* context) {
  try {
    return static_cast<rrProfResult_t>(Profiler::Finalize(static_cast<Context*>(context)).code());
  } catch (...) {
    RR_WARN_P("PROFILER/rerail", "finalize: unexpected exception");
    return 3;
  }
}

}  // namespace

extern "C" __attribute__((visibility("default")))
const rrProfiler_v6_t ncclProfiler_v6 = {"rerail", Init, StartEvent, StopEvent, RecordEventState, Finalize};
