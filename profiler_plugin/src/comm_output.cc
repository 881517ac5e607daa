#include "comm_output.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstring>
#include <sstream>

#include <nlohmann/json.hpp>

#include "prof_abi.h"
#include "rerail/log.h"
#include "rerail/version.h"
#include "profiler.h"
#include "safe_text.h"
#include "trace_format.h"
#include "rerail/version.h"

namespace rr::prof {
namespace {

constexpr const char* kP = "PROFILER/rerail";
constexpr const char* kTail = "\n]}\n";
constexpr const char* kSummaryFormat = "rerail-profile-summary/1";

std::string Hex(uint64_t v) {
  char b[24];
  std::snprintf(b, sizeof(b), "%016" PRIx64, v);
  return b;
}

}  // namespace

constexpr double LatencyHist::kBoundsUs[];

void LatencyHist::Add(double us) {
  size_t i = 0;
  while (i < kN && us > kBoundsUs[i]) ++i;
  ++buckets[i];
  ++count;
  sum_us += us;
}

CommOutput::CommOutput(Context* ctx, std::string dir, uint64_t t0_mono_ns, int64_t t0_unix_ns)
    : ctx_(ctx), dir_(std::move(dir)), t0_mono_ns_(t0_mono_ns), t0_unix_ns_(t0_unix_ns) {
  base_ = dir_ + "/rerail-r" + std::to_string(ctx->rank) + "-" + Hex(ctx->comm_id);
  trace_path_ = base_ + ".trace.json";
  summary_path_ = base_ + ".summary.json";
  prom_path_ = base_ + ".prom";
}

CommOutput::~CommOutput() {
  if (trace_ != nullptr) std::fclose(trace_);
}

namespace {
// Process-wide counts of NetPlugin descriptors shown opaque (profiler.h NetReject).
nlohmann::json NetOpaqueJson() {
  nlohmann::json j = nlohmann::json::object();
  for (int i = 0; i < kNetRejectKinds; ++i)
    j[NetRejectName(static_cast<NetReject>(i))] = NetRejectCount(static_cast<NetReject>(i));
  return j;
}
}  // namespace

double CommOutput::Us(uint64_t mono_ns) const {
  return static_cast<double>(static_cast<int64_t>(mono_ns - t0_mono_ns_)) / 1000.0;
}

Status CommOutput::Open() {
  trace_ = std::fopen(trace_path_.c_str(), "w");
  if (trace_ == nullptr) return Status::System("create profile trace " + trace_path_);
  nlohmann::json other = {{"format", "rerail-trace/1"}, {"rank", ctx_->rank},
                          {"nRanks", ctx_->n_ranks},    {"nNodes", ctx_->n_nodes},
                          {"comm", Hex(ctx_->comm_id)}, {"commName", ctx_->comm_name},
                          {"t0_unix_ns", t0_unix_ns_},  {"version", rr::Version()}};
  std::string head = "{\"displayTimeUnit\":\"ns\",\"otherData\":" + DumpJson(other) + ",\"traceEvents\":[";
  std::fputs(head.c_str(), trace_);
  tail_pos_ = std::ftell(trace_);
  std::fputs(kTail, trace_);
  std::fflush(trace_);
  nlohmann::json pname = {
      {"name", "process_name"},
      {"ph", "M"},
      {"pid", ctx_->rank},
      {"tid", 0},
      {"args", {{"name", "rank " + std::to_string(ctx_->rank) + " comm " + Hex(ctx_->comm_id)}}}};
  AppendTrace(DumpJson(pname));
  FlushTrace();
  if (trace_failed_) return Status::System("write profile trace " + trace_path_);
  return Status::Ok();
}

void CommOutput::AppendTrace(const std::string& json_line) {
  if (trace_ == nullptr || trace_failed_) return;
  if (!first_event_) pending_ += ',';
  first_event_ = false;
  pending_ += '\n';
  pending_ += json_line;
  if (pending_.size() >= kFlushBytes) FlushTrace();
}

void CommOutput::FlushTrace() {
  if (trace_ == nullptr || trace_failed_ || pending_.empty()) return;
  // Overwrite the old tail, append the batch, rewrite the tail: the file is valid JSON after every flush.
  bool ok = std::fseek(trace_, tail_pos_, SEEK_SET) == 0 &&
            std::fwrite(pending_.data(), 1, pending_.size(), trace_) == pending_.size();
  if (ok) {
    tail_pos_ += static_cast<long>(pending_.size());
    ok = std::fputs(kTail, trace_) >= 0 && std::fflush(trace_) == 0;
  }
  pending_.clear();
  if (!ok) {
    trace_failed_ = true;
    RR_WARN_P(kP, "trace %s: write failed (%s); no more trace events for this comm", trace_path_.c_str(),
              std::strerror(errno));
  }
}

void CommOutput::EnsureTrack(int tid) {
  if (!tracks_.insert(tid).second) return;
  nlohmann::json m = {{"name", "thread_name"},
                      {"ph", "M"},
                      {"pid", ctx_->rank},
                      {"tid", tid},
                      {"args", {{"name", track::Name(tid)}}}};
  AppendTrace(DumpJson(m));
  nlohmann::json s = {{"name", "thread_sort_index"},
                      {"ph", "M"},
                      {"pid", ctx_->rank},
                      {"tid", tid},
                      {"args", {{"sort_index", (tid % track::kLaneStride) * 64 + tid / track::kLaneStride}}}};
  AppendTrace(DumpJson(s));
}

void CommOutput::Emit(const EventRec& ev) {
  UpdateMetrics(ev);
  if (!ev.visible) return;
  EnsureTrack(track::Tid(ev.track, ev.lane));
  AppendTrace(DumpJson(EventJson(ev, [this](uint64_t ns) { return Us(ns); })));
  ++emitted_;
}

void CommOutput::UpdateMetrics(const EventRec& ev) {
  int ti = TypeIndex(ev.type);
  if (ti >= 0) ++events_by_type_[ti];
  if (ev.unfinished) ++unfinished_;
  if (ev.parent_lost) ++parent_lost_;
  if (ev.type == RR_PROF_COLL && !ev.unfinished) {
    rrProfEventDescr_v5_t d;
    std::memcpy(reinterpret_cast<char*>(&d) + offsetof(rrProfEventDescr_v5_t, coll), ev.payload,
                kPayloadBytes);
    uint64_t end = std::max(ev.last_ns, ev.begin_ns);
    const std::string name = d.coll.func != nullptr ? SafeUtf8(d.coll.func, 64) : "Coll";
    coll_latency_[name].Add(static_cast<double>(end - ev.begin_ns) / 1e3);
    return;
  }
  rrProfNetEvent_v1_t n;
  if (!NetDescr(ev, &n) || n.rail < 0) return;
  RailStats& r = rails_[n.rail];
  switch (n.kind) {
    case RR_PROF_NET_EV_IO:
      ++r.io_events;
      ((n.flags & RR_PROF_NET_FLAG_SEND) ? r.bytes_sent : r.bytes_recv) += n.bytes;
      break;
    case RR_PROF_NET_EV_FAILOVER: {
      ++r.failovers;
      r.stall_ns += n.stallNs;
      r.requeued_bytes += n.bytes;
      StallEntry s{Us(n.tsNs != 0 ? n.tsNs : ev.begin_ns),
                   n.stallNs,
                   n.rail,
                   n.toRail,
                   n.peer,
                   SafeUtf8(n.reason, sizeof(n.reason))};
      top_stalls_.push_back(std::move(s));
      std::sort(top_stalls_.begin(), top_stalls_.end(),
                [](const StallEntry& a, const StallEntry& b) { return a.stall_ns > b.stall_ns; });
      if (top_stalls_.size() > kTopStalls) top_stalls_.pop_back();
      break;
    }
    case RR_PROF_NET_EV_MIGRATION:
      ++r.migrations;
      r.migrated_bytes += n.bytes;
      break;
    case RR_PROF_NET_EV_FAILBACK:
      ++r.failbacks;
      break;
    case RR_PROF_NET_EV_RETRANSMIT:
      r.retransmits += n.count != 0 ? n.count : 1;
      r.retransmit_bytes += n.bytes;
      break;
    case RR_PROF_NET_EV_RAIL_STATE:
      r.state = n.state;
      break;
    default:
      break;
  }
}

std::string CommOutput::SummaryJson(const GlobalCounters& g, bool final) const {
  using nlohmann::json;
  json events = json::object();
  for (int i = 0; i < 15; ++i)
    if (events_by_type_[i] != 0) events[TypeName(1u << i)] = events_by_type_[i];
  json rails = json::object();
  for (const auto& [rail, r] : rails_) {
    rails[std::to_string(rail)] = {{"bytes_sent", r.bytes_sent},
                                   {"bytes_recv", r.bytes_recv},
                                   {"io_events", r.io_events},
                                   {"failovers", r.failovers},
                                   {"failbacks", r.failbacks},
                                   {"migrations", r.migrations},
                                   {"migrated_bytes", r.migrated_bytes},
                                   {"retransmits", r.retransmits},
                                   {"retransmit_bytes", r.retransmit_bytes},
                                   {"requeued_bytes", r.requeued_bytes},
                                   {"stall_ns", r.stall_ns},
                                   {"state", RailStateName(r.state)}};
  }
  json colls = json::object();
  for (const auto& [name, h] : coll_latency_) {
    json b = json::array();
    for (size_t i = 0; i <= LatencyHist::kN; ++i)
      b.push_back({{"le_us", i < LatencyHist::kN ? json(LatencyHist::kBoundsUs[i]) : json("+Inf")},
                   {"count", h.buckets[i]}});
    colls[name] = {{"count", h.count},
                   {"mean_us", h.count ? h.sum_us / static_cast<double>(h.count) : 0.0},
                   {"buckets", b}};
  }
  json stalls = json::array();
  for (const auto& s : top_stalls_)
    stalls.push_back({{"ts_us", s.ts_us},
                      {"stall_ns", s.stall_ns},
                      {"rail", s.rail},
                      {"to_rail", s.to_rail},
                      {"peer", s.peer},
                      {"reason", s.reason}});
  json j = {{"format", kSummaryFormat},
            {"final", final},
            {"rank", ctx_->rank},
            {"nRanks", ctx_->n_ranks},
            {"nNodes", ctx_->n_nodes},
            {"comm", Hex(ctx_->comm_id)},
            {"commName", ctx_->comm_name},
            {"trace", trace_path_},
            {"events", events},
            {"trace_events", emitted_},
            {"unfinished", unfinished_},
            {"parent_lost", parent_lost_},
            {"dropped_records", g.dropped_records},
            {"orphan_records", g.orphan_records},
            {"dropped_open", g.dropped_open},
            {"net_opaque", NetOpaqueJson()},
            {"rails", rails},
            {"collectives", colls},
            {"top_stalls", stalls}};
  return DumpJson(j, 1) + "\n";
}

std::string CommOutput::PromText(const GlobalCounters& g) const {
  std::ostringstream o;
  const std::string base = "rank=\"" + std::to_string(ctx_->rank) + "\",comm=\"" + Hex(ctx_->comm_id) + "\"";
  auto head = [&o](const char* name, const char* type, const char* help) {
    o << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n';
  };
  auto per_rail = [&](const char* name, const char* type, const char* help, auto get) {
    head(name, type, help);
    for (const auto& [rail, r] : rails_)
      o << name << '{' << base << ",rail=\"" << rail << "\"} " << get(r) << '\n';
  };
  head("rerail_rail_bytes_total", "counter", "Bytes moved by rerail on a rail (from net IO events).");
  for (const auto& [rail, r] : rails_) {
    o << "rerail_rail_bytes_total{" << base << ",rail=\"" << rail << "\",dir=\"send\"} " << r.bytes_sent
      << '\n';
    o << "rerail_rail_bytes_total{" << base << ",rail=\"" << rail << "\",dir=\"recv\"} " << r.bytes_recv
      << '\n';
  }
  per_rail("rerail_failovers_total", "counter", "Link failures on the rail that moved traffic elsewhere.",
           [](const RailStats& r) { return r.failovers; });
  per_rail("rerail_failbacks_total", "counter", "Times the rail was re-admitted after a successful probe.",
           [](const RailStats& r) { return r.failbacks; });
  per_rail("rerail_migrations_total", "counter", "Chunk migrations away from the rail.",
           [](const RailStats& r) { return r.migrations; });
  per_rail("rerail_retransmits_total", "counter", "Chunks re-sent after a loss on the rail.",
           [](const RailStats& r) { return r.retransmits; });
  per_rail("rerail_retransmit_bytes_total", "counter", "Bytes re-sent after a loss on the rail.",
           [](const RailStats& r) { return r.retransmit_bytes; });
  per_rail("rerail_stall_seconds_total", "counter",
           "Time from last progress to failure detection on the rail.",
           [](const RailStats& r) { return static_cast<double>(r.stall_ns) / 1e9; });
  per_rail("rerail_rail_state", "gauge",
           "Last reported rail state (0 healthy .. 4 permanently failed, -1 unknown).",
           [](const RailStats& r) { return r.state; });
  head("rerail_collective_latency_seconds", "histogram",
       "Collective start to end of its last proxy operation.");
  for (const auto& [name, h] : coll_latency_) {
    uint64_t cum = 0;
    for (size_t i = 0; i <= LatencyHist::kN; ++i) {
      cum += h.buckets[i];
      o << "rerail_collective_latency_seconds_bucket{" << base << ",coll=\"" << PromLabel(name) << "\",le=\"";
      if (i < LatencyHist::kN)
        o << LatencyHist::kBoundsUs[i] / 1e6;
      else
        o << "+Inf";
      o << "\"} " << cum << '\n';
    }
    o << "rerail_collective_latency_seconds_sum{" << base << ",coll=\"" << PromLabel(name) << "\"} " << h.sum_us / 1e6
      << '\n';
    o << "rerail_collective_latency_seconds_count{" << base << ",coll=\"" << PromLabel(name) << "\"} " << h.count
      << '\n';
  }
  head("rerail_profiler_dropped_records_total", "counter",
       "Profiler records dropped because a ring was full.");
  o << "rerail_profiler_dropped_records_total{" << base << "} " << g.dropped_records << '\n';
  head("rerail_profiler_net_opaque_total", "counter",
       "NetPlugin events recorded opaque (not a valid rerail descriptor), by reason.");
  for (int i = 0; i < kNetRejectKinds; ++i)
    o << "rerail_profiler_net_opaque_total{" << base << ",reason=\"" << NetRejectName(static_cast<NetReject>(i))
      << "\"} " << NetRejectCount(static_cast<NetReject>(i)) << '\n';
  return o.str();
}

bool CommOutput::WriteAtomic(const std::string& path, const std::string& text, bool* warned) {
  std::string tmp = path + ".tmp." + std::to_string(getpid());
  FILE* f = std::fopen(tmp.c_str(), "w");
  bool ok = f != nullptr && std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (f != nullptr) ok = (std::fclose(f) == 0) && ok;
  if (ok) ok = std::rename(tmp.c_str(), path.c_str()) == 0;
  if (!ok) {
    int err = errno;
    std::remove(tmp.c_str());
    if (!*warned) RR_WARN_P(kP, "cannot write %s: %s", path.c_str(), std::strerror(err));
    *warned = true;
  }
  return ok;
}

void CommOutput::WriteSnapshots(const GlobalCounters& g, bool final) {
  FlushTrace();
  WriteAtomic(summary_path_, SummaryJson(g, final), &summary_warned_);
  WriteAtomic(prom_path_, PromText(g), &prom_warned_);
  if (final && trace_ != nullptr) {
    std::fclose(trace_);
    trace_ = nullptr;
  }
}

}  // namespace rr::prof
