// The hardware-free parts of IB discovery (net_plugin/transports/ib/ib_devices.h): RERAIL_IB_HCA in
// NCCL's syntax, the speed/width tables, NCCL's automatic RoCE GID choice, and the sysfs readers over a
// real file tree laid out like the kernel's (symlinked class directory, gids/, gid_attrs/).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "transports/ib/ib_devices.h"

namespace {

namespace fs = std::filesystem;
using rr::ib::AddrFamily;
using rr::ib::GidEntry;
using rr::ib::HcaFilter;

HcaFilter Filter(const std::string& spec) {
  HcaFilter f;
  rr::Status st = HcaFilter::Parse(spec, &f);
  EXPECT_TRUE(st.ok()) << spec << ": " << st.ToString();
  return f;
}

TEST(HcaFilter, PrefixesAndPorts) {
  HcaFilter f = Filter("mlx5_0:1,mlx5_1");
  EXPECT_TRUE(f.Match("mlx5_0", 1));
  EXPECT_FALSE(f.Match("mlx5_0", 2));
  EXPECT_TRUE(f.Match("mlx5_1", 1));
  EXPECT_TRUE(f.Match("mlx5_1", 2));
  EXPECT_TRUE(f.Match("mlx5_10", 1)) << "names are prefixes unless '='";
  EXPECT_FALSE(f.Match("mlx5_2", 1));
  EXPECT_FALSE(f.Match("rxe0", 1));
  EXPECT_TRUE(Filter("").Match("anything", 3));
}

TEST(HcaFilter, ExcludeAndExact) {
  HcaFilter ex = Filter("^mlx5_0:1");
  EXPECT_FALSE(ex.Match("mlx5_0", 1));
  EXPECT_TRUE(ex.Match("mlx5_0", 2));
  EXPECT_TRUE(ex.Match("mlx5_1", 1));
  HcaFilter exact = Filter("=mlx5_1");
  EXPECT_TRUE(exact.Match("mlx5_1", 1));
  EXPECT_FALSE(exact.Match("mlx5_10", 1));
  HcaFilter both = Filter("^=mlx5_1");
  EXPECT_FALSE(both.Match("mlx5_1", 1));
  EXPECT_TRUE(both.Match("mlx5_10", 1));
}

TEST(HcaFilter, MalformedIsAClearError) {
  for (const char* bad : {"mlx5_0:x", "mlx5_0:", ":1", "mlx5_0,,mlx5_1", "mlx5_0,", "^", "^=", "mlx5_0:0", "mlx5_0:1x"}) {
    HcaFilter f;
    rr::Status st = HcaFilter::Parse(bad, &f);
    EXPECT_EQ(st.code(), rr::Code::kInvalidUsage) << bad;
    EXPECT_NE(st.message().find(std::string("RERAIL_IB_HCA='") + bad + "'"), std::string::npos) << st.message();
  }
}

TEST(IbSpeed, NcclTables) {
  // active_speed bits: 1 SDR, 2 DDR, 4 QDR, 8 FDR10, 16 FDR, 32 EDR, 64 HDR, 128 NDR.
  // active_width bits: 1 1x, 2 4x, 4 8x, 8 12x, 16 2x.
  EXPECT_EQ(rr::ib::PortSpeedMbps(1, 1), 2500);
  EXPECT_EQ(rr::ib::PortSpeedMbps(32, 2), 100000);   // EDR 4x: 100 Gb/s
  EXPECT_EQ(rr::ib::PortSpeedMbps(64, 2), 200000);   // HDR 4x
  EXPECT_EQ(rr::ib::PortSpeedMbps(128, 2), 400000);  // NDR 4x
  EXPECT_EQ(rr::ib::PortSpeedMbps(128, 16), 200000); // NDR 2x
  EXPECT_EQ(rr::ib::PortSpeedMbps(16, 8), 168000);   // FDR 12x
  EXPECT_EQ(rr::ib::PortSpeedMbps(8, 2), 40000);     // FDR10 4x
  EXPECT_STREQ(rr::ib::SpeedName(32), "EDR");
  EXPECT_EQ(rr::ib::LaneMbps(32 | 64), 25000) << "lowest set bit wins";
  EXPECT_EQ(rr::ib::LaneMbps(0), 200000) << "no bit: the last entry (NCCL's firstBitSet)";
  EXPECT_EQ(rr::ib::Lanes(0), 2);
  EXPECT_STREQ(rr::ib::LinkLayerName(2), "Ethernet");
  EXPECT_STREQ(rr::ib::LinkLayerName(1), "InfiniBand");
}

GidEntry Entry(int index, int version, const char* addr) {
  GidEntry e;
  e.index = index;
  e.roce_version = version;
  EXPECT_EQ(inet_pton(AF_INET6, addr, e.gid.raw), 1) << addr;
  return e;
}

TEST(IbGid, Classification) {
  EXPECT_TRUE(rr::ib::GidIsIpv4Mapped(Entry(0, 2, "::ffff:10.0.0.1").gid));
  EXPECT_FALSE(rr::ib::GidIsIpv4Mapped(Entry(0, 2, "2001:db8::1").gid));
  EXPECT_FALSE(rr::ib::GidIsValid(Entry(0, 2, "::").gid));
  EXPECT_TRUE(rr::ib::GidIsZero(Entry(0, 2, "::").gid));
  EXPECT_FALSE(rr::ib::GidIsZero(Entry(0, 2, "fe80::1").gid));
  EXPECT_FALSE(rr::ib::GidIsValid(Entry(0, 2, "fe80::").gid));
  EXPECT_FALSE(rr::ib::GidIsValid(Entry(0, 2, "fe80::5054:ff:fe12:3456").gid)) << "link-local";
  EXPECT_TRUE(rr::ib::GidIsValid(Entry(0, 2, "::ffff:10.0.0.1").gid));
  EXPECT_TRUE(rr::ib::GidIsValid(Entry(0, 2, "2001:db8::1").gid));
  EXPECT_EQ(rr::ib::GidToString(Entry(0, 2, "::ffff:10.0.0.1").gid), "::ffff:10.0.0.1");
}

// The table mlx5 and rxe build for a netdev with one IPv4 address: link-local v1/v2, then the
// IPv4-mapped address as v1/v2.
std::vector<GidEntry> TypicalRoce() {
  return {Entry(0, 1, "fe80::5054:ff:fe12:3456"), Entry(1, 2, "fe80::5054:ff:fe12:3456"),
          Entry(2, 1, "::ffff:10.0.0.1"), Entry(3, 2, "::ffff:10.0.0.1")};
}

TEST(IbGid, AutomaticChoiceAsNccl) {
  EXPECT_EQ(rr::ib::ChooseGidIndex(TypicalRoce(), AddrFamily::kIpv4, 2), 3);
  EXPECT_EQ(rr::ib::ChooseGidIndex(TypicalRoce(), AddrFamily::kIpv4, 1), 2);
  // No IPv6 global address: the wanted family is never found, index 0 stays.
  EXPECT_EQ(rr::ib::ChooseGidIndex(TypicalRoce(), AddrFamily::kIpv6, 2), 0);
  auto with6 = TypicalRoce();
  with6.push_back(Entry(4, 1, "2001:db8::1"));
  with6.push_back(Entry(5, 2, "2001:db8::1"));
  EXPECT_EQ(rr::ib::ChooseGidIndex(with6, AddrFamily::kIpv6, 2), 5);
  EXPECT_EQ(rr::ib::ChooseGidIndex(with6, AddrFamily::kIpv4, 2), 3);
  // Only link-local entries: index 0 (NCCL's default), usable within one L2 segment.
  EXPECT_EQ(rr::ib::ChooseGidIndex({Entry(0, 1, "fe80::1:2"), Entry(1, 2, "fe80::1:2")}, AddrFamily::kIpv4, 2), 0);
  // Gaps and an unpopulated index 0 (absent from the table) are fine.
  EXPECT_EQ(rr::ib::ChooseGidIndex({Entry(7, 1, "::ffff:10.1.1.1"), Entry(9, 2, "::ffff:10.1.1.1")}, AddrFamily::kIpv4, 2), 9);
  EXPECT_EQ(rr::ib::ChooseGidIndex({}, AddrFamily::kIpv4, 2), 0);
}

// A sysfs tree in a temp directory shaped like the kernel's: class/infiniband/<dev> is a symlink into
// devices/<pci>/infiniband/<dev>, whose "device" link points back at the PCI function.
class FakeSysfs : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/rerail-ibsysfs-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    fs::path pci = root_ / "devices/pci0000:00/0000:00:05.0";
    fs::path ibdev = pci / "infiniband/mlx5_0";
    fs::create_directories(ibdev / "ports/1/gids");
    fs::create_directories(ibdev / "ports/1/gid_attrs/types");
    fs::create_directories(ibdev / "ports/1/gid_attrs/ndevs");
    fs::create_directories(root_ / "class/infiniband");
    fs::create_symlink("../../devices/pci0000:00/0000:00:05.0/infiniband/mlx5_0", root_ / "class/infiniband/mlx5_0");
    fs::create_symlink("../../../0000:00:05.0", ibdev / "device");
    const char* gids[] = {"fe80:0000:0000:0000:5054:00ff:fe12:3456", "fe80:0000:0000:0000:5054:00ff:fe12:3456",
                          "0000:0000:0000:0000:0000:ffff:0a00:0001", "0000:0000:0000:0000:0000:ffff:0a00:0001",
                          "0000:0000:0000:0000:0000:0000:0000:0000"};
    const char* types[] = {"IB/RoCE v1", "RoCE v2", "IB/RoCE v1", "RoCE v2", nullptr};
    for (int i = 0; i < 5; ++i) {
      Write(ibdev / "ports/1/gids" / std::to_string(i), gids[i]);
      if (types[i]) Write(ibdev / "ports/1/gid_attrs/types" / std::to_string(i), types[i]);
      if (types[i]) Write(ibdev / "ports/1/gid_attrs/ndevs" / std::to_string(i), "ens5f0");
    }
    // A soft device (rxe) has no PCI parent: no "device" link.
    fs::create_directories(root_ / "class/infiniband/rxe0/ports/1/gids");
  }
  void TearDown() override { fs::remove_all(root_); }
  static void Write(const fs::path& p, const std::string& text) { std::ofstream(p) << text << "\n"; }

  fs::path root_;
};

TEST_F(FakeSysfs, GidTableAndChoice) {
  std::string root = root_.string();
  namespace s = rr::ib::ibsysfs;
  EXPECT_EQ(s::RoceVersion(root, "mlx5_0", 1, 0), 1);
  EXPECT_EQ(s::RoceVersion(root, "mlx5_0", 1, 3), 2);
  EXPECT_EQ(s::RoceVersion(root, "mlx5_0", 1, 4), 0) << "unpopulated entry: the kernel's read fails";
  EXPECT_EQ(s::RoceVersion(root, "mlx5_0", 2, 0), 0) << "no such port";
  rr::ib::vx::Gid g{};
  ASSERT_TRUE(s::ReadGid(root, "mlx5_0", 1, 3, &g));
  EXPECT_EQ(rr::ib::GidToString(g), "::ffff:10.0.0.1");
  EXPECT_EQ(s::GidNetdev(root, "mlx5_0", 1, 3), "ens5f0");
  EXPECT_EQ(s::GidNetdev(root, "mlx5_0", 1, 4), "");

  for (int len : {5, 0}) {  // the port's gid_tbl_len, or every file in gids/
    std::vector<GidEntry> t = s::GidTable(root, "mlx5_0", 1, len);
    ASSERT_EQ(t.size(), 4u) << "zero entry dropped, len " << len;
    EXPECT_EQ(t[1].index, 1);
    EXPECT_EQ(t[1].roce_version, 2);
    EXPECT_EQ(rr::ib::ChooseGidIndex(t, AddrFamily::kIpv4, 2), 3);
    EXPECT_EQ(rr::ib::ChooseGidIndex(t, AddrFamily::kIpv4, 1), 2);
  }
  EXPECT_TRUE(s::GidTable(root, "rxe0", 1, 0).empty());
  EXPECT_TRUE(s::GidTable(root, "../mlx5_0", 1, 0).empty()) << "names with '/' are refused";
}

TEST_F(FakeSysfs, PciPathIsTheRealpath) {
  std::string root = root_.string();
  char want[PATH_MAX];
  ASSERT_NE(realpath((root_ / "devices/pci0000:00/0000:00:05.0").c_str(), want), nullptr);
  EXPECT_EQ(rr::ib::ibsysfs::PciPath(root, "mlx5_0"), want);
  EXPECT_EQ(rr::ib::ibsysfs::PciPath(root, "rxe0"), "");
  EXPECT_EQ(rr::ib::ibsysfs::PciPath(root, "nosuch"), "");
}

}  // namespace
