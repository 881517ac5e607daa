#!/usr/bin/env bash
# Copies what scripts/validate-gpu.sh needs from a build into DIR (default .gpu, ignored by git),
# stripped of debug info, with the Debian shared libraries they need that a CUDA image may lack, and
# iproute2's ip, procps' sysctl and iptables for the netns fault runs. For a GPU machine without the build's
# dependencies (such as a lent one that has no package registry). On that machine, from the repo root:
#   export PATH=$PWD/.gpu/bin:$PATH LD_LIBRARY_PATH=$PWD/.gpu/lib:$PWD/.gpu/build/kernels XTABLES_LIBDIR=$PWD/.gpu/xtables
#   ldconfig -p | grep -q "libcrypto.so.3 " && rm -f .gpu/lib/libcrypto.so.3   # prefer the machine's own
#   BUILD_DIR=.gpu/build bash scripts/validate-gpu.sh
# Usage: scripts/bundle-for-gpu.sh [DIR]        Env: BUILD_DIR (build)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
DIR=${1:-.gpu}
case "$DIR" in /*|..*) echo "bundle-for-gpu: DIR must be inside the repo" >&2; exit 2;; esac
mkdir -p .git/info && { grep -qx "/$DIR/" .git/info/exclude 2>/dev/null || echo "/$DIR/" >> .git/info/exclude; }
rm -rf "$DIR"; mkdir -p "$DIR/lib" "$DIR/bin"
files=(net_plugin/libnccl-net-rerail.so profiler_plugin/libnccl-profiler-rerail.so tuner_plugin/libnccl-tuner-rerail.so
       kernels/librerail-kernels.so kernels/rerail-stage-bench kernels/rerail-kernels-gpu-test
       tests/rerail-plugin-gpu-test tests/kernels_emu_test tests/staging_test tests/stager_test tests/stager_gpu_test
       tools/rerail-perf/rerail-perf)
for f in "${files[@]}"; do
  if [[ ! -f "$BUILD_DIR/$f" ]]; then echo "bundle-for-gpu: $BUILD_DIR/$f not built (skipped)"; continue; fi
  mkdir -p "$DIR/build/$(dirname "$f")"; cp "$BUILD_DIR/$f" "$DIR/build/$f"; strip --strip-debug "$DIR/build/$f"
done
libs() { ldd "$1" | awk '/=> \//{print $3}'; }
{ for f in "${files[@]}"; do [[ -f "$BUILD_DIR/$f" ]] && libs "$BUILD_DIR/$f"; done
  # eu-stack (elfutils): validate-gpu.sh dumps a stalled rank's threads with it
  for b in ip sysctl eu-stack; do p=$(command -v "$b" || true); [[ -n "$p" ]] && cp "$p" "$DIR/bin/" && libs "$p"; done
  # iptables (nft backend) for the black-hole fault: the multi-call binary behind a wrapper that names
  # it, and its extensions (XTABLES_LIBDIR=$DIR/xtables)
  p=$(command -v xtables-nft-multi || true)
  if [[ -n "$p" && -d /usr/lib/x86_64-linux-gnu/xtables ]]; then
    cp "$p" "$DIR/bin/" && libs "$p"
    printf '#!/bin/bash\nexec -a iptables "$(dirname "$0")/xtables-nft-multi" "$@"\n' >"$DIR/bin/iptables"
    chmod +x "$DIR/bin/iptables"
    cp -r /usr/lib/x86_64-linux-gnu/xtables "$DIR/xtables"
  fi
} | sort -u | while read -r l; do
  case "$(basename "$l")" in libc.so*|libm.so*|libpthread*|libdl.so*|librt.so*|ld-linux*|libstdc++*|libgcc_s*|libcuda.so*|libz.so*) continue;; esac
  [[ "$l" == "$PWD"/* ]] && continue
  cp -L "$l" "$DIR/lib/"
done
du -sh "$DIR"
