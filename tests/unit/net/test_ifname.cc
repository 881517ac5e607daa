#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "rerail/sock.h"
#include "rerail/sysfs.h"
#include "transports/tcp/tcp.h"

namespace {

using rr::sock::IfFilter;

TEST(IfFilter, PrefixList) {
  IfFilter f("eth,ib");
  EXPECT_TRUE(f.Match("eth0"));
  EXPECT_TRUE(f.Match("ib1"));
  EXPECT_FALSE(f.Match("lo"));
  EXPECT_FALSE(f.Match("en0"));
}

TEST(IfFilter, ExcludeAndExact) {
  IfFilter ex("^docker,lo");
  EXPECT_FALSE(ex.Match("docker0"));
  EXPECT_FALSE(ex.Match("lo"));
  EXPECT_TRUE(ex.Match("eth0"));
  IfFilter exact("=eth0");
  EXPECT_TRUE(exact.Match("eth0"));
  EXPECT_FALSE(exact.Match("eth01"));
  IfFilter exex("^=eth0");
  EXPECT_FALSE(exex.Match("eth0"));
  EXPECT_TRUE(exex.Match("eth01"));
  EXPECT_FALSE(exex.Selects("eth01")) << "matched by exclusion, not named";
  IfFilter port("eth0:1234");
  EXPECT_TRUE(port.Match("eth0"));
  EXPECT_TRUE(IfFilter("").Match("anything"));
}

TEST(Discovery, LoopbackOnlyWhenAskedOrAlone) {
  std::vector<rr::net::DeviceInfo> devs;
  ASSERT_TRUE(rr::net::tcp::DiscoverTcpDevices("lo", &devs).ok());
  ASSERT_EQ(devs.size(), 1u);
  EXPECT_EQ(devs[0].name, "lo");
  EXPECT_TRUE(devs[0].loopback);
  EXPECT_EQ(devs[0].speed_mbps, 10000);
  EXPECT_TRUE(devs[0].pci_path.empty());
  ASSERT_TRUE(rr::net::tcp::DiscoverTcpDevices("", &devs).ok());
  bool has_other = false;
  for (auto& i : rr::sock::ListInterfaces()) has_other |= !i.loopback;
  for (auto& d : devs) EXPECT_EQ(d.loopback, !has_other) << d.name;
  rr::Status st = rr::net::tcp::DiscoverTcpDevices("=nosuchif0", &devs);
  EXPECT_EQ(st.code(), rr::Code::kInvalidUsage);
  EXPECT_NE(st.message().find("nosuchif0"), std::string::npos);
}

TEST(Sysfs, SpeedAndPciPathFromTree) {
  char tmpl[] = "/tmp/rrsysfsXXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  std::string root = tmpl;
  std::string cls = root + "/class/net/", dev = root + "/devices/pci0000:00/0000:00:03.0";
  ASSERT_EQ(system(("mkdir -p " + cls + "eth9 " + cls + "veth1 " + dev).c_str()), 0);
  std::ofstream(cls + "eth9/speed") << "25000\n";
  std::ofstream(cls + "veth1/speed") << "-1\n";
  ASSERT_EQ(symlink(dev.c_str(), (cls + "eth9/device").c_str()), 0);
  EXPECT_EQ(rr::sysfs::NetSpeedMbps("eth9", 10000, root), 25000);
  EXPECT_EQ(rr::sysfs::NetSpeedMbps("veth1", 10000, root), 10000);
  EXPECT_EQ(rr::sysfs::NetSpeedMbps("none", 10000, root), 10000);
  EXPECT_EQ(rr::sysfs::NetPciPath("eth9", root), dev);
  EXPECT_EQ(rr::sysfs::NetPciPath("veth1", root), "");
  EXPECT_EQ(rr::sysfs::NetPciPath("../x", root), "");
  ASSERT_EQ(system(("rm -rf " + root).c_str()), 0);
}

}  // namespace
