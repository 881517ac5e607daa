#!/usr/bin/env bash
# rerail set-up: install every Debian package the build and the tests need (idempotent), then build.
# Usage: scripts/setup.sh [--no-build]       Env: BUILD_DIR (default build), CMAKE_ARGS
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"

PKGS=(
  build-essential cmake ninja-build pkg-config git
  libgtest-dev libgmock-dev libbenchmark-dev
  libnl-3-dev libnl-route-3-dev libhwloc-dev libibverbs-dev
  libcli11-dev nlohmann-json3-dev libxxhash-dev
  libssl-dev
  clang libclang-rt-14-dev
  iproute2 iptables procps psmisc elfutils
  iperf3 sockperf
  python3 python3-matplotlib
)

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

[ "${1:-}" = "--no-build" ] && exit 0
BUILD_DIR=${BUILD_DIR:-build}
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  # shellcheck disable=SC2086
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo ${CMAKE_ARGS:-}
fi
cmake --build "$BUILD_DIR" -j "$(nproc)"
