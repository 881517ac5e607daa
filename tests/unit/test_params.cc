#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <string>

#include "rerail/log.h"
#include "rerail/params.h"

namespace {

class ParamsTest : public ::testing::Test {
 protected:
  void TearDown() override {
    for (const char* v : {"RERAIL_TCP_STREAMS", "RERAIL_POLICY", "RERAIL_DUMP_PARAMS", "RERAIL_CHUNK_SIZE",
                          "RERAIL_JOB_SECRET", "RERAIL_TCP_STREMS"}) unsetenv(v);
    rr::Params::Reload().ok();
    rr::log::SetCapture(nullptr);
  }
};

TEST_F(ParamsTest, DefaultsAreTyped) {
  ASSERT_TRUE(rr::Params::Reload().ok());
  EXPECT_EQ(rr::Params::Int(rr::ParamId::TcpStreams), 2);
  EXPECT_EQ(rr::Params::Str(rr::ParamId::Policy), "auto");
  EXPECT_FALSE(rr::Params::IsSet(rr::ParamId::TcpStreams));
}

TEST_F(ParamsTest, EnvironmentOverridesWithSuffixesAndCaseFolding) {
  setenv("RERAIL_TCP_STREAMS", "4", 1);
  setenv("RERAIL_POLICY", "FailOver", 1);
  setenv("RERAIL_CHUNK_SIZE", "256K", 1);
  ASSERT_TRUE(rr::Params::Reload().ok());
  EXPECT_EQ(rr::Params::Int(rr::ParamId::TcpStreams), 4);
  EXPECT_EQ(rr::Params::Str(rr::ParamId::Policy), "failover");
  EXPECT_EQ(rr::Params::Int(rr::ParamId::ChunkSize), 256 * 1024);
  EXPECT_TRUE(rr::Params::IsSet(rr::ParamId::TcpStreams));
}

TEST_F(ParamsTest, BadValuesAreClearErrorsAndKeepDefaults) {
  std::vector<std::string> warns;
  rr::log::SetCapture([&](rr::log::Level l, const std::string& m) {
    if (l == rr::log::Level::kWarn) warns.push_back(m);
  });
  setenv("RERAIL_TCP_STREAMS", "lots", 1);
  setenv("RERAIL_POLICY", "random", 1);
  rr::Status st = rr::Params::Reload();
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), rr::Code::kInvalidUsage);
  EXPECT_NE(st.message().find("RERAIL_TCP_STREAMS='lots' is not an integer"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("RERAIL_POLICY='random' is not one of auto|stripe|failover"), std::string::npos);
  EXPECT_EQ(rr::Params::Int(rr::ParamId::TcpStreams), 2);
  ASSERT_EQ(warns.size(), 1u);
}

TEST_F(ParamsTest, OutOfRangeIsRejected) {
  setenv("RERAIL_TCP_STREAMS", "99", 1);
  rr::Status st = rr::Params::Reload();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("out of range 1:16"), std::string::npos) << st.message();
}

TEST_F(ParamsTest, DumpAndMarkdownListEveryParameter) {
  ASSERT_TRUE(rr::Params::Reload().ok());
  auto lines = rr::Params::Dump();
  EXPECT_EQ(lines.size(), rr::Params::Table().size());
  std::string md = rr::Params::Markdown();
  for (const auto& d : rr::Params::Table()) EXPECT_NE(md.find(std::string("RERAIL_") + d.name), std::string::npos);
}

// rerail-info's knob listing: effective value and where it came from, per parameter.
TEST_F(ParamsTest, StateNamesValueAndSource) {
  setenv("RERAIL_TCP_STREAMS", "4", 1);
  setenv("RERAIL_POLICY", "sideways", 1);  // malformed: the default stays in effect
  setenv("RERAIL_JOB_SECRET", "hunter2", 1);
  EXPECT_FALSE(rr::Params::Reload().ok());
  auto state = rr::Params::State();
  ASSERT_EQ(state.size(), rr::Params::Table().size());
  auto find = [&](const char* name) -> const rr::ParamState& {
    for (const auto& p : state)
      if (std::string(p.def->name) == name) return p;
    ADD_FAILURE() << name;
    return state.front();
  };
  EXPECT_EQ(find("TCP_STREAMS").value, "4");
  EXPECT_STREQ(rr::SourceName(find("TCP_STREAMS").source), "env");
  EXPECT_EQ(find("POLICY").value, "auto");
  EXPECT_EQ(find("POLICY").env, "sideways");
  EXPECT_STREQ(rr::SourceName(find("POLICY").source), "env-invalid");
  EXPECT_STREQ(rr::SourceName(find("CHUNK_SIZE").source), "default");
  EXPECT_EQ(find("JOB_SECRET").value, "(hidden)");
  EXPECT_EQ(find("JOB_SECRET").env, "(hidden)");
}

TEST_F(ParamsTest, UnknownInEnvNamesTypos) {
  setenv("RERAIL_TCP_STREMS", "4", 1);
  setenv("RERAIL_TCP_STREAMS", "4", 1);
  auto unknown = rr::Params::UnknownInEnv();
  ASSERT_EQ(std::count(unknown.begin(), unknown.end(), "TCP_STREMS"), 1);
  EXPECT_EQ(std::count(unknown.begin(), unknown.end(), "TCP_STREAMS"), 0);
}

}  // namespace
