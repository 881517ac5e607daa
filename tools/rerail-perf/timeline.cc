#include "timeline.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace rr::perf {

Timeline::Timeline(uint64_t t0_ns, std::vector<std::string> dev_names, uint64_t bin_ns)
    : t0_ns_(t0_ns), bin_ns_(bin_ns ? bin_ns : kBinNs), devs_(std::move(dev_names)) {
  for (const std::string& d : devs_) Index(d);
}

size_t Timeline::Index(const std::string& rail) {
  for (size_t i = 0; i < names_.size(); ++i)
    if (names_[i] == rail) return i;
  names_.push_back(rail);
  bytes_.emplace_back();
  return names_.size() - 1;
}

void Timeline::Add(int dev, size_t bytes, uint64_t now_ns) {
  if (now_ns >= t0_ns_) {
    size_t bin = static_cast<size_t>((now_ns - t0_ns_) / bin_ns_);
    if (completed_.size() <= bin) completed_.resize(bin + 1, 0);
    completed_[bin] += bytes;
  }
  if (dev < 0 || static_cast<size_t>(dev) >= devs_.size()) return;
  AddNamed(devs_[static_cast<size_t>(dev)], bytes, now_ns);
}

void Timeline::AddNamed(const std::string& rail, uint64_t bytes, uint64_t now_ns) {
  if (now_ns < t0_ns_) return;
  size_t bin = static_cast<size_t>((now_ns - t0_ns_) / bin_ns_);
  auto& v = bytes_[Index(rail)];
  if (v.size() <= bin) v.resize(bin + 1, 0);
  v[bin] += bytes;
}

std::string Timeline::Serialize() const {
  nlohmann::json j;
  j["rails"] = names_;
  j["bytes"] = bytes_;
  j["completed"] = completed_;
  j["bin_ns"] = bin_ns_;
  j["meta"] = meta_;
  nlohmann::json ev = nlohmann::json::array();
  for (const auto& e : events_) ev.push_back({{"t_s", e.t_s}, {"kind", e.kind}, {"text", e.text}});
  j["events"] = ev;
  return j.dump();
}

Status Timeline::Merge(const std::string& blob) {
  nlohmann::json j = nlohmann::json::parse(blob, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.contains("bytes")) return Status::Internal("timeline: malformed blob from a rank");
  auto other = j["bytes"].get<std::vector<std::vector<uint64_t>>>();
  auto names = j["rails"].get<std::vector<std::string>>();
  if (names.size() != other.size()) return Status::Internal("timeline: rails and counts disagree");
  if (j.value("bin_ns", kBinNs) != bin_ns_)
    return Status::Internal("timeline: a rank counted in bins of " + std::to_string(j.value("bin_ns", kBinNs)) +
                            " ns, this one in " + std::to_string(bin_ns_) + " ns");
  auto done = j.value("completed", std::vector<uint64_t>{});
  if (completed_.size() < done.size()) completed_.resize(done.size(), 0);
  for (size_t b = 0; b < done.size(); ++b) completed_[b] += done[b];
  for (size_t d = 0; d < other.size(); ++d) {
    auto& mine = bytes_[Index(names[d])];
    if (mine.size() < other[d].size()) mine.resize(other[d].size(), 0);
    for (size_t b = 0; b < other[d].size(); ++b) mine[b] += other[d][b];
  }
  for (const auto& kv : j["meta"].items()) meta_[kv.key()] += kv.value().get<uint64_t>();
  for (const auto& e : j["events"]) events_.push_back({e["t_s"].get<double>(), e["kind"], e["text"]});
  return Status::Ok();
}

namespace {
size_t NumBins(const std::vector<std::vector<uint64_t>>& b) {
  size_t n = 0;
  for (const auto& v : b) n = std::max(n, v.size());
  return n;
}
uint64_t BinTotal(const std::vector<std::vector<uint64_t>>& b, size_t bin) {
  uint64_t s = 0;
  for (const auto& v : b) s += bin < v.size() ? v[bin] : 0;
  return s;
}
}  // namespace

uint64_t Timeline::CompletedBytes() const {
  uint64_t s = 0;
  for (uint64_t v : completed_) s += v;
  return s;
}

double Timeline::GBps(double from_s, double to_s) const {
  const double bin_s = bin_ns_ * 1e-9;
  size_t lo = static_cast<size_t>(std::max(0.0, from_s) / bin_s), hi = static_cast<size_t>(std::max(0.0, to_s) / bin_s);
  hi = std::min(hi, NumBins(bytes_));
  if (hi <= lo) return 0;
  uint64_t s = 0;
  for (size_t b = lo; b < hi; ++b) s += BinTotal(bytes_, b);
  return static_cast<double>(s) / ((hi - lo) * bin_s) / 1e9;
}

double Timeline::LongestStallS() const {
  size_t n = NumBins(bytes_), first = n, last = 0, run = 0, best = 0;
  for (size_t b = 0; b < n; ++b)
    if (BinTotal(bytes_, b) > 0) first = std::min(first, b), last = b;
  for (size_t b = first; b <= last && b < n; ++b) {
    run = BinTotal(bytes_, b) == 0 ? run + 1 : 0;
    best = std::max(best, run);
  }
  return best * (bin_ns_ * 1e-9);
}

Status Timeline::Write(const std::string& path) const {
  // Columns in name order (rail0, rail1, ...), whatever order the ranks saw them in.
  std::vector<size_t> order(names_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [this](size_t a, size_t b) { return names_[a] < names_[b]; });
  std::vector<std::string> rails;
  for (size_t i : order) rails.push_back(names_[i]);
  const double bin_s = bin_ns_ * 1e-9;
  const size_t nbins = std::max(NumBins(bytes_), completed_.size());
  std::vector<TimelineEvent> ev = events_;
  std::stable_sort(ev.begin(), ev.end(), [](const auto& a, const auto& b) { return a.t_s < b.t_s; });
  std::ofstream f(path);
  if (!f) return Status::InvalidUsage("--timeline: cannot write '" + path + "'");
  auto gbps = [&](size_t d, size_t b) {
    return b < bytes_[d].size() ? static_cast<double>(bytes_[d][b]) / bin_s / 1e9 : 0.0;
  };
  if (path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0) {
    nlohmann::json j;
    j["bin_s"] = bin_s;
    j["rails"] = rails;
    j["t_s"] = nlohmann::json::array();
    j["gbps"] = nlohmann::json::array();
    j["completed_gbps"] = nlohmann::json::array();
    for (size_t b = 0; b < nbins; ++b) {
      j["t_s"].push_back(b * bin_s);
      std::vector<double> row;
      for (size_t d : order) row.push_back(gbps(d, b));
      j["gbps"].push_back(row);
      j["completed_gbps"].push_back(b < completed_.size() ? completed_[b] / bin_s / 1e9 : 0.0);
    }
    j["events"] = nlohmann::json::array();
    for (const auto& e : ev) j["events"].push_back({{"t_s", e.t_s}, {"kind", e.kind}, {"text", e.text}});
    j["meta"] = meta_;
    f << j.dump(1) << "\n";
  } else {
    f << "t_s";
    for (const auto& r : rails) f << "," << r;
    f << ",total\n";
    for (size_t b = 0; b < nbins; ++b) {
      f << b * bin_s;
      double tot = 0;
      for (size_t d : order) f << "," << gbps(d, b), tot += gbps(d, b);
      f << "," << tot << "\n";
    }
    for (const auto& e : ev) {
      std::string text = e.text;
      std::replace(text.begin(), text.end(), ',', ';');
      std::replace(text.begin(), text.end(), '\n', ' ');
      f << "# event," << e.t_s << "," << e.kind << "," << text << "\n";
    }
    for (const auto& kv : meta_) f << "# meta," << kv.first << "," << kv.second << "\n";
  }
  return f.good() ? Status::Ok() : Status::System("--timeline: write '" + path + "'");
}

std::vector<TimelineEvent> ReadFaultEvents(const std::string& path) {
  std::vector<TimelineEvent> out;
  std::ifstream f(path);
  std::string line;
  while (std::getline(f, line)) {
    size_t tab = line.find('\t');
    if (tab == std::string::npos) continue;
    out.push_back({std::atof(line.substr(0, tab).c_str()), "fault", line.substr(tab + 1)});
  }
  return out;
}

}  // namespace rr::perf
