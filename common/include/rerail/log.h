// rerail — logging through NCCL's logger.
//
// Contract
//   * Inside a plugin every message goes through the ncclDebugLogger_t that NCCL hands to init();
//     NCCL filters by NCCL_DEBUG / NCCL_DEBUG_SUBSYS. Call SetLogger() from init and
//     SetLogger(nullptr) from the last finalize (the library may be dlclosed afterwards).
//   * Before init, or in tools and tests, a built-in stderr logger is used that honours NCCL_DEBUG
//     (default WARN) so rerail tools print like NCCL does.
//   * Every line is prefixed with the component prefix ("NET/rerail", "TUNER/rerail",
//     "PROFILER/rerail") set once per library with SetPrefix(); RR_*_P variants take it explicitly.
//   * Tests capture lines with SetCapture(): a callback that receives each formatted line in addition
//     to the logger (used to assert expected WARN lines instead of printing them).
//   * Thread-safe: the logger pointer and prefix are atomics; formatting uses a stack buffer.
//   * Data-path messages must use RR_TRACE only (compiled in, filtered by level first).
#pragma once

#include <cstdarg>
#include <functional>
#include <string>

namespace rr::log {

// Same numeric values as NCCL's ncclDebugLogLevel.
enum class Level : int { kNone = 0, kVersion = 1, kWarn = 2, kInfo = 3, kAbort = 4, kTrace = 5 };

// NCCL subsystem flags (reference §8).
constexpr unsigned long kFlagInit = 0x1;
constexpr unsigned long kFlagColl = 0x2;
constexpr unsigned long kFlagP2p = 0x4;
constexpr unsigned long kFlagNet = 0x10;
constexpr unsigned long kFlagGraph = 0x20;
constexpr unsigned long kFlagTuning = 0x40;
constexpr unsigned long kFlagEnv = 0x80;
constexpr unsigned long kFlagProxy = 0x400;
constexpr unsigned long kFlagBootstrap = 0x1000;
constexpr unsigned long kFlagProfile = 0x4000;
constexpr unsigned long kFlagAll = ~0ul;

// Signature-compatible with ncclDebugLogger_t (the level enum is int-sized).
using LoggerFn = void (*)(int level, unsigned long flags, const char* file, int line, const char* fmt, ...);

void SetLogger(LoggerFn fn);            // nullptr: back to the stderr logger
void SetPrefix(const char* prefix);     // static string, e.g. "NET/rerail"
const char* Prefix();

// Called with each formatted line (level, text without prefix) when set; nullptr clears.
using CaptureFn = std::function<void(Level, const std::string&)>;
void SetCapture(CaptureFn fn);

// True if a message at this level could print with the stderr logger; the NCCL logger filters itself.
bool Enabled(Level level);

void Write(Level level, unsigned long flags, const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 5, 6)));
void WriteP(const char* prefix, Level level, unsigned long flags, const char* file, int line,
            const char* fmt, ...) __attribute__((format(printf, 6, 7)));

}  // namespace rr::log

#define RR_WARN(fmt, ...) \
  ::rr::log::Write(::rr::log::Level::kWarn, ::rr::log::kFlagAll, __FILE__, __LINE__, fmt, ##__VA_ARGS__)
#define RR_INFO(flags, fmt, ...) \
  ::rr::log::Write(::rr::log::Level::kInfo, flags, __FILE__, __LINE__, fmt, ##__VA_ARGS__)
#define RR_TRACE(flags, fmt, ...)                                                           \
  do {                                                                                      \
    if (::rr::log::Enabled(::rr::log::Level::kTrace))                                       \
      ::rr::log::Write(::rr::log::Level::kTrace, flags, __FILE__, __LINE__, fmt, ##__VA_ARGS__); \
  } while (0)
#define RR_WARN_P(prefix, fmt, ...) \
  ::rr::log::WriteP(prefix, ::rr::log::Level::kWarn, ::rr::log::kFlagAll, __FILE__, __LINE__, fmt, ##__VA_ARGS__)
#define RR_INFO_P(prefix, flags, fmt, ...) \
  ::rr::log::WriteP(prefix, ::rr::log::Level::kInfo, flags, __FILE__, __LINE__, fmt, ##__VA_ARGS__)
