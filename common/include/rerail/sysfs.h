// rerail — sysfs facts about network interfaces (Linux /sys/class/net).
//
// Contract: pure reads of sysfs, no caching, never blocking on anything but the file system.
// Missing files (virtual interfaces, containers) are normal and reported as "unknown", not errors.
// Thread-safe (no shared state). `root` defaults to "/sys" and exists so tests can point at a fake tree.
#pragma once

#include <string>

namespace rr::sysfs {

// realpath of <root>/class/net/<ifname>/device, e.g. "/sys/devices/pci0000:00/0000:00:03.0/virtio0";
// empty when the interface has no device link (loopback, veth, bridges).
std::string NetPciPath(const std::string& ifname, const std::string& root = "/sys");

// Link speed in Mbps from <root>/class/net/<ifname>/speed; `fallback` when unreadable or <= 0.
int NetSpeedMbps(const std::string& ifname, int fallback, const std::string& root = "/sys");

}  // namespace rr::sysfs
