// ncclTunerPlugin_v5 (NCCL 2.28): the table NCCL 2.28.9 finds first. Nothing else is extern "C".
#include "shim.h"

extern "C" __attribute__((visibility("default")))
const rrTuner_v5_t ncclTunerPlugin_v5 = {"rerail", rr::tuner::abi::Init, rr::tuner::abi::GetCollInfo,
                                         rr::tuner::abi::Finalize};
