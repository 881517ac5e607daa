// rerail-plan's NCCL_GRAPH_FILE against the graph-file rules NCCL's loader applies (xml.cc, search.cc):
// element nesting graphs > graph > channel > net|gpu, required attributes, typeintra/typeinter from
// NCCL's link-type dictionary, nchannels equal to the <channel> count, dev in 0..9, and, ours: no
// channel uses a dead NIC, each channel starts and ends on the same NIC.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "graph_xml.h"

using namespace rerail;

namespace {

struct Node {
  std::string name;
  std::map<std::string, std::string> attrs;
  std::vector<std::unique_ptr<Node>> subs;
};

// Minimal XML reader for the subset NCCL writes/reads: elements, quoted attributes, no text content.
std::unique_ptr<Node> parse(const std::string& s, size_t& i) {
  auto skip = [&] { while (i < s.size() && isspace(static_cast<unsigned char>(s[i]))) ++i; };
  skip();
  if (i >= s.size() || s[i] != '<' || s[i + 1] == '/') return nullptr;
  auto n = std::make_unique<Node>();
  ++i;
  while (i < s.size() && (isalnum(static_cast<unsigned char>(s[i])))) n->name += s[i++];
  for (;;) {
    skip();
    if (s.compare(i, 2, "/>") == 0) { i += 2; return n; }
    if (s[i] == '>') { ++i; break; }
    std::string k;
    while (i < s.size() && isalnum(static_cast<unsigned char>(s[i]))) k += s[i++];
    if (k.empty() || s[i] != '=' || s[i + 1] != '"') throw std::runtime_error("bad attribute at " + std::to_string(i));
    i += 2;
    size_t e = s.find('"', i);
    n->attrs[k] = s.substr(i, e - i);
    i = e + 1;
  }
  while (auto sub = parse(s, i)) n->subs.push_back(std::move(sub));
  skip();
  std::string close = "</" + n->name + ">";
  if (s.compare(i, close.size(), close) != 0) throw std::runtime_error("missing " + close);
  i += close.size();
  return n;
}

void check_schema(const std::string& xml, const planner::Fabric& f, int node) {
  size_t i = 0;
  auto root = parse(xml, i);
  ASSERT_TRUE(root);
  ASSERT_EQ(root->name, "graphs");
  ASSERT_EQ(root->attrs.at("version"), "1");
  // Link types every NCCL release's kvDictLinkType accepts (newer ones add NVB, PXN, P2C).
  const std::set<std::string> link_types = {"LOC", "NVL", "PIX", "PXB", "PHB", "SYS"};
  std::set<std::string> ids;
  for (auto& g : root->subs) {
    ASSERT_EQ(g->name, "graph");
    for (const char* a : {"id", "pattern", "crossnic", "nchannels", "speedintra", "speedinter", "typeintra",
                          "typeinter", "samechannels"})
      ASSERT_TRUE(g->attrs.count(a)) << "graph lacks required attribute " << a;
    EXPECT_TRUE(ids.insert(g->attrs["id"]).second);
    EXPECT_TRUE(link_types.count(g->attrs["typeintra"]));
    EXPECT_TRUE(link_types.count(g->attrs["typeinter"]));
    int pattern = std::stoi(g->attrs["pattern"]);
    EXPECT_TRUE(pattern >= 1 && pattern <= 5);
    EXPECT_EQ(std::stoul(g->attrs["nchannels"]), g->subs.size());
    for (auto& ch : g->subs) {
      ASSERT_EQ(ch->name, "channel");
      ASSERT_GE(ch->subs.size(), 3u);
      EXPECT_EQ(ch->subs.front()->name, "net");
      EXPECT_EQ(ch->subs.back()->name, "net");
      EXPECT_EQ(ch->subs.front()->attrs.at("dev"), ch->subs.back()->attrs.at("dev"));
      for (auto& d : ch->subs) {
        ASSERT_TRUE(d->name == "net" || d->name == "gpu") << d->name;
        const std::string& dev = d->attrs.at("dev");
        ASSERT_EQ(dev.size(), 1u);
        ASSERT_TRUE(isdigit(static_cast<unsigned char>(dev[0])));
        if (d->name == "net") {
          EXPECT_GT(f.bw_at(node, dev[0] - '0'), 0) << "channel on dead NIC " << dev;
        }
      }
    }
  }
  EXPECT_TRUE(ids.count("0"));
}

}  // namespace

TEST(PlanGraphXml, DegradedNodeSchemaAndNoDeadNic) {
  planner::Fabric f;
  f.nodes = 4;
  f.rails = 8;
  f.bw.assign(32, 100);
  f.uplink_gbps = 100;
  f.bw[1 * 8 + 3] = 0;
  f.bw[1 * 8 + 5] = 0;
  f.bw[2 * 8 + 0] = 0;
  auto p = planner::heuristic_plan(f, 16);
  for (int n = 0; n < 4; ++n) check_schema(plan::graph_xml(f, p, n, 8), f, n);
}

TEST(PlanGraphXml, SchemaCheckCatchesBrokenXml) {
  planner::Fabric f;
  f.nodes = 2;
  f.rails = 2;
  f.bw.assign(4, 100);
  auto p = planner::naive_plan(f, 2);
  std::string x = plan::graph_xml(f, p, 0, 2);
  static std::string bad;
  static planner::Fabric sf;
  bad = x;
  sf = f;
  bad.replace(bad.find(" samechannels=\"0\""), 17, "");
  // A missing required attribute must be reported by the check (the check can fail).
  EXPECT_FATAL_FAILURE(check_schema(bad, sf, 0), "samechannels");
  EXPECT_THROW(plan::graph_xml([] { planner::Fabric g; g.nodes = 1; g.rails = 11; g.bw.assign(11, 1); return g; }(),
                               p, 0, 2), std::invalid_argument);
}

// Live boards: two boards (two nodes), node 1 lost rail 2; the fabric and a plan avoid it.
#include <cstdlib>
#include <unistd.h>

#include "board_input.h"
#include "rerail/rails/board.h"

TEST(PlanBoards, FabricFromLiveBoards) {
  char tmpl[] = "/tmp/rrplan-board-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  std::string dir = tmpl;
  {
    std::unique_ptr<rr::rails::BoardWriter> a, b;
    ASSERT_TRUE(rr::rails::BoardWriter::Create("n0", &a, dir).ok());
    ASSERT_TRUE(rr::rails::BoardWriter::Create("n1", &b, dir).ok());
    for (int r = 0; r < 4; ++r) {
      int i = -1;
      ASSERT_TRUE(a->AddRail("rail" + std::to_string(r), &i).ok());
      ASSERT_TRUE(b->AddRail("rail" + std::to_string(r), &i).ok());
    }
    b->SetState(2, rr::rails::RailState::kFailed, rr::rails::RailEvent::kLinkDown);
    a->SetBandwidth(1, 12500000000ull);  // 100 Gbps estimate
    planner::Fabric f = plan::fabric_from_boards(dir, 400, 100);
    ASSERT_EQ(f.nodes, 2);
    ASSERT_EQ(f.rails, 4);
    EXPECT_DOUBLE_EQ(f.bw_at(0, 0), 400);
    EXPECT_DOUBLE_EQ(f.bw_at(0, 1), 100);
    EXPECT_DOUBLE_EQ(f.bw_at(1, 2), 0);
    auto p = planner::heuristic_plan(f, 8);
    for (int r : p.rail[1]) EXPECT_NE(r, 2);
  }
  std::system(("rm -rf " + dir).c_str());
  EXPECT_THROW(plan::fabric_from_boards("/nonexistent-rrplan", 400, 0), std::runtime_error);
}
