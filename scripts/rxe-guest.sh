#!/usr/bin/env bash
# rxe-guest.sh — run a command against the real kernel verbs stack (Soft-RoCE, rdma_rxe) inside a
# throw-away QEMU guest, on hosts whose own kernel has no RDMA subsystem (../shared/reference/verbs.md).
#
#   scripts/rxe-guest.sh [options] [--] COMMAND [ARGS...]
#     --with PATH      also copy PATH (file, at the same absolute path) and, for ELF files, its ldd
#                      closure into the guest; repeatable. Binaries built here find their plugins by
#                      the build paths compiled in, so copy those too (--with build/.../libX.so).
#     --rails N        N veth pairs vethK/vethKp (10.10.K.1/24 and .2) with rxeK on vethK (default 1)
#     --pair           two guests, "a" and "b", joined by one virtual wire per rail (QEMU dgram netdevs
#                      over host UDP, virtio-net): rail K is ethK with 10.20.K.1/24 (a) / .2 (b) and rxeK
#                      on it — a real 2-host multi-rail RoCE fabric. COMMAND runs in both, with
#                      RXE_ROLE=a|b and RXE_PEER=<the other guest's rail-0 address>; the exit code is
#                      a's, or b's if a's is 0. The host can cut rail K of a guest like a pulled cable
#                      with RXE_CUT="a:K:SECONDS:DURATION" (QEMU monitor set_link off, then on).
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
# busybox, ip, rdma, ibverbs-utils, perftest's ib_write_bw when installed, libibverbs with the rxe
# provider, the --with files, and every library they need), and boots it with `qemu-system-x86_64
# -accel tcg -nographic` (KVM is not used: /dev/kvm opens here but KVM fails or hangs). In the guest:
# insmod the module chain, create the veth pairs and `rdma link add rxeK type rxe netdev vethK`, run
# COMMAND with bash -c, power off.
# QEMU runs under `nice` and `timeout`.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
rails=1 timeout_s=300 mem=1024 cache="$here/build/rxe-cache" keep=0 pair=0
withs=()
while [ $# -gt 0 ]; do
  case "$1" in
    --with) withs+=("$2"); shift 2 ;;
    --rails) rails=$2; shift 2 ;;
    --timeout) timeout_s=$2; shift 2 ;;
    --mem) mem=$2; shift 2 ;;
    --cache) cache=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    --pair) pair=1; shift ;;
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
exec 9>"$cache/.lock"   # one download/extraction at a time (parallel ctest runs share the cache)
flock -w 600 9 || skip "cache $cache is locked"
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
flock -u 9
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
[ "$pair" = 1 ] && for m in virtio_pci virtio_net; do add_mod "$m"; done

# ---- initramfs --------------------------------------------------------------------------------------
work=$(mktemp -d "${TMPDIR:-/tmp}/rxe-guest.XXXXXX")
qpids=()
cleanup() {
  for p in ${qpids[@]+"${qpids[@]}"}; do kill -9 "$p" 2>/dev/null || true; done
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
for t in bash ip rdma ibv_devinfo ibv_devices ibv_rc_pingpong ib_write_bw; do  # ib_write_bw: optional
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
[ "$pair" = 1 ] && touch "$root/pair"

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
role=$(sed -n 's/.*rxe_role=\([ab]\).*/\1/p' /proc/cmdline)
if [ -f /pair ]; then
  me=1 peer=2; [ "$role" = b ] && me=2 peer=1
  export RXE_ROLE=$role RXE_PEER=10.20.0.$peer
fi
while [ $k -lt $(cat /rails) ]; do
  if [ -f /pair ]; then  # rail k = the k-th virtio NIC (QEMU's order), one wire to the other guest
    nd=eth$k
    $IP addr add 10.20.$k.$me/24 dev $nd && $IP link set $nd up || fail "up $nd"
    for _ in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do  # carrier, up to 2 s
      [ "$(cat /sys/class/net/$nd/operstate)" = up ] && break
      sleep 0.1
    done
  else
    nd=veth$k
    $IP link add veth$k type veth peer name veth${k}p || fail "veth$k"
    $IP addr add 10.10.$k.1/24 dev veth$k && $IP addr add 10.10.$k.2/24 dev veth${k}p || fail "addr veth$k"
    $IP link set veth$k up && $IP link set veth${k}p up || fail "up veth$k"
  fi
  $RDMA link add rxe$k type rxe netdev $nd || fail "rdma link add rxe$k"
  k=$((k + 1))
done
echo "RXE-GUEST: ready ($(uname -r), $(cat /rails) rxe device(s)${role:+, guest $role})"
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
# boot ROLE EXTRA-QEMU-ARGS...: one guest in the background, console in $work/console.ROLE.log
boot() {
  local role=$1
  shift
  timeout --kill-after=5 "$timeout_s" nice -n 10 "$qemu" -accel tcg -m "$mem" -smp 1 -nographic -no-reboot \
    -kernel "$vmlinuz" -initrd "$work/initrd.gz" "$@" \
    -append "console=ttyS0 quiet loglevel=3 panic=-1 rdinit=/init rxe_role=$role" </dev/null >"$work/console.$role.log" 2>&1 &
  qpids+=($!)
}
# The command's result from one guest's console: prints its output, sets grc.
report() {
  local role=$1 qrc=$2 console="$work/console.$1.log"
  tr -d '\r' <"$console" | sed -n '/^RXE-GUEST: /p'
  tr -d '\r' <"$console" | awk '/^== guest output ==$/ {n++; print; next} n == 1 {print}'
  grc=$(tr -d '\r' <"$console" | sed -n 's/^RXE-GUEST-RC=\([0-9]*\)$/\1/p' | tail -n 1)
  if [ -z "$grc" ]; then
    if [ "$qrc" = 124 ] || [ "$qrc" = 137 ]; then log "guest $role did not finish within ${timeout_s} s"; grc=124
    else log "guest $role ended without a result (qemu exit $qrc); console tail:"; grc=125; fi
    tail -n 30 "$console" | tr -d '\r' >&2
  fi
}
# RXE_CUT="ROLE:RAIL:AT_S:FOR_S": pull rail RAIL of guest ROLE at AT_S seconds after its output starts
# (QEMU's link state: the guest sees carrier loss, the peer sees packets vanish), plug it back FOR_S later.
monitor() {  # SOCKET COMMAND: one human-monitor command to a guest's QEMU
  timeout 5 python3 - "$1" "$2" <<'PY'
import socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall((sys.argv[2] + "\n").encode())
time.sleep(0.3)
PY
}
cut_link() {
  local role rail at dur mon
  IFS=: read -r role rail at dur <<<"$RXE_CUT"
  mon="$work/mon.$role.sock"
  for _ in $(seq 1 "$timeout_s"); do
    grep -q '^== guest output ==' "$work/console.$role.log" 2>/dev/null && break
    sleep 1
  done
  sleep "$at"
  log "cut: guest $role rail $rail off"
  monitor "$mon" "set_link n$rail off" || log "cut: monitor command failed"
  sleep "$dur"
  log "cut: guest $role rail $rail on"
  monitor "$mon" "set_link n$rail on" || log "cut: monitor command failed"
}

# emulation_failed ROLE...: the emulated machine, not the command, failed in one of these guests: the
# kernel panicked while booting (on a loaded host TCG can miss the IO-APIC timer check: "IO-APIC +
# timer doesn't work!") or a virtio-net transmit queue hung (NETDEV WATCHDOG: the rail is dead inside
# the guest). Prints what it saw.
emulation_failed() {
  local role hit=1 seen
  for role in "$@"; do
    seen=$(tr -d '\r' <"$work/console.$role.log" | grep -m 2 -E "Kernel panic|NETDEV WATCHDOG" || true)
    [ -n "$seen" ] || continue
    log "guest $role: the emulated machine failed:"
    echo "$seen" | sed 's/^/    /' >&2
    hit=0
  done
  return $hit
}

t0=$(date +%s.%N)
# One more boot when the emulation itself failed (emulation_failed): a fault of the TCG host, not of
# what runs in the guest; any other failure is reported at once.
for attempt in 1 2; do
if [ "$pair" = 1 ]; then
  base=$((20000 + RANDOM % 20000))
  args_a=() args_b=()
  for ((k = 0; k < rails; k++)); do
    pa=$((base + 2 * k)) pb=$((base + 2 * k + 1))
    args_a+=(-netdev "dgram,id=n$k,local.type=inet,local.host=127.0.0.1,local.port=$pa,remote.type=inet,remote.host=127.0.0.1,remote.port=$pb"
             -device "virtio-net-pci,netdev=n$k,mac=52:54:00:00:0$k:01")
    args_b+=(-netdev "dgram,id=n$k,local.type=inet,local.host=127.0.0.1,local.port=$pb,remote.type=inet,remote.host=127.0.0.1,remote.port=$pa"
             -device "virtio-net-pci,netdev=n$k,mac=52:54:00:00:0$k:02")
  done
  boot a "${args_a[@]}" -monitor "unix:$work/mon.a.sock,server,nowait"
  boot b "${args_b[@]}" -monitor "unix:$work/mon.b.sock,server,nowait"
  cutpid=""
  if [ -n "${RXE_CUT:-}" ]; then cut_link & cutpid=$!; fi
  set +e
  wait "${qpids[0]}"; qa=$?
  wait "${qpids[1]}"; qb=$?
  [ -n "$cutpid" ] && kill "$cutpid" 2>/dev/null
  set -e
  qpids=()
  { echo "---- guest a ----"; report a "$qa"; } >"$work/out" 2>&1; ga=$grc
  { echo "---- guest b ----"; report b "$qb"; } >>"$work/out" 2>&1; gb=$grc
  grc=$ga; [ "$grc" = 0 ] && grc=$gb
  roles=(a b)
else
  boot a -nic none
  set +e
  wait "${qpids[0]}"; qa=$?
  set -e
  qpids=()
  report a "$qa" >"$work/out" 2>&1
  roles=(a)
fi
# report's grc is set in this shell (its output went to $work/out, not through a subshell).
[ "$grc" = 0 ] && break
[ "$attempt" = 1 ] && emulation_failed "${roles[@]}" || break
log "booting again (attempt 2 of 2); attempt 1's output is void and not shown"
done
cat "$work/out"
t1=$(date +%s.%N)
secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", b - a}')
log "boot+run ${secs} s (TCG$([ "$pair" = 1 ] && echo ", 2 guests"))"
exit "$grc"
