// rerail-top rendering (contract in top_view.h).
#include "top_view.h"

#include <cstdio>
#include <sstream>

namespace rr::top {

using rr::rails::BoardSnapshot;
using rr::rails::RailSnapshot;
using rr::rails::ScanResult;

std::string RateKey(const std::string& path, int rail) { return path + "#" + std::to_string(rail); }

std::map<std::string, RailRate> RateTracker::Update(const ScanResult& scan, uint64_t now_ns) {
  std::map<std::string, RailRate> out;
  std::map<std::string, Prev> next;
  for (const BoardSnapshot& b : scan.boards) {
    for (const RailSnapshot& r : b.rails) {
      std::string key = RateKey(b.path, r.index);
      RailRate rate;
      auto it = prev_.find(key);
      if (it != prev_.end() && now_ns > it->second.t_ns && r.bytes_sent >= it->second.sent &&
          r.bytes_recv >= it->second.recv) {
        double dt = static_cast<double>(now_ns - it->second.t_ns) * 1e-9;
        rate.tx_bps = static_cast<double>(r.bytes_sent - it->second.sent) / dt;
        rate.rx_bps = static_cast<double>(r.bytes_recv - it->second.recv) / dt;
      }
      out[key] = rate;
      next[key] = {r.bytes_sent, r.bytes_recv, now_ns};
    }
  }
  prev_.swap(next);  // boards that went away are forgotten
  return out;
}

std::string HumanBytes(double v) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB", "PB"};
  int u = 0;
  while (v >= 1000.0 && u < 5) {
    v /= 1000.0;
    ++u;
  }
  char buf[32];
  snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

std::string HumanAge(uint64_t ns) {
  double s = static_cast<double>(ns) * 1e-9;
  char buf[32];
  if (s < 60) snprintf(buf, sizeof buf, "%.1fs", s);
  else if (s < 3600) snprintf(buf, sizeof buf, "%dm%02ds", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
  else snprintf(buf, sizeof buf, "%dh%02dm", static_cast<int>(s) / 3600, (static_cast<int>(s) / 60) % 60);
  return buf;
}

namespace {

uint64_t Age(uint64_t now, uint64_t then) { return now > then ? now - then : 0; }

std::string RateText(const std::optional<double>& v) { return v ? HumanBytes(*v) + "/s" : "-"; }

void RenderRail(std::ostringstream& os, const RailSnapshot& r, const RailRate& rate, uint64_t now) {
  char line[512];
  snprintf(line, sizeof line, "  %-4d %-15s %-19s %-8s %-13s %-12s %-10s %-10s %-12s %-12s %6llu %6llu %6llu %6llu%s\n",
           r.index, r.name.c_str(), rr::rails::StateName(r.state), HumanAge(Age(now, r.state_since_ns)).c_str(),
           rr::rails::EventName(r.reason), r.bw_estimate_bps ? (HumanBytes(double(r.bw_estimate_bps)) + "/s").c_str() : "-",
           HumanBytes(double(r.bytes_sent)).c_str(), HumanBytes(double(r.bytes_recv)).c_str(),
           RateText(rate.tx_bps).c_str(), RateText(rate.rx_bps).c_str(),
           static_cast<unsigned long long>(r.retransmit_chunks), static_cast<unsigned long long>(r.failovers),
           static_cast<unsigned long long>(r.failbacks), static_cast<unsigned long long>(r.link_down_events),
           r.torn ? "  (torn)" : "");
  os << line;
}

}  // namespace

std::string RenderText(const ScanResult& scan, const std::map<std::string, RailRate>& rates, const std::string& dir,
                       uint64_t now) {
  std::ostringstream os;
  os << "rerail-top: " << scan.boards.size() << " board(s) in " << dir;
  if (!scan.removed.empty()) os << ", removed " << scan.removed.size() << " stale";
  os << "\n";
  for (const BoardSnapshot& b : scan.boards) {
    os << "\npid " << b.pid << " (" << b.comm << ") " << b.tag << "  netns " << b.netns_inode << "  heartbeat "
       << HumanAge(Age(now, b.heartbeat_ns)) << " ago" << (b.alive ? "" : "  [DEAD: stale board]") << "\n";
    char head[512];
    snprintf(head, sizeof head, "  %-4s %-15s %-19s %-8s %-13s %-12s %-10s %-10s %-12s %-12s %6s %6s %6s %6s\n",
             "rail", "name", "state", "since", "reason", "bw-estimate", "sent", "recv", "tx", "rx", "retx",
             "fo", "fb", "ldown");
    os << head;
    if (b.rails.empty()) os << "  (no rails yet)\n";
    for (const RailSnapshot& r : b.rails) {
      auto it = rates.find(RateKey(b.path, r.index));
      RenderRail(os, r, it == rates.end() ? RailRate{} : it->second, now);
    }
  }
  for (const std::string& e : scan.errors) os << "\nunreadable: " << e << "\n";
  return os.str();
}

nlohmann::json RenderJson(const ScanResult& scan, const std::map<std::string, RailRate>& rates, const std::string& dir,
                          uint64_t now) {
  using nlohmann::json;
  json boards = json::array();
  for (const BoardSnapshot& b : scan.boards) {
    json rails = json::array();
    for (const RailSnapshot& r : b.rails) {
      auto it = rates.find(RateKey(b.path, r.index));
      RailRate rate = it == rates.end() ? RailRate{} : it->second;
      rails.push_back({{"index", r.index},
                       {"name", r.name},
                       {"state", rr::rails::StateName(r.state)},
                       {"reason", rr::rails::EventName(r.reason)},
                       {"state_age_s", static_cast<double>(Age(now, r.state_since_ns)) * 1e-9},
                       {"bw_estimate_Bps", r.bw_estimate_bps},
                       {"bytes_sent", r.bytes_sent},
                       {"bytes_recv", r.bytes_recv},
                       {"tx_Bps", rate.tx_bps ? json(*rate.tx_bps) : json(nullptr)},
                       {"rx_Bps", rate.rx_bps ? json(*rate.rx_bps) : json(nullptr)},
                       {"retransmit_chunks", r.retransmit_chunks},
                       {"retransmit_bytes", r.retransmit_bytes},
                       {"failovers", r.failovers},
                       {"failbacks", r.failbacks},
                       {"link_down_events", r.link_down_events},
                       {"transitions", r.transitions},
                       {"torn", r.torn}});
    }
    boards.push_back({{"path", b.path},
                      {"pid", b.pid},
                      {"comm", b.comm},
                      {"tag", b.tag},
                      {"alive", b.alive},
                      {"netns_inode", b.netns_inode},
                      {"created_unix_ns", b.created_realtime_ns},
                      {"heartbeat_age_s", static_cast<double>(Age(now, b.heartbeat_ns)) * 1e-9},
                      {"rails", rails}});
  }
  return {{"dir", dir},
          {"layout_version", rr::rails::kBoardVersion},
          {"boards", boards},
          {"removed_stale", scan.removed},
          {"errors", scan.errors}};
}

}  // namespace rr::top
