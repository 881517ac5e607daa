// rerail-info's document (tools/rerail-info/info.h): the devices are exactly what getProperties
// returns when the test calls the plugin itself, the init line names version and transports, and every
// RERAIL_* parameter is listed with its source.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <regex>
#include <string>

#include "info.h"
#include "net_loader.h"
#include "rerail/params.h"
#include "rerail/version.h"

namespace {

using nlohmann::json;

class InfoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("RERAIL_TCP_IFNAME", "lo", 1);
    setenv("RERAIL_TCP_STREAMS", "3", 1);
    rr::Params::Reload().ok();
  }
  void TearDown() override {
    unsetenv("RERAIL_TCP_IFNAME");
    unsetenv("RERAIL_TCP_STREAMS");
    rr::Params::Reload().ok();
  }
};

TEST_F(InfoTest, DevicesAreGetPropertiesVerbatim) {
  json doc = rr::info::Collect({RERAIL_NET_SO, RERAIL_TUNER_SO, RERAIL_PROFILER_SO}, true);
  ASSERT_TRUE(rr::info::Ok(doc)) << doc.dump(2);
  EXPECT_EQ(doc["version"], rr::Version());
  const json& net = doc["net"];
  EXPECT_EQ(net["abi"], 12);
  EXPECT_EQ(net["transports"], json::array({"tcp"})) << net.dump(2);
  EXPECT_EQ(net["init"].get<std::string>().rfind(std::string("NET/rerail : rerail ") + rr::Version(), 0), 0u);

  std::string err;
  auto p = rr::netdrv::NetPlugin::Open(RERAIL_NET_SO, &err);
  ASSERT_NE(p, nullptr) << err;
  void* ctx = nullptr;
  ASSERT_EQ(p->Init(&ctx, 0, nullptr, nullptr), rrNcclSuccess);
  int ndev = 0;
  ASSERT_EQ(p->Devices(&ndev), rrNcclSuccess);
  ASSERT_EQ(net["devices"].size(), static_cast<size_t>(ndev));
  for (int d = 0; d < ndev; ++d) {
    rrNcclNetProperties_v12_t want;
    ASSERT_EQ(p->GetProperties(d, &want), rrNcclSuccess);
    const json& got = net["devices"][d];
    EXPECT_EQ(got["name"], want.name);
    EXPECT_EQ(got["pciPath"], want.pciPath ? want.pciPath : "");
    char guid[24];
    snprintf(guid, sizeof(guid), "0x%016llx", static_cast<unsigned long long>(want.guid));
    EXPECT_EQ(got["guid"], guid);
    EXPECT_EQ(got["ptrSupport"], want.ptrSupport);
    EXPECT_EQ(got["speed"], want.speed);
    EXPECT_EQ(got["port"], want.port);
    EXPECT_FLOAT_EQ(got["latency"].get<float>(), want.latency);
    EXPECT_EQ(got["maxComms"], want.maxComms);
    EXPECT_EQ(got["maxRecvs"], want.maxRecvs);
    EXPECT_EQ(got["netDeviceType"], want.netDeviceType);
    EXPECT_EQ(got["netDeviceVersion"], want.netDeviceVersion);
    EXPECT_EQ(got["maxP2pBytes"], want.maxP2pBytes);
    EXPECT_EQ(got["maxCollBytes"], want.maxCollBytes);
    EXPECT_EQ(got["maxMultiRequestSize"], want.maxMultiRequestSize);
    EXPECT_EQ(got["railId"], want.railId);
    EXPECT_EQ(got["planeId"], want.planeId);
    EXPECT_EQ(got["vProps"]["ndevs"], want.vProps.ndevs);
  }
  EXPECT_EQ(p->Finalize(ctx), rrNcclSuccess);
  EXPECT_EQ(net["devices"][0]["name"], "lo");

  EXPECT_EQ(doc["tuner"]["exports"], json::array({"ncclTunerPlugin_v5", "ncclTunerPlugin_v6"})) << doc["tuner"].dump();
  EXPECT_EQ(doc["profiler"]["exports"], json::array({"ncclProfiler_v5", "ncclProfiler_v6"})) << doc["profiler"].dump();
}

TEST_F(InfoTest, ParamsCarryValueAndSource) {
  json doc = rr::info::Collect({"", "", ""}, false);
  EXPECT_FALSE(doc.contains("net"));
  ASSERT_EQ(doc["params"].size(), rr::Params::Table().size());
  int seen = 0;
  for (const json& p : doc["params"]) {
    if (p["name"] == "RERAIL_TCP_STREAMS") {
      EXPECT_EQ(p["value"], "3");
      EXPECT_EQ(p["source"], "env");
      ++seen;
    }
    if (p["name"] == "RERAIL_CHUNK_SIZE") {
      EXPECT_EQ(p["source"], "default");
      ++seen;
    }
  }
  EXPECT_EQ(seen, 2);
  std::string text = rr::info::Text(doc, true);
  EXPECT_NE(text.find("RERAIL_TCP_STREAMS"), std::string::npos) << text;
  EXPECT_TRUE(std::regex_search(text, std::regex("\n  RERAIL_TCP_STREAMS += 3 sockets  \\[env\\]\n"))) << text;
}

TEST(InfoNames, PtrSupportAndDeviceType) {
  EXPECT_EQ(rr::info::PtrSupportNames(RR_NCCL_PTR_HOST), "HOST");
  EXPECT_EQ(rr::info::PtrSupportNames(RR_NCCL_PTR_HOST | RR_NCCL_PTR_CUDA | RR_NCCL_PTR_DMABUF), "HOST|CUDA|DMABUF");
  EXPECT_EQ(rr::info::PtrSupportNames(0), "none");
  EXPECT_EQ(rr::info::PtrSupportNames(0x10 | RR_NCCL_PTR_HOST), "HOST|16");
  EXPECT_EQ(rr::info::DeviceTypeName(RR_NCCL_NET_DEVICE_UNPACK), "UNPACK");
  EXPECT_EQ(rr::info::DeviceTypeName(7), "7");
}

}  // namespace
