#!/usr/bin/env bash
# `cmake --install` into a scratch prefix, then the installed rerail-info and rerail-perf run with the
# build and source trees hidden: as root in a private mount namespace with an empty tmpfs over both
# trees (so a stray build-tree path would fail to open), else with only the checks below. Fails when an
# expected file is missing, a binary or library resolves anything into the build tree (ldd), carries a
# build-tree RUNPATH (readelf), or a tool loads a plugin from outside the prefix.
# Usage: install_check.sh BUILD_DIR SOURCE_DIR SYMLINK(ON|OFF: RERAIL_INSTALL_NCCL_NET_SYMLINK)
set -euo pipefail
build=$(cd "$1" && pwd) src=$(cd "$2" && pwd) symlink=${3:-OFF}
fail() { echo "FAIL: $*" >&2; exit 1; }
tmp=$(mktemp -d /tmp/rerail-install.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix

cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" 2>&1 || { cat "$tmp/install.log"; fail "cmake --install"; }

# Every artifact a user needs (the CUDA kernels only where the build made them).
want=(bin/rerail-perf bin/rerail-info bin/rerail-top bin/rerail-sim bin/rerail-plan bin/rerail-bootstrap
      lib/libnccl-net-rerail.so lib/libnccl-tuner-rerail.so lib/libnccl-profiler-rerail.so
      lib/librerail-bootstrap.so lib/librerail-bootstrap.so.0 include/rerail/bootstrap.h
      lib/pkgconfig/rerail-bootstrap.pc share/rerail/scripts/netns-rails.sh
      share/rerail/scripts/run-nccl-tests.sh share/rerail/scripts/plot.py share/rerail/scripts/timeline_io.py
      share/doc/rerail/README.md share/doc/rerail/docs/architecture.md share/doc/rerail/docs/troubleshooting.md)
[ -e "$build/kernels/librerail-kernels.so" ] && want+=(lib/librerail-kernels.so)
for f in "${want[@]}"; do [ -e "$prefix/$f" ] || fail "missing $f in the installed tree"; done
case $symlink in
  ON|on|1|TRUE|true) [ "$(readlink "$prefix/lib/libnccl-net.so")" = libnccl-net-rerail.so ] ||
                     fail "RERAIL_INSTALL_NCCL_NET_SYMLINK is ON but lib/libnccl-net.so is not a link to libnccl-net-rerail.so" ;;
  *) [ ! -e "$prefix/lib/libnccl-net.so" ] || fail "libnccl-net.so installed although RERAIL_INSTALL_NCCL_NET_SYMLINK is OFF" ;;
esac
[ ! -e "$prefix/etc" ] && ! grep -q 'ld.so.conf.d' "$tmp/install.log" || fail "a plain install wrote the ld.so.conf.d entry"
echo "installed $(find "$prefix" -type f -o -type l | wc -l) files"

# Nothing resolves into the build tree; tools carry RUNPATH $ORIGIN/../lib and nothing else.
for f in "$prefix"/bin/* "$prefix"/lib/*.so; do
  deps=$(env -i LD_LIBRARY_PATH="$prefix/lib" ldd "$f" 2>&1) || true
  grep -q 'not found' <<<"$deps" && fail "$f: unresolved: $(grep 'not found' <<<"$deps")"
  grep -qF "$build" <<<"$deps" && fail "$f resolves into the build tree: $deps"
  dyn=$(readelf -d "$f")
  grep -E 'RPATH|RUNPATH' <<<"$dyn" | grep -qF "$build" && fail "$f has a build-tree RUNPATH"
  grep -E 'RPATH|RUNPATH' <<<"$dyn" | grep -qF "$src" && fail "$f has a source-tree RUNPATH"
done
for t in "$prefix"/bin/*; do
  readelf -d "$t" | grep -q 'RUNPATH.*\[\$ORIGIN/../lib\]' || fail "$t: RUNPATH is not \$ORIGIN/../lib: $(readelf -d "$t" | grep PATH)"
done

# The pkg-config file builds and links a program against the installed C API.
cat >"$tmp/use_boot.c" <<'C'
#include <rerail/bootstrap.h>
#include <stdio.h>
int main(void) {
  rerailJob* job = NULL;
  if (rerailJobCreate("127.0.0.1,127.0.0.2", 2, 29000, 64, "pkgcheck", &job) != 0) return 1;
  printf("ranks %d\n", rerailJobNumRanks(job));
  rerailJobDestroy(job);
  return 0;
}
C
flags=$(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs rerail-bootstrap) || fail "pkg-config"
grep -qF "$prefix" <<<"$flags" || fail "pkg-config flags do not point into the prefix: $flags"
# RERAIL_SANITIZE (set by ctest in a sanitizer build): the installed libraries need the runtime linked in.
san=${RERAIL_SANITIZE:+-fsanitize=$RERAIL_SANITIZE}
cc $san -o "$tmp/use_boot" "$tmp/use_boot.c" $flags || fail "compiling against the installed header and .pc"
[ "$(LD_LIBRARY_PATH="$prefix/lib" "$tmp/use_boot")" = "ranks 4" ] || fail "program linked through the .pc"

# The installed tools, with the build and source trees out of sight.
cat >"$tmp/run.sh" <<EOF2
set -euo pipefail
cd /
export PATH=/usr/bin:/bin LD_LIBRARY_PATH="$prefix/lib" RERAIL_TCP_IFNAME=lo
"$prefix/bin/rerail-info" --json >"$tmp/info.json"
"$prefix/bin/rerail-info" >"$tmp/info.txt"
timeout 100 "$prefix/bin/rerail-perf" all_reduce,sendrecv -N 2 -b 8 -e 1M -f 16 -n 2 -w 1 -c 1 --timeout 90 >"$tmp/perf.txt"
EOF2
hidden=no
if [ "$(id -u)" = 0 ] && command -v unshare >/dev/null; then
  unshare --mount --propagation private bash -c "mount -t tmpfs rerail-hide '$build' && mount -t tmpfs rerail-hide '$src' && \
    [ ! -e '$build/CMakeCache.txt' ] && [ ! -e '$src/CMakeLists.txt' ] && bash '$tmp/run.sh'" || { cat "$tmp/perf.txt" 2>/dev/null; fail "installed tools (build tree hidden)"; }
  hidden=yes
else
  echo "not root: running the installed tools without hiding the build tree (ldd/readelf checks above still apply)"
  bash "$tmp/run.sh" || fail "installed tools"
fi
cat "$tmp/info.txt" "$tmp/perf.txt"
python3 - "$tmp/info.json" "$tmp/perf.txt" "$prefix" <<'PY'
import json, sys
info, perf, prefix = json.load(open(sys.argv[1])), open(sys.argv[2]).read().splitlines(), sys.argv[3]
for part in ("net", "tuner", "profiler"):
    p = info[part]
    assert "error" not in p, (part, p)
    assert p["path"].startswith(prefix + "/lib/"), ("%s plugin loaded from outside the prefix" % part, p["path"])
assert info["net"]["devices"] and info["net"]["devices"][0]["name"] == "lo", info["net"]
assert info["net"]["init"].startswith("NET/rerail : rerail " + info["version"] + " ABI v"), info["net"]["init"]
pl = [l for l in perf if l.startswith("#") and " from " in l and "plugin" in l]
assert pl and (" from " + prefix + "/lib/libnccl-net-rerail.so") in pl[0], ("rerail-perf plugin", pl)
oob = [l for l in perf if l.startswith("# Out of bounds values")]
assert len(oob) == 2 and all(l.endswith(": 0 OK") for l in oob), oob
print("installed rerail-info: %d device(s), version %s; rerail-perf: %s" % (len(info["net"]["devices"]), info["version"], oob))
PY
echo "PASS: install tree complete, build tree hidden=$hidden"
