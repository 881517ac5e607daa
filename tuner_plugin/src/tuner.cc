// rerail tuner implementation (tuner.h).
#include "tuner.h"

#include <time.h>

#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <mutex>

#include "rerail/log.h"
#include "rerail/params.h"
#include "rerail/tuner/health_link.h"
#include "rerail/version.h"

namespace rr::tuner {
namespace {

constexpr const char* kPrefix = "TUNER/rerail";
constexpr int kMaxChannels = 64;  // NCCL's MAXCHANNELS; NCCL caps further by the comm's channels
// NCCL 2.28.9 (topoGetAlgoInfo) drops channels while nBytes < nc x threads x thread threshold; the
// largest product is Simple's 512 threads x 64 = 32 KiB per channel. The tuner's *nChannels REPLACES
// that size-based count, so it is only set for messages of at least channels x 32 KiB, where NCCL
// itself would run that many: the tuner then only lowers or aligns NCCL's count, never raises the
// channels of a small, latency-bound message.
constexpr size_t kBytesPerChannelFloor = 32 * 1024;

std::mutex g_mu;
int g_refs = 0;
std::shared_ptr<const Settings> g_settings;

uint64_t CoarseNowNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

void LogTo(rrTunerLogger_t log, int level, const char* msg) {
  if (log != nullptr) {
    log(level, level == static_cast<int>(log::Level::kWarn) ? log::kFlagAll : log::kFlagTuning, __FILE__,
        __LINE__, "%s : %s", kPrefix, msg);
  } else {
    log::WriteP(kPrefix, static_cast<log::Level>(level), log::kFlagTuning, __FILE__, __LINE__, "%s", msg);
  }
}

std::shared_ptr<const Settings> LoadSettings(rrTunerLogger_t log) {
  auto s = std::make_shared<Settings>();
  // Alone in its library the tuner re-reads the environment at each first init; beside the net plugin
  // it keeps what the net plugin loaded (a reload would race with the net plugin's readers).
  Status st = HasRailSources() ? Params::Load() : Params::Reload();
  if (!st.ok()) {
    std::string m = "RERAIL_* parameters: " + st.ToString() + " (defaults used where invalid)";
    LogTo(log, static_cast<int>(log::Level::kWarn), m.c_str());
  }
  s->enabled = Params::Bool(ParamId::TunerEnable);
  s->refresh_ns = static_cast<uint64_t>(Params::Int(ParamId::TunerRefreshMs)) * 1'000'000ull;
  s->channels_per_rail = static_cast<int>(Params::Int(ParamId::TunerChannelsPerRail));
  s->board_path = Params::Str(ParamId::TunerBoard);
  if (s->board_path.empty()) s->board_path = DefaultBoardPath(Params::Str(ParamId::BoardDir));
  const std::string& cfg = Params::Str(ParamId::TunerConfig);
  auto rules = std::make_shared<RuleSet>(cfg.empty() ? RuleSet{} : ParseRules(cfg));
  for (const std::string& e : rules->errors) LogTo(log, static_cast<int>(log::Level::kWarn), e.c_str());
  if (!cfg.empty()) {
    std::string m = cfg + ": " + std::to_string(rules->rules.size()) + " rule(s) loaded";
    LogTo(log, static_cast<int>(log::Level::kInfo), m.c_str());
  }
  s->rules = std::move(rules);
  return s;
}

// Hops of the inter-node phase of an algorithm on n nodes, for the latency estimate.
double NetHops(int algo, size_t nnodes) {
  if (nnodes <= 1) return 0.0;
  double n = static_cast<double>(nnodes);
  switch (algo) {
    case RR_ALGO_RING: return 2.0 * (n - 1.0);
    case RR_ALGO_NVLS: return 2.0;
    default: return 2.0 * std::ceil(std::log2(n));  // tree-like: tree, collnet, nvls_tree, pat
  }
}

}  // namespace

std::shared_ptr<const Settings> Acquire(rrTunerLogger_t log, int abi_version) {
  std::lock_guard<std::mutex> lk(g_mu);
  if (g_refs++ == 0 || g_settings == nullptr) {
    char line[160];
    snprintf(line, sizeof(line), "rerail %s (git %s), tuner ABI v%d", RERAIL_VERSION_STRING, RERAIL_GIT_SHA,
             abi_version);
    LogTo(log, static_cast<int>(log::Level::kInfo), line);
    g_settings = LoadSettings(log);
  }
  return g_settings;
}

void Release() {
  std::lock_guard<std::mutex> lk(g_mu);
  if (g_refs > 0 && --g_refs == 0) g_settings.reset();
}

CommTuner::CommTuner(uint64_t comm_id, size_t nranks, size_t nnodes, rrTunerLogger_t log,
                     const rrTunerConstants_v5_t* constants, std::shared_ptr<const Settings> settings)
    : comm_id_(comm_id),
      nranks_(nranks),
      nnodes_(nnodes),
      log_(log),
      settings_(std::move(settings)),
      crosses_network_(nnodes > 1 && nranks > 1),
      source_(comm_id, settings_->board_path) {
  for (int a = 0; a < RR_TUNER_NUM_ALGORITHMS; ++a) {
    for (int p = 0; p < RR_TUNER_NUM_PROTOCOLS; ++p) {
      double lat = 0.0;
      if (constants != nullptr) {  // read only: NCCL owns the struct
        lat = constants->baseLatencies[a][p] + constants->hwLatencies[RR_HW_NET][a][p] * NetHops(a, nnodes);
      }
      lat_[a][p] = std::isfinite(lat) && lat > 0.0 ? static_cast<float>(lat) : 0.0f;
    }
  }
  rule_logged_.assign(settings_->rules ? settings_->rules->rules.size() : 0, false);
  Log(static_cast<int>(log::Level::kInfo),
      "comm %#llx: %zu ranks on %zu nodes, %s; rail health from the net plugin in process or board %s; "
      "refresh %llu ms, %d channels per healthy rail when degraded, %zu rule(s)",
      static_cast<unsigned long long>(comm_id_), nranks_, nnodes_,
      !settings_->enabled ? "disabled (RERAIL_TUNER_ENABLE=0): NCCL's choices stand"
      : crosses_network_  ? "spans nodes: network costs follow rail health"
                          : "single node: nothing crosses the network, NCCL's choices stand",
      settings_->board_path.c_str(), static_cast<unsigned long long>(settings_->refresh_ns / 1'000'000ull),
      settings_->channels_per_rail, rule_logged_.size());
}

void CommTuner::Log(int level, const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  LogTo(log_, level, buf);
}

void CommTuner::WarnOnce(const char* what) {
  if (warned_) return;
  warned_ = true;
  Log(static_cast<int>(log::Level::kWarn), "comm %#llx: %s; NCCL's choices are left alone for this call",
      static_cast<unsigned long long>(comm_id_), what);
}

void CommTuner::Refresh(uint64_t now_ns) {
  next_refresh_ns_ = now_ns + settings_->refresh_ns;
  Decision d;
  d.view = source_.Read();
  if (d.view.Degraded() && d.view.usable > 0) {
    d.scale = static_cast<float>(1.0 / d.view.capacity);
    if (settings_->channels_per_rail > 0) {
      int c = d.view.usable * settings_->channels_per_rail;
      d.channels = c > kMaxChannels ? kMaxChannels - kMaxChannels % d.view.usable : c;
    }
  }
  bool changed = !have_decision_ || d.view != cur_.view ||
                 (!d.view.valid && source_.board_problem() != last_problem_);
  cur_ = d;
  have_decision_ = true;
  if (changed) {
    last_problem_ = source_.board_problem();
    rule_logged_.assign(rule_logged_.size(), false);
    LogDecision(d);
  }
}

void CommTuner::LogDecision(const Decision& d) {
  auto id = static_cast<unsigned long long>(comm_id_);
  const RailView& v = d.view;
  if (!v.valid) {
    Log(static_cast<int>(log::Level::kInfo), "comm %#llx: no rail health (board %s: %s); NCCL's choices stand", id,
        source_.board_path().c_str(), source_.board_problem().c_str());
  } else if (!v.Degraded()) {
    Log(static_cast<int>(log::Level::kInfo), "comm %#llx: %d/%d rails healthy (%s); NCCL's choices stand", id,
        v.usable, v.total, SourceName(v.source));
  } else if (v.usable == 0) {
    Log(static_cast<int>(log::Level::kWarn),
        "comm %#llx: 0/%d rails healthy (%s): the net plugin is waiting for a rail to come back; NCCL's "
        "choices stand", id, v.total, SourceName(v.source));
  } else {
    Log(static_cast<int>(log::Level::kInfo),
        "comm %#llx: %d/%d rails healthy (%s): network bandwidth terms x%.2f, channels %d", id, v.usable, v.total,
        SourceName(v.source), static_cast<double>(d.scale), d.channels);
  }
}

void CommTuner::GetCollInfo(int coll, size_t nbytes, float* table, int num_algo, int num_proto, int* nchannels) {
  if (!settings_->enabled || table == nullptr || num_algo <= 0 || num_proto <= 0) return;
  uint64_t now = CoarseNowNs();
  if (!have_decision_ || now >= next_refresh_ns_) Refresh(now);
  if (crosses_network_ && cur_.scale != 1.0f) {
    // Every entry crosses the network on a multi-node comm; rows/columns beyond the v5 set (a newer
    // NCCL) have no latency estimate and are scaled whole.
    for (int a = 0; a < num_algo; ++a) {
      for (int p = 0; p < num_proto; ++p) {
        float& t = table[a * num_proto + p];
        float lat = a < RR_TUNER_NUM_ALGORITHMS && p < RR_TUNER_NUM_PROTOCOLS ? lat_[a][p] : 0.0f;
        if (t > lat) t = lat + (t - lat) * cur_.scale;  // false for -1 (ignored) and NaN: untouched
      }
    }
    if (cur_.channels > 0 && nchannels != nullptr && nbytes >= static_cast<size_t>(cur_.channels) * kBytesPerChannelFloor)
      *nchannels = cur_.channels;
  }
  const RuleSet* rs = settings_->rules.get();
  if (rs != nullptr && !rs->rules.empty()) {
    const Rule* r = MatchRule(rs->rules, coll, nbytes, cur_.view.Degraded());
    if (r != nullptr) ApplyRule(*r, coll, nbytes, table, num_algo, num_proto, nchannels);
  }
}

void CommTuner::ApplyRule(const Rule& r, int coll, size_t nbytes, float* table, int num_algo, int num_proto,
                          int* nchannels) {
  const int na = num_algo < RR_TUNER_NUM_ALGORITHMS ? num_algo : RR_TUNER_NUM_ALGORITHMS;
  const int np = num_proto < RR_TUNER_NUM_PROTOCOLS ? num_proto : RR_TUNER_NUM_PROTOCOLS;
  int best = -1;
  if (r.algo >= 0 || r.proto >= 0) {
    for (int a = 0; a < na; ++a) {
      if (r.algo >= 0 && a != r.algo) continue;
      for (int p = 0; p < np; ++p) {
        if (r.proto >= 0 && p != r.proto) continue;
        int i = a * num_proto + p;
        if (table[i] >= 0.0f && (best < 0 || table[i] < table[best])) best = i;
      }
    }
    if (best >= 0) table[best] = 0.0f;
  }
  int ch = r.channels;
  if (r.channels_rails) ch = cur_.view.valid && cur_.view.usable > 0 ? cur_.view.usable * settings_->channels_per_rail : 0;
  if (ch > kMaxChannels) ch = kMaxChannels;
  if (ch > 0 && nchannels != nullptr) *nchannels = ch;
  size_t idx = static_cast<size_t>(&r - settings_->rules->rules.data());
  if (idx < rule_logged_.size() && !rule_logged_[idx]) {
    rule_logged_[idx] = true;
    Log(static_cast<int>(log::Level::kInfo),
        "comm %#llx: rule %s:%d applies (%s, %zu bytes): %s%s%s, channels %d", static_cast<unsigned long long>(comm_id_),
        settings_->rules->path.c_str(), r.line, CollName(coll), nbytes,
        best >= 0 ? AlgoName(best / num_proto) : "no supported algorithm/protocol",
        best >= 0 ? "/" : "", best >= 0 ? ProtoName(best % num_proto) : "", ch);
  }
}

}  // namespace rr::tuner
