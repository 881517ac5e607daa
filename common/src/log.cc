#include "rerail/log.h"

#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace rr::log {
namespace {

std::atomic<LoggerFn> g_logger{nullptr};
std::atomic<const char*> g_prefix{"NET/rerail"};
std::mutex g_capture_mu;
CaptureFn g_capture;  // guarded by g_capture_mu
std::atomic<bool> g_has_capture{false};

// NCCL_DEBUG as NCCL parses it: VERSION, WARN, INFO, ABORT, TRACE (case-insensitive); default WARN
// for rerail's own stderr logger (NCCL's default is none, but tools should show their warnings).
Level EnvLevel() {
  static const Level level = [] {
    const char* v = std::getenv("NCCL_DEBUG");
    if (v == nullptr) return Level::kWarn;
    if (strcasecmp(v, "VERSION") == 0) return Level::kVersion;
    if (strcasecmp(v, "WARN") == 0) return Level::kWarn;
    if (strcasecmp(v, "INFO") == 0) return Level::kInfo;
    if (strcasecmp(v, "ABORT") == 0) return Level::kAbort;
    if (strcasecmp(v, "TRACE") == 0) return Level::kTrace;
    return Level::kNone;
  }();
  return level;
}

void StderrLogger(int level, unsigned long /*flags*/, const char* /*file*/, int /*line*/, const char* fmt, ...) {
  if (level > static_cast<int>(EnvLevel())) return;
  char host[64] = {0};
  gethostname(host, sizeof(host) - 1);
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  std::fprintf(stderr, "%s:%d:%ld [rerail] %s %s\n", host, static_cast<int>(getpid()),
               static_cast<long>(syscall(SYS_gettid)), level == 2 ? "WARN" : (level == 3 ? "INFO" : "TRACE"),
               msg);
}

void VWrite(const char* prefix, Level level, unsigned long flags, const char* file, int line, const char* fmt,
            va_list ap) {
  char msg[2048];
  vsnprintf(msg, sizeof(msg), fmt, ap);
  if (g_has_capture.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lk(g_capture_mu);
    if (g_capture) g_capture(level, msg);
  }
  LoggerFn fn = g_logger.load(std::memory_order_acquire);
  if (fn == nullptr) fn = &StderrLogger;
  fn(static_cast<int>(level), flags, file, line, "%s : %s", prefix, msg);
}

}  // namespace

void SetLogger(LoggerFn fn) { g_logger.store(fn, std::memory_order_release); }
void SetPrefix(const char* prefix) { g_prefix.store(prefix, std::memory_order_release); }
const char* Prefix() { return g_prefix.load(std::memory_order_acquire); }

void SetCapture(CaptureFn fn) {
  std::lock_guard<std::mutex> lk(g_capture_mu);
  g_capture = std::move(fn);
  g_has_capture.store(static_cast<bool>(g_capture), std::memory_order_release);
}

bool Enabled(Level level) {
  return level <= EnvLevel() || g_has_capture.load(std::memory_order_relaxed);
}

void Write(Level level, unsigned long flags, const char* file, int line, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  VWrite(Prefix(), level, flags, file, line, fmt, ap);
  va_end(ap);
}

void WriteP(const char* prefix, Level level, unsigned long flags, const char* file, int line, const char* fmt,
            ...) {
  va_list ap;
  va_start(ap, fmt);
  VWrite(prefix, level, flags, file, line, fmt, ap);
  va_end(ap);
}

}  // namespace rr::log
