#include "rerail/status.h"

#include <cstring>

#include "rerail/log.h"

namespace rr {

const char* CodeName(Code c) {
  switch (c) {
    case Code::kOk: return "success";
    case Code::kUnhandledCuda: return "unhandledCudaError";
    case Code::kSystemError: return "systemError";
    case Code::kInternalError: return "internalError";
    case Code::kInvalidArgument: return "invalidArgument";
    case Code::kInvalidUsage: return "invalidUsage";
    case Code::kRemoteError: return "remoteError";
    case Code::kInProgress: return "inProgress";
  }
  return "unknown";
}

Status Status::System(const std::string& what, int err) {
  return Status(Code::kSystemError, what + ": " + std::strerror(err));
}

std::string Status::ToString() const {
  if (ok()) return "success";
  return std::string(CodeName(code_)) + ": " + msg_;
}

void LogCheckFailure(const char* file, int line, const Status& s) {
  log::Write(log::Level::kInfo, log::kFlagNet, file, line, "%s:%d -> %s", file, line, CodeName(s.code()));
}

}  // namespace rr
