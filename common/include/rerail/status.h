// rerail — status type shared by every artifact.
//
// Contract
//   * Every fallible internal function returns a [[nodiscard]] Status. Ok() is cheap (no allocation);
//     an error carries a Code and a human-readable message built where the error was detected.
//   * Code values are numerically identical to NCCL's ncclResult_t so the ABI shims can cast them
//     (the shims static_assert this). common/ itself never includes an NCCL header.
//   * RR_CHECK(expr) propagates an error and logs "file:line -> code" at INFO, like NCCL's NCCLCHECK,
//     so a failure shows its call chain under NCCL_DEBUG=INFO.
//   * RR_SYSCHECK(call, what) turns a -1/errno syscall result into Code::kSystemError with strerror.
//   * Thread-safety: Status is a value type; no shared state.
#pragma once

#include <cerrno>
#include <string>
#include <utility>

namespace rr {

enum class Code : int {
  kOk = 0,               // success
  kUnhandledCuda = 1,    // a CUDA call failed (staging path only)
  kSystemError = 2,      // NIC, socket or kernel failure on this host
  kInternalError = 3,    // caller misused the API (NCCL bug or test driver bug)
  kInvalidArgument = 4,  // bad argument value (malformed handle, size out of range)
  kInvalidUsage = 5,     // bad configuration (RERAIL_* value, no usable device)
  kRemoteError = 6,      // the peer is gone or misbehaved (unreachable on every rail)
  kInProgress = 7,       // not an error: operation still running
};

const char* CodeName(Code c);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Code code, std::string msg) : code_(code), msg_(std::move(msg)) {}

  static Status Ok() { return Status(); }
  static Status System(const std::string& what, int err = errno);
  static Status Remote(std::string msg) { return Status(Code::kRemoteError, std::move(msg)); }
  static Status Internal(std::string msg) { return Status(Code::kInternalError, std::move(msg)); }
  static Status InvalidArg(std::string msg) { return Status(Code::kInvalidArgument, std::move(msg)); }
  static Status InvalidUsage(std::string msg) { return Status(Code::kInvalidUsage, std::move(msg)); }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return msg_; }
  // "systemError: connect(10.0.0.2:5000): Connection refused"
  std::string ToString() const;

 private:
  Code code_ = Code::kOk;
  std::string msg_;
};

// Logs the propagation step; defined in status.cc so this header does not pull in log.h.
void LogCheckFailure(const char* file, int line, const Status& s);

}  // namespace rr

#define RR_CHECK(expr)                                  \
  do {                                                  \
    ::rr::Status rr_check_s_ = (expr);                  \
    if (!rr_check_s_.ok()) {                            \
      ::rr::LogCheckFailure(__FILE__, __LINE__, rr_check_s_); \
      return rr_check_s_;                               \
    }                                                   \
  } while (0)

#define RR_SYSCHECK(call, what)                         \
  do {                                                  \
    if ((call) < 0) {                                   \
      ::rr::Status rr_sys_s_ = ::rr::Status::System(what); \
      ::rr::LogCheckFailure(__FILE__, __LINE__, rr_sys_s_); \
      return rr_sys_s_;                                 \
    }                                                   \
  } while (0)
