#!/usr/bin/env bash
# rerail — simulated multi-rail fabric in network namespaces (root only).
#
# Topology (rail-optimised fabric): H simulated hosts, K rails.
#   host namespace   ${P}-h<h>   one interface per rail, named rail<r>, address 10.N.<r>.<h+1>/24
#   switch namespace ${P}-sw     one bridge per rail, br<r>; host h's rail r plugs into port h<h>r<r>
# Each host↔switch link is one veth pair. Rail r's bridge only joins rail r ports and every rail has
# its own subnet, so rail r only reaches rail r. A per-rail switch (instead of a veth pair per host
# pair) keeps one NIC per rail per host, like a real rail-optimised cluster, so RERAIL_TCP_IFNAME=rail
# selects the same rails on every host and a fault on one host's port does not touch its peers' NICs.
# Addresses exist only inside these namespaces; nothing is added to the caller's namespace.
#
# Env: RERAIL_NETNS_PREFIX (default rrnet) names everything, so parallel users never collide.
#
# Example (2 hosts x 2 rails, rail 0 of host 1 pulled after 1 s and plugged back at 3 s):
#   RERAIL_NETNS_PREFIX=demo scripts/netns-rails.sh up 2 2
#   RERAIL_TCP_IFNAME=rail build/tools/rerail-perf/rerail-perf sendrecv -N 2 --hosts 2 \
#       --netns-prefix demo --fault at=1s,host=1,rail=0,kind=down --fault at=3s,host=1,rail=0,kind=heal
#   RERAIL_NETNS_PREFIX=demo scripts/netns-rails.sh down
set -uo pipefail

P=${RERAIL_NETNS_PREFIX:-rrnet}
SW="${P}-sw"
MAX_HOSTS=64
MAX_RAILS=16
BH_TAG="rerail-blackhole"

usage() {
  cat <<EOF
usage: $(basename "$0") COMMAND [ARGS]
  up H K            create H hosts joined by K rails. Idempotent: a complete topology of that shape
                    is kept as it is (faults included; use heal); a partial one (crash, manual
                    deletion) or one of another shape is removed and rebuilt
  down              remove every namespace of prefix '$P' (safe to run twice or after a crash)
  fail H R [MODE]   take host H's rail R down; MODE carrier (default: switch port down, the host
                    sees carrier loss like a pulled cable) or admin (the host's own NIC set down)
  blackhole H R     silently drop everything on host H's rail R (iptables DROP; link stays up)
  slow H R RATE     rate-limit host H's rail R both ways with tc tbf (RATE e.g. 100mbit, 1gbit)
  heal H R          undo fail/blackhole/slow on host H's rail R
  flap H R PERIOD_MS COUNT [MODE]
                    take the rail down and up COUNT times, one period each (ends up)
  status [--json]   one line per host per rail: host rail netns ifname addr state
  ifnames           the rail interface names (for RERAIL_TCP_IFNAME)
  addr H R          host H's address on rail R
  exec H CMD...     run CMD inside host H's namespace
Hosts and rails count from 0. Env RERAIL_NETNS_PREFIX=$P (letters/digits, starts with a letter).
EOF
}

die() { echo "netns-rails: error: $*" >&2; exit 2; }
need_root() { [ "$(id -u)" -eq 0 ] || die "must run as root (network namespaces, iptables, tc)"; }
is_uint() { [[ "$1" =~ ^[0-9]+$ ]]; }

check_prefix() {
  [[ "$P" =~ ^[a-zA-Z][a-zA-Z0-9]{0,23}$ ]] ||
    die "RERAIL_NETNS_PREFIX='$P' must be 1-24 letters/digits starting with a letter"
}

# Second octet derived from the prefix: different prefixes get different subnets, which keeps
# addresses distinguishable in logs (the namespaces isolate them anyway).
net_octet() { echo $(( ($(printf '%s' "$P" | cksum | cut -d' ' -f1) % 200) + 20 )); }
host_ns() { echo "${P}-h$1"; }
addr_of() { echo "10.$(net_octet).$2.$(( $1 + 1 ))"; }

ns_exists() { [ -e "/run/netns/$1" ]; }
list_hosts() {
  local n
  for n in /run/netns/"${P}"-h*; do
    [ -e "$n" ] || continue
    n=${n##*/}; n=${n#"${P}-h"}
    is_uint "$n" && echo "$n"
  done | sort -n
}
count_hosts() { list_hosts | wc -l; }
count_rails() {
  ns_exists "$(host_ns 0)" || { echo 0; return; }
  ip -n "$(host_ns 0)" -o link show 2>/dev/null | grep -cE '^[0-9]+: rail[0-9]+@'
}

# iptables backend that works in our namespaces: nft first (Debian 12 default), then legacy.
IPT=""
find_iptables() {   # sets IPT, or returns 1 when no backend works in namespace $1
  [ -n "$IPT" ] && return 0
  local ns=$1 c
  for c in iptables iptables-nft iptables-legacy; do
    command -v "$c" >/dev/null 2>&1 || continue
    if ip netns exec "$ns" "$c" -w 5 -S >/dev/null 2>&1; then IPT=$c; return 0; fi
  done
  return 1
}
pick_iptables() {
  find_iptables "$1" || die "no working iptables backend (tried iptables, iptables-nft, iptables-legacy)"
}

check_hr() {
  local h=$1 r=$2
  is_uint "$h" || die "host '$h' is not a number"
  is_uint "$r" || die "rail '$r' is not a number"
  ns_exists "$(host_ns "$h")" || die "host $h does not exist (prefix $P; run 'up' first)"
  ip -n "$(host_ns "$h")" link show "rail$r" >/dev/null 2>&1 || die "host $h has no rail $r"
}

cmd_down() {
  local n
  for n in /run/netns/"${P}"-h* /run/netns/"${SW}"; do
    [ -e "$n" ] || continue
    ip netns del "${n##*/}" 2>/dev/null || die "cannot delete namespace ${n##*/}"
  done
  return 0
}

build() {
  local H=$1 K=$2 h r ns
  ip netns add "$SW" || return 1
  ip -n "$SW" link set lo up || return 1
  for ((r = 0; r < K; r++)); do
    ip -n "$SW" link add "br$r" type bridge || return 1
    ip -n "$SW" link set "br$r" up || return 1
  done
  for ((h = 0; h < H; h++)); do
    ns=$(host_ns "$h")
    ip netns add "$ns" || return 1
    ip -n "$ns" link set lo up || return 1
    # Strict multi-homing, as on real multi-rail hosts: answer ARP only for the address of the
    # interface asked on, and drop packets arriving on the wrong rail. Without it Linux's weak host
    # model lets a socket pinned to rail0 reach the peer's rail-1 address over rail 0.
    ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1 \
      net.ipv4.conf.all.arp_ignore=1 net.ipv4.conf.all.arp_announce=2 net.ipv4.conf.all.rp_filter=1 \
      net.ipv4.conf.default.rp_filter=1 >/dev/null || return 1
    for ((r = 0; r < K; r++)); do
      ip -n "$ns" link add "rail$r" type veth peer name "h${h}r${r}" netns "$SW" || return 1
      ip -n "$SW" link set "h${h}r${r}" master "br$r" up || return 1
      ip -n "$ns" addr add "$(addr_of "$h" "$r")/24" dev "rail$r" || return 1
      ip -n "$ns" link set "rail$r" up || return 1
    done
  done
}

cmd_up() {
  [ $# -eq 2 ] || die "usage: up H K"
  local H=$1 K=$2
  is_uint "$H" && [ "$H" -ge 1 ] && [ "$H" -le $MAX_HOSTS ] || die "H='$H' must be 1..$MAX_HOSTS"
  is_uint "$K" && [ "$K" -ge 1 ] && [ "$K" -le $MAX_RAILS ] || die "K='$K' must be 1..$MAX_RAILS"
  if ns_exists "$SW" && [ "$(count_hosts)" -eq "$H" ] && [ "$(count_rails)" -eq "$K" ] &&
     [ "$(ip -n "$SW" -o link show 2>/dev/null | grep -c ' master br')" -eq $((H * K)) ]; then
    echo "netns-rails: $P already up: $H hosts x $K rails"
  else
    cmd_down
    # Interrupted half-way: leave nothing behind.
    trap 'cmd_down; echo "netns-rails: interrupted; removed $P" >&2; exit 130' INT TERM
    if ! build "$H" "$K"; then
      cmd_down
      die "building the topology failed (see the message above); nothing left behind"
    fi
    trap - INT TERM
    echo "netns-rails: $P up: $H hosts x $K rails"
  fi
  echo "namespaces: $(for ((h = 0; h < H; h++)); do printf '%s ' "$(host_ns "$h")"; done)switch $SW"
  echo "ifnames: $(cmd_ifnames | paste -sd, -)"
  echo "hint: ip netns exec $(host_ns 0) env RERAIL_TCP_IFNAME=rail <cmd>"
}

# Ends with a clean state on the rail: link up both ends, no DROP rules, no qdisc.
cmd_heal() {
  [ $# -eq 2 ] || die "usage: heal H R"
  check_hr "$1" "$2"
  local ns port
  ns=$(host_ns "$1"); port="h$1r$2"
  ip -n "$SW" link set "$port" up || die "cannot set $SW/$port up"
  ip -n "$ns" link set "rail$2" up || die "cannot set $ns/rail$2 up"
  clear_blackhole "$ns" "rail$2"
  # Only a tbf we added is removed; the default qdisc stays.
  tc -n "$ns" qdisc show dev "rail$2" | grep -q '^qdisc tbf' && tc -n "$ns" qdisc del dev "rail$2" root
  tc -n "$SW" qdisc show dev "$port" | grep -q '^qdisc tbf' && tc -n "$SW" qdisc del dev "$port" root
  return 0
}

cmd_fail() {
  [ $# -ge 2 ] && [ $# -le 3 ] || die "usage: fail H R [carrier|admin]"
  check_hr "$1" "$2"
  case "${3:-carrier}" in
    carrier) ip -n "$SW" link set "h$1r$2" down || die "cannot set switch port h$1r$2 down" ;;
    admin) ip -n "$(host_ns "$1")" link set "rail$2" down || die "cannot set rail$2 down" ;;
    *) die "fail mode '$3' must be carrier or admin" ;;
  esac
}

# Toggles the link COUNT times on an absolute schedule (down for half of each period), printing one
# line per change as it happens; only `ip link` calls, so a 200 ms period holds on a loaded host.
cmd_flap() {
  [ $# -ge 4 ] && [ $# -le 5 ] || die "usage: flap H R PERIOD_MS COUNT [carrier|admin]"
  check_hr "$1" "$2"
  is_uint "$3" && [ "$3" -ge 20 ] || die "PERIOD_MS '$3' must be a number >= 20"
  is_uint "$4" && [ "$4" -ge 1 ] || die "COUNT '$4' must be a number >= 1"
  local ns dev i half next now
  case "${5:-carrier}" in
    carrier) ns=$SW; dev="h$1r$2" ;;
    admin) ns=$(host_ns "$1"); dev="rail$2" ;;
    *) die "flap mode '$5' must be carrier or admin" ;;
  esac
  half=$(( $3 * 500 ))  # microseconds
  next=$(( ${EPOCHREALTIME/./} ))
  for ((i = 0; i < 2 * $4; i++)); do
    if (( i % 2 == 0 )); then ip -n "$ns" link set "$dev" down; echo "flap host=$1 rail=$2 down"
    else ip -n "$ns" link set "$dev" up; echo "flap host=$1 rail=$2 up"; fi
    next=$(( next + half ))
    now=$(( ${EPOCHREALTIME/./} ))
    (( next > now )) && sleep "$(printf '0.%06d' $(( next - now )))"
  done
  return 0
}

bh_rules() { # prints the rule specs (without -A/-D) that black-hole one interface
  echo "INPUT -i $1 -m comment --comment $BH_TAG -j DROP"
  echo "OUTPUT -o $1 -m comment --comment $BH_TAG -j DROP"
}
clear_blackhole() {
  local ns=$1 dev=$2 rule
  find_iptables "$ns" || return 0   # without iptables nothing can have been black-holed
  # One listing first: healing a rail that was never black-holed stays cheap (flapping tests).
  ip netns exec "$ns" "$IPT" -w 5 -S 2>/dev/null | grep -q -- "-i $dev .*$BH_TAG" || return 0
  while read -r rule; do
    # shellcheck disable=SC2086
    while ip netns exec "$ns" "$IPT" -w 5 -C $rule 2>/dev/null; do
      ip netns exec "$ns" "$IPT" -w 5 -D $rule || break
    done
  done < <(bh_rules "$dev")
}
cmd_blackhole() {
  [ $# -eq 2 ] || die "usage: blackhole H R"
  check_hr "$1" "$2"
  local ns rule
  ns=$(host_ns "$1")
  pick_iptables "$ns"
  while read -r rule; do
    # shellcheck disable=SC2086
    ip netns exec "$ns" "$IPT" -w 5 -C $rule 2>/dev/null ||
      ip netns exec "$ns" "$IPT" -w 5 -I $rule || die "iptables ($IPT) failed in $ns"
  done < <(bh_rules "rail$2")
}

# RATE in tc syntax -> bytes per second (for the bucket size), or empty when malformed.
rate_bytes() {
  [[ "$1" =~ ^([0-9]+)(bit|kbit|mbit|gbit|bps|kbps|mbps|gbps)$ ]] || return 0
  local n=${BASH_REMATCH[1]} u=${BASH_REMATCH[2]}
  case $u in
    bit) echo $((n / 8)) ;; kbit) echo $((n * 125)) ;; mbit) echo $((n * 125000)) ;;
    gbit) echo $((n * 125000000)) ;; bps) echo "$n" ;; kbps) echo $((n * 1000)) ;;
    mbps) echo $((n * 1000000)) ;; gbps) echo $((n * 1000000000)) ;;
  esac
}
cmd_slow() {
  [ $# -eq 3 ] || die "usage: slow H R RATE"
  check_hr "$1" "$2"
  local bps burst ns
  bps=$(rate_bytes "$3")
  [ -n "$bps" ] && [ "$bps" -ge 1000 ] ||
    die "RATE '$3' must be a number with a unit bit|kbit|mbit|gbit|bps|kbps|mbps|gbps, at least 8kbit"
  # Bucket of 10 ms of traffic (at least 2 full frames): smooth, yet enough for the kernel's timer.
  burst=$((bps / 100)); [ "$burst" -lt 3200 ] && burst=3200
  ns=$(host_ns "$1")
  tc -n "$ns" qdisc replace dev "rail$2" root tbf rate "$3" burst "$burst" latency 100ms ||
    die "tc tbf failed on $ns/rail$2"
  tc -n "$SW" qdisc replace dev "h$1r$2" root tbf rate "$3" burst "$burst" latency 100ms ||
    die "tc tbf failed on $SW/h$1r$2"
}

# state: up | down(admin) | down(carrier) plus +blackhole and +slow(RATE)
rail_state() {
  local ns=$1 r=$2 h=$3 s flags rate
  flags=,$(ip -n "$ns" -o link show "rail$r" 2>/dev/null | sed -n 's/^[^<]*<\([^>]*\)>.*/\1/p'),
  if [[ "$flags" != *,UP,* ]]; then s="down-admin"
  elif [[ "$flags" != *,LOWER_UP,* ]]; then s="down-carrier"
  else s="up"; fi
  pick_iptables "$ns"
  ip netns exec "$ns" "$IPT" -w 5 -S 2>/dev/null | grep -q -- "-i rail$r .*$BH_TAG" && s="$s+blackhole"
  rate=$(tc -n "$ns" qdisc show dev "rail$r" 2>/dev/null | grep -o 'tbf .* rate [^ ]*' | awk '{print $NF}')
  [ -n "$rate" ] && s="$s+slow:$rate"
  : "$h"
  echo "$s"
}

cmd_status() {
  local json=0 h r ns first=1 st
  [ "${1:-}" = "--json" ] && json=1
  if ! ns_exists "$SW"; then
    [ $json -eq 1 ] && echo "{\"prefix\":\"$P\",\"up\":false,\"rails\":[]}" || echo "prefix=$P up=0"
    return 0
  fi
  local K; K=$(count_rails)
  [ $json -eq 1 ] && printf '{"prefix":"%s","up":true,"hosts":%d,"rails_per_host":%d,"rails":[' \
    "$P" "$(count_hosts)" "$K"
  [ $json -eq 0 ] && echo "prefix=$P up=1 hosts=$(count_hosts) rails=$K switch=$SW"
  for h in $(list_hosts); do
    ns=$(host_ns "$h")
    for ((r = 0; r < K; r++)); do
      st=$(rail_state "$ns" "$r" "$h")
      if [ $json -eq 1 ]; then
        [ $first -eq 0 ] && printf ','
        printf '{"host":%d,"rail":%d,"netns":"%s","ifname":"rail%d","addr":"%s","state":"%s"}' \
          "$h" "$r" "$ns" "$r" "$(addr_of "$h" "$r")" "$st"
        first=0
      else
        echo "host=$h rail=$r netns=$ns ifname=rail$r addr=$(addr_of "$h" "$r") state=$st"
      fi
    done
  done
  [ $json -eq 1 ] && echo ']}'
  return 0
}

cmd_ifnames() {
  local K r; K=$(count_rails)
  [ "$K" -gt 0 ] || die "prefix $P is not up"
  for ((r = 0; r < K; r++)); do echo "rail$r"; done
}

main() {
  [ $# -ge 1 ] || { usage >&2; exit 2; }
  local cmd=$1; shift
  case "$cmd" in -h|--help|help) usage; exit 0 ;; esac
  check_prefix
  need_root
  case "$cmd" in
    up) cmd_up "$@" ;;
    down) [ $# -eq 0 ] || die "usage: down"; cmd_down ;;
    fail) cmd_fail "$@" ;;
    blackhole) cmd_blackhole "$@" ;;
    slow) cmd_slow "$@" ;;
    heal) cmd_heal "$@" ;;
    flap) cmd_flap "$@" ;;
    status) cmd_status "$@" ;;
    ifnames) cmd_ifnames ;;
    addr) [ $# -eq 2 ] || die "usage: addr H R"; check_hr "$1" "$2"; addr_of "$1" "$2" ;;
    exec) [ $# -ge 2 ] || die "usage: exec H CMD..."; is_uint "$1" || die "host '$1' is not a number"
          ns_exists "$(host_ns "$1")" || die "host $1 does not exist"
          local ns; ns=$(host_ns "$1"); shift; exec ip netns exec "$ns" "$@" ;;
    *) usage >&2; die "unknown command '$cmd'" ;;
  esac
}

main "$@"
