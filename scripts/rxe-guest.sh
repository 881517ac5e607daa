#!/usr/bin/env bash
# rxe-guest.sh — run a command against the real kernel verbs stack (Soft-RoCE, rdma_rxe) inside a
# throw-away QEMU guest, on hosts whose own kernel has no RDMA subsystem (../shared/reference/verbs.md).
#
#   scripts/rxe-guest.sh [options] [--] COMMAND [ARGS...]
#     --with PATH      also copy PATH (file, at the same absolute path) and, for ELF files, its ldd
#                      closure into the guest; repeatable. Binaries built here find their plugins by
#                      the build paths compiled in, so copy those too (--with build/.../libX.so).
#     --rails N        N veth pairs vethK/vethKp (10.10.K.1/24 and .2) with rxeK on vethK (default 1)
#     --timeout S      wall-clock bound of the whole guest run, boot included (default 300)
#     --mem MB         guest memory (default 1024)
#     --cache DIR      where the kernel package and its extraction are kept
#                      (default: build/rxe-cache; never committed)
#     --keep           keep the work directory (initramfs tree) and print its path
#   Prints the guest command's output between "== guest output ==" lines, then the boot+run time, and
#   exits with the guest command's exit code. Exit 77: cannot run here (no qemu-system-x86_64, no static
#   busybox, no kernel package and no way to download it) — tests treat that as a skip.
#   124: the guest did not finish within --timeout (it is killed; it never outlives this script).
#
# What it does: `apt-get download` Debian's kernel package for the installed repositories'
# linux-image-amd64 (6.1 on bookworm; CONFIG_RDMA_RXE=m) into the cache, extracts vmlinuz and the
# modules rxe needs (resolved from each module's .modinfo "depends"), builds an initramfs (static
# busybox, ip, rdma, ibverbs-utils, libibverbs with the rxe provider, the --with files, and every
# library they need), and boots it with `qemu-system-x86_64 -accel tcg -nographic` (KVM is not used:
# /dev/kvm opens here but KVM fails or hangs). In the guest: insmod the module chain, create the veth
# pairs and `rdma link add rxeK type rxe netdev vethK`, run COMMAND with bash -c, power off.
# QEMU runs under `nice` and `timeout`.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
rails=1 timeout_s=300 mem=1024 cache="$here/build/rxe-cache" keep=0
withs=()
while [ $# -gt 0 ]; do
  case "$1" in
    --with) withs+=("$2"); shift 2 ;;
    --rails) rails=$2; shift 2 ;;
    --timeout) timeout_s=$2; shift 2 ;;
    --mem) mem=$2; shift 2 ;;
    --cache) cache=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    --) shift; break ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "rxe-guest: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || { echo "rxe-guest: no command (see --help)" >&2; exit 2; }
case "$rails" in [0-8]) ;; *) echo "rxe-guest: --rails takes 0..8" >&2; exit 2 ;; esac
skip() { echo "rxe-guest: skip: $*" >&2; exit 77; }
log() { echo "rxe-guest: $*" >&2; }

qemu=$(command -v qemu-system-x86_64 || true)
[ -n "$qemu" ] || skip "qemu-system-x86_64 not installed (apt-get install qemu-system-x86)"
busybox=""
for b in /bin/busybox /usr/bin/busybox; do
  if [ -x "$b" ] && file -L "$b" 2>/dev/null | grep -q 'statically linked'; then busybox=$b; break; fi
done
[ -n "$busybox" ] || skip "no static busybox (apt-get install busybox-static)"
for t in ip rdma ibv_devinfo; do command -v "$t" >/dev/null || skip "$t not installed (iproute2, ibverbs-utils)"; done
provider=$(ls /usr/lib/*/libibverbs/librxe-rdmav*.so 2>/dev/null | head -n 1 || true)
[ -n "$provider" ] && [ -f /etc/libibverbs.d/rxe.driver ] || skip "no rxe provider (apt-get install ibverbs-providers)"

# ---- kernel package (cached) ----------------------------------------------------------------------
mkdir -p "$cache"
kpkg=$(apt-cache depends linux-image-amd64 2>/dev/null | sed -n 's/^ *Depends: \(linux-image-[0-9].*-amd64\)$/\1/p' | head -n 1 || true)
if [ -n "$kpkg" ]; then
  deb=$(ls "$cache"/"${kpkg}"_*.deb 2>/dev/null | head -n 1 || true)
  if [ -z "$deb" ]; then
    log "downloading $kpkg into $cache"
    (cd "$cache" && timeout 300 apt-get download "$kpkg" >/dev/null 2>&1) || true
    deb=$(ls "$cache"/"${kpkg}"_*.deb 2>/dev/null | head -n 1 || true)
  fi
else  # no apt metadata: use whatever kernel package the cache holds
  deb=$(ls "$cache"/linux-image-*-amd64_*.deb 2>/dev/null | sort -V | tail -n 1 || true)
fi
[ -n "$deb" ] || skip "no Debian kernel package in $cache and apt-get download failed"
kdir="$cache/$(basename "$deb" .deb)"
if [ ! -f "$kdir/.done" ]; then
  rm -rf "$kdir" && mkdir -p "$kdir" && dpkg-deb -x "$deb" "$kdir" && touch "$kdir/.done"
fi
vmlinuz=$(ls "$kdir"/boot/vmlinuz-* | head -n 1)
kver=${vmlinuz##*/vmlinuz-}
moddir="$kdir/lib/modules/$kver"

# Module load order: each module after what its .modinfo "depends" names (crc32_generic: rxe's crc32
# comes from the crypto API, a soft dependency).
declare -A modpath=()
while IFS= read -r f; do n=${f##*/}; n=${n%%.ko*}; modpath[$n]=$f; done < <(find "$moddir" -name '*.ko*')
order=()
declare -A seen=()
add_mod() {
  local m=$1 d
  [ -n "${seen[$m]:-}" ] && return 0
  seen[$m]=1
  [ -n "${modpath[$m]:-}" ] || { log "module $m not in $kver (built in?)"; return 0; }
  for d in $(objcopy -O binary --only-section=.modinfo "${modpath[$m]}" /dev/stdout 2>/dev/null | tr '\0' '\n' |
             sed -n 's/^depends=//p' | tr ',' ' '); do add_mod "$d"; done
  order+=("$m")
}
for m in crc32_generic veth rdma_rxe; do add_mod "$m"; done

# ---- initramfs --------------------------------------------------------------------------------------
work=$(mktemp -d "${TMPDIR:-/tmp}/rxe-guest.XXXXXX")
qpid=""
cleanup() {
  [ -n "$qpid" ] && kill -9 "$qpid" 2>/dev/null || true
  if [ "$keep" = 1 ]; then log "kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
root="$work/root"
mkdir -p "$root"/{usr/bin,usr/sbin,usr/lib,usr/lib64,proc,sys,dev,tmp,run,etc/libibverbs.d,modules}
for l in bin sbin lib lib64; do ln -s "usr/$l" "$root/$l"; done   # merged /usr, as on the host

copy_one() {  # copy a file to the same absolute path in the guest (following links)
  local src=$1
  [ -e "$root$src" ] && return 0
  mkdir -p "$root$(dirname "$src")"
  cp -L "$src" "$root$src"
}
copy_elf() {  # a file plus, if it is a dynamic ELF object, its shared-library closure
  local f=$1 lib
  copy_one "$f"
  if file -L "$f" | grep -q 'dynamically linked'; then
    for lib in $(ldd "$f" 2>/dev/null | awk '/=> \// {print $3} /^[[:space:]]*\/[^ ]*ld-linux/ {print $1}'); do
      copy_one "$lib"
    done
  fi
}
cp "$busybox" "$root/usr/bin/busybox"
for t in bash ip rdma ibv_devinfo ibv_devices ibv_rc_pingpong; do
  p=$(command -v "$t" || true)
  [ -n "$p" ] && copy_elf "$(readlink -f "$p")" && { [ "$p" = "$(readlink -f "$p")" ] || { mkdir -p "$root$(dirname "$p")"; ln -sf "$(readlink -f "$p")" "$root$p" 2>/dev/null || true; }; }
done
copy_elf "$provider"
cp /etc/libibverbs.d/rxe.driver "$root/etc/libibverbs.d/"
for w in ${withs[@]+"${withs[@]}"}; do
  w=$(readlink -f "$w")
  [ -e "$w" ] || { echo "rxe-guest: --with $w: no such file" >&2; exit 2; }
  copy_elf "$w"
done
for m in "${order[@]}"; do
  case "${modpath[$m]}" in
    *.ko.xz) xz -dc "${modpath[$m]}" > "$root/modules/$m.ko" ;;
    *.ko.zst) zstd -qdc "${modpath[$m]}" > "$root/modules/$m.ko" ;;
    *) cp "${modpath[$m]}" "$root/modules/$m.ko" ;;
  esac
done
printf '%s\n' "${order[@]}" > "$root/modules/order"
printf '%s\n' "$*" > "$root/cmd"
echo "$rails" > "$root/rails"

cat > "$root/init" <<'EOF'
#!/bin/busybox sh
/bin/busybox --install -s /bin 2>/dev/null
export PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev; mount -t tmpfs tmp /tmp
mkdir -p /root
fail() { echo "RXE-GUEST: setup failed: $*"; echo "RXE-GUEST-RC=125"; poweroff -f; }
for m in $(cat /modules/order); do insmod /modules/$m.ko || fail "insmod $m"; done
# Debian's static busybox runs its own applets before PATH (FEATURE_SH_STANDALONE): iproute2 is called
# by path here, and the command runs under bash.
IP=/usr/bin/ip RDMA=/usr/bin/rdma
$IP link set lo up
k=0
while [ $k -lt $(cat /rails) ]; do
  $IP link add veth$k type veth peer name veth${k}p || fail "veth$k"
  $IP addr add 10.10.$k.1/24 dev veth$k && $IP addr add 10.10.$k.2/24 dev veth${k}p || fail "addr veth$k"
  $IP link set veth$k up && $IP link set veth${k}p up || fail "up veth$k"
  $RDMA link add rxe$k type rxe netdev veth$k || fail "rdma link add rxe$k"
  k=$((k + 1))
done
echo "RXE-GUEST: ready ($(uname -r), $(cat /rails) rxe device(s))"
echo "== guest output =="
/usr/bin/bash -c "$(cat /cmd)" 2>&1
rc=$?
echo "== guest output =="
echo "RXE-GUEST-RC=$rc"
poweroff -f
EOF
chmod +x "$root/init"
(cd "$root" && find . | "$busybox" cpio -o -H newc 2>/dev/null | gzip -1) > "$work/initrd.gz"   # busybox: no cpio package needed
log "kernel $kver, modules: ${order[*]}, initramfs $(du -h "$work/initrd.gz" | cut -f1)"

# ---- boot -------------------------------------------------------------------------------------------
t0=$(date +%s.%N)
console="$work/console.log"
set +e
timeout --kill-after=5 "$timeout_s" nice -n 10 "$qemu" -accel tcg -m "$mem" -smp 1 -nographic -no-reboot \
  -kernel "$vmlinuz" -initrd "$work/initrd.gz" -nic none \
  -append "console=ttyS0 quiet loglevel=3 panic=-1 rdinit=/init" </dev/null >"$console" 2>&1 &
qpid=$!
wait "$qpid"
qrc=$?
qpid=""
set -e
t1=$(date +%s.%N)
secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", b - a}')
tr -d '\r' <"$console" | sed -n '/^RXE-GUEST: /p'
tr -d '\r' <"$console" | awk '/^== guest output ==$/ {n++; print; next} n == 1 {print}'
grc=$(tr -d '\r' <"$console" | sed -n 's/^RXE-GUEST-RC=\([0-9]*\)$/\1/p' | tail -n 1)
log "boot+run ${secs} s (TCG, qemu exit $qrc)"
if [ -z "$grc" ]; then
  if [ "$qrc" = 124 ] || [ "$qrc" = 137 ]; then log "guest did not finish within ${timeout_s} s"; grc=124
  else log "guest ended without a result (qemu exit $qrc); console tail:"; grc=125; fi
  tail -n 30 "$console" | tr -d '\r' >&2
fi
exit "$grc"
