#!/usr/bin/env bash
# The net plugin fault suite over IB (issue 12): test_net_faults' scenarios with RERAIL_TRANSPORT=ib over
# the fake verbs, faults injected into the running processes' fake HCAs (netns link faults cannot
# touch the fake: its bytes go over Unix sockets). Two net_fault_peer processes are two hosts of one
# FAKEVERBS_WIRE fabric with 2 fake ports each (fake0 = NCCL's device = the primary rail; RERAIL_POLICY
# auto is failover on IB, so fake0 carries the data and fake1 stands by), streaming verified messages
# both ways (window 8, sizes vary, content and order checked) while this script writes commands into
# each process's FAKEVERBS_CONTROL FIFO on a schedule (tests/fakeverbs/README.md):
#   down       host 0's fake0 port down at 1.0 s, up at 2.0 s (PORT_ERR / PORT_ACTIVE): failover, then
#              failback, both hosts, before the stream ends at 5 s
#   blackhole  host 0's fake0 drops everything from 1.0 s (no event: RETRY_EXC_ERR or the stall
#              watchdog, RERAIL_STALL_MS=300): failover on both hosts
#   flap       host 0's fake0 down / up every 200 ms for 5 s (25 changes)
#   alldown    host 0's fake0 and fake1 down at 0.8 s: both peers' test() must error within
#              RERAIL_GIVEUP_MS (1.5 s) + detection (< 5 s after the fault, as test_net_faults), never hang
#   heal       host 0's fake0 black-holed and host 1's fake0 down at 0.8 s, both healed at 2.0 s: the
#              healed rail carried nothing while faulted (< 64 KiB landed on either fake0) and carries
#              the data again afterwards (> 4 MiB sent on fake0 by each host within 3 s of the heal)
# and more of test_net_faults' cases (ackloss, txloss, txlossall, allblackhole, alldownup, fatal, earlydown,
# earlyblackhole, lagging, eager, eagerlag, stripeflap, connectdown, pause, peerkill, eofclose, eofdead,
# soak), and the TCP fallback link of RERAIL_IB_TCP_FALLBACK (tcpfallback, tcpidle, tcpearly): see each
# run_<name> below.
# A scenario passes when both peers printed RESULT with bad=0, hang=0 and exit 0, every message one sent
# (plus its 0-byte terminator) was received by the other, err=0 (alldown: err != 0 on both, exit 4),
# every command was applied, and its expected WARN / INFO lines are in the plugin logs. One PASS / FAIL
# line per scenario with its figures; the logs of a failed one are printed. Exit 0 when all passed.
#
# Usage: ib_fake_faults.sh <net_fault_peer> <libnccl-net-rerail.so> <libfakeverbs.so> [scenario...]
# Env IB_FAKE_FAULTS_KEEP=1 keeps the peers' logs, outputs and control records (the path is printed).
set -uo pipefail
peer=$1 so=$2 fv=$3
shift 3
scenarios=("$@")
[ ${#scenarios[@]} -gt 0 ] || scenarios=(down blackhole flap alldown heal ackloss txloss txlossall allblackhole alldownup
  fatal earlydown earlyblackhole lagging eager eagerlag stripeflap connectdown pause peerkill eofclose eofdead
  tcpfallback tcpidle tcpearly)  # soak by name (ctest ib_fake_faults_soak)
top=$(mktemp -d /tmp/rribf.XXXXXX)
pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  if [ -n "${IB_FAKE_FAULTS_KEEP:-}" ]; then echo "logs kept in $top"; else rm -rf "$top"; fi
}
trap cleanup EXIT

now_ms() { date +%s%3N; }

# start_peers SCENARIO DURATION_MS ENV...: both peers streaming; sets work, t0. Globals: msg (bytes per
# message, default 256 KiB), env0 / env1 (more environment for host 0 / 1 only).
start_peers() {
  local name=$1 dur=$2 h
  shift 2
  runs=$((${runs:-0} + 1))
  work=$top/$runs-$name
  mkdir -p "$work/wire"
  pids=()
  for h in 0 1; do
    mkfifo "$work/in$h" "$work/ctl$h"
    # A peer that ends neither by itself nor by its own hang check (FAULT_PEER_HANG_MS) is killed.
    # shellcheck disable=SC2046  # env0 / env1: several words
    env NCCL_DEBUG=INFO RERAIL_TRANSPORT=ib RERAIL_IB_LIB="$fv" FAKEVERBS_DEVICES=2 FAKEVERBS_WIRE="$work/wire" \
      FAKEVERBS_CONTROL="$work/ctl$h" RERAIL_TCP_IFNAME=lo RERAIL_BOARD=0 FAULT_PEER_HANG_MS=15000 "$@" \
      $([ $h = 0 ] && echo "${env0:-}" || echo "${env1:-}") \
      timeout -s KILL $((dur / 1000 + 40)) "$peer" "$so" "$dur" "${msg:-$((256 * 1024))}" \
      <"$work/in$h" >"$work/out$h" 2>"$work/log$h" &
    pids+=($!)
  done
  exec 5>"$work/in0" 6>"$work/in1"
  local _
  for _ in $(seq 200); do
    grep -q HANDLE "$work/out0" && grep -q HANDLE "$work/out1" && break
    sleep 0.05
  done
  grep HANDLE "$work/out1" >&5
  grep HANDLE "$work/out0" >&6
  t0=$(now_ms)
  : >"$work/sched"
}

# at MS: sleeps until MS after the stream started.
at() {
  local d=$(($1 - ($(now_ms) - t0)))
  [ $d -gt 0 ] && sleep "$(printf '%d.%03d' $((d / 1000)) $((d % 1000)))"
  return 0
}

# ctl HOST COMMAND: writes COMMAND into that host's control FIFO and waits (5 s) until the fake applied
# it; prints the outcome, logs it in $work/sched.
ctl() {
  local h=$1 cmd=$2 before _ out
  before=$(wc -l 2>/dev/null <"$work/ctl$h.applied" || echo 0)
  # shellcheck disable=SC2016  # $1 and $2 are the inner shell's arguments
  timeout 5 bash -c 'echo "$1" >"$2"' _ "$cmd" "$work/ctl$h" || { echo "+$(($(now_ms) - t0)) ms host$h: $cmd -> NOT WRITTEN" >>"$work/sched"; return 1; }
  for _ in $(seq 500); do
    out=$(sed -n "$((before + 1))p" "$work/ctl$h.applied" 2>/dev/null)
    [ -n "$out" ] && break
    sleep 0.01
  done
  echo "+$(($(now_ms) - t0)) ms host$h: ${out:-$cmd -> NOT APPLIED}" >>"$work/sched"
  echo "${out#* -> }"
}

# counter HOST DEV FIELD: that counter of the fake's `stats` (traffic with the other host).
counter() {
  ctl "$1" stats | tr ' ' '\n' | sed -n "/^$2\$/,/^fake/s/^$3=//p" | head -1
}

field() { sed -n "s/.* $2=\([0-9.]*\).*/\1/p" <<<"$1"; }
mb() { local b; b=$(field "$1" bytes); echo $((${b:-0} / 1000000)); }

# finish_peers: waits for both peers (their init must have offered ports[h], default both fake ports); sets r0 r1 (RESULT lines) e0 e1 (exit codes) and why (what failed).
finish_peers() {
  { wait "${pids[0]}"; e0=$?; } 2>/dev/null  # no "Killed" line from the shell for peerkill's victim
  { wait "${pids[1]}"; e1=$?; } 2>/dev/null
  pids=()
  exec 5>&- 6>&-
  r0=$(grep RESULT "$work/out0") r1=$(grep RESULT "$work/out1")
  why=""
  grep -q "NOT WRITTEN\|NOT APPLIED\|-> error" "$work/sched" && why+=" a control command failed;"
  [ -n "$r0" ] || why+=" host0 printed no RESULT;"
  [ -n "$r1" ] || why+=" host1 printed no RESULT;"
  local h r
  for h in 0 1; do
    r=$([ $h = 0 ] && echo "$r0" || echo "$r1")
    [ "$(field "$r" bad)" = 0 ] || why+=" host$h bad=$(field "$r" bad) (late writes $(field "$r" late));"
    [ "$(field "$r" hang)" = 0 ] || why+=" host$h hang=$(field "$r" hang);"
    grep -q "host [0-9]* of fabric" "$work/log$h" || why+=" host$h did not join the fake fabric;"
    grep -qF "transports: ib(${ports[$h]})" "$work/log$h" || why+=" host$h did not offer ib(${ports[$h]});"
  done
}

# clean: both ends error-free, every message received (the 0-byte terminator is not counted).
expect_clean() {
  [ "$e0" = 0 ] || why+=" host0 exit $e0;"
  [ "$e1" = 0 ] || why+=" host1 exit $e1;"
  [ "$(field "$r0" err)" = 0 ] || why+=" host0 err=$(field "$r0" err);"
  [ "$(field "$r1" err)" = 0 ] || why+=" host1 err=$(field "$r1" err);"
  [ -n "$r0" ] && [ -n "$r1" ] || return
  [ "$(field "$r0" sent)" = "$(($(field "$r1" recv) + 1))" ] || why+=" host0 sent $(field "$r0" sent), host1 received $(field "$r1" recv) + 1;"
  [ "$(field "$r1" sent)" = "$(($(field "$r0" recv) + 1))" ] || why+=" host1 sent $(field "$r1" sent), host0 received $(field "$r0" recv) + 1;"
  [ "$(field "$r0" recv)" -gt 0 ] && [ "$(field "$r1" recv)" -gt 0 ] || why+=" nothing received;"
}

# expect_log HOST REGEX WHAT: REGEX (grep -E) is in that host's plugin log.
expect_log() {
  grep -Eq "$2" "$work/log$1" || why+=" host$1: no $3;"
}
count() { grep -Ec "$2" "$work/log$1"; }

FAILOVER0='ib fake0 to peer rail 0 failed \(.*\): re-sending'
FAILBACK0='link 0 \(ib fake0 to peer rail 0\): probing -> healthy \(peer answered the probe \(failback\)\)'

# verdict NAME START_MS EXTRA: the PASS / FAIL line.
verdict() {
  local name=$1 start=$2 extra=$3 s
  s=$(printf '%-9s %5.1f s  msgs 0->1 %s/%s 1->0 %s/%s  MB %s/%s  maxgap_ms %s/%s  err %s/%s (after %s/%s ms)  %s' \
      "$name" "$(awk -v ms=$(($(now_ms) - start)) 'BEGIN { print ms / 1000 }')" "$(field "$r0" sent)" "$(field "$r1" recv)" \
      "$(field "$r1" sent)" "$(field "$r0" recv)" "$(mb "$r0")" "$(mb "$r1")" \
      "$(field "$r0" maxgap_ms)" "$(field "$r1" maxgap_ms)" "$(field "$r0" err)" "$(field "$r1" err)" \
      "$(field "$r0" err_after_ms)" "$(field "$r1" err_after_ms)" "$extra")
  if [ -z "$why" ]; then
    echo "PASS $s"
  else
    failed=$((failed + 1))
    echo "FAIL $s"
    echo "  why:$why"
    echo "  --- schedule"; sed 's/^/  /' "$work/sched"
    echo "  --- host0: $r0 (exit $e0)"; grep -v "trace:" "$work/log0" | tail -40 | sed 's/^/  /'
    echo "  --- host1: $r1 (exit $e1)"; grep -v "trace:" "$work/log1" | tail -40 | sed 's/^/  /'
  fi
}

# What each host's send side logged: failovers and failbacks of fake0.
seen() {
  echo "failover $(count 0 "$FAILOVER0")/$(count 1 "$FAILOVER0") failback $(count 0 "$FAILBACK0")/$(count 1 "$FAILBACK0")"
}

run_down() {
  # 3 s after the port comes back for both failbacks: at load 10 on 2 cores a peer was seen stalled for
  # 1-2 s (its "HCA" thread too), and 1.5 s left 1 run in 20 without host 0's failback.
  start_peers down 5000 RERAIL_FAILBACK_MIN_MS=50 RERAIL_FAILBACK_MAX_MS=200
  at 1000; ctl 0 "down fake0" >/dev/null
  at 2000; ctl 0 "up fake0" >/dev/null
  finish_peers
  expect_clean
  expect_log 0 "$FAILOVER0" "failover of fake0 (port down)"
  expect_log 1 "$FAILOVER0" "failover of fake0 (the peer's port down)"
  expect_log 0 'IB rail fake0 down \(' "port event (PORT_ERR) of fake0"
  expect_log 0 'IB rail fake0 up \(' "port event (PORT_ACTIVE) of fake0"
  expect_log 0 "$FAILBACK0" "failback of fake0 after PORT_ACTIVE"
  expect_log 1 "$FAILBACK0" "failback of fake0 after the peer's PORT_ACTIVE"
}

run_blackhole() {
  start_peers blackhole 3500 RERAIL_STALL_MS=300
  at 1000; ctl 0 "blackhole fake0" >/dev/null
  finish_peers
  expect_clean
  expect_log 0 "$FAILOVER0" "failover of fake0 (black hole)"
  expect_log 1 "$FAILOVER0" "failover of fake0 (the peer's black hole)"
}

run_flap() {
  start_peers flap 6500 RERAIL_FAILBACK_MIN_MS=20 RERAIL_FAILBACK_MAX_MS=100
  local k
  for ((k = 0; k < 25; k++)); do
    at $((1000 + 200 * k))
    if ((k % 2 == 0)); then ctl 0 "down fake0" >/dev/null; else ctl 0 "up fake0" >/dev/null; fi
  done
  ctl 0 "up fake0" >/dev/null
  finish_peers
  expect_clean
  [ "$(grep -c 'fake0 -> ok (PORT_' "$work/sched")" -ge 25 ] || why+=" fewer than 25 port changes applied;"
  expect_log 0 "$FAILOVER0" "failover of fake0"
}

run_alldown() {
  start_peers alldown 20000 RERAIL_GIVEUP_MS=1500 RERAIL_STALL_MS=200
  at 800; ctl 0 "down fake0" >/dev/null; ctl 0 "down fake1" >/dev/null
  finish_peers
  local h r
  for h in 0 1; do
    r=$([ $h = 0 ] && echo "$r0" || echo "$r1")
    [ -n "$r" ] || continue
    [ "$(field "$r" err)" != 0 ] || why+=" host$h: no error with every rail down;"
    [ "$(field "$r" err_after_ms)" -lt $((800 + 200 + 1500 + 2500)) ] ||
      why+=" host$h: error $(field "$r" err_after_ms) ms into the stream, not within RERAIL_GIVEUP_MS of the fault;"
  done
  [ "$e0" = 4 ] || why+=" host0 exit $e0 (want 4: error);"
  [ "$e1" = 4 ] || why+=" host1 exit $e1 (want 4: error);"
}

run_heal() {
  start_peers heal 6000 RERAIL_FAILBACK_MIN_MS=50 RERAIL_FAILBACK_MAX_MS=200
  local down0 down1 up0 up1 took0=-1 took1=-1 healed now b0 b1
  at 800; ctl 0 "blackhole fake0" >/dev/null; ctl 1 "down fake0" >/dev/null
  at 1100
  down0=$(( $(counter 0 fake0 rx_bytes) + $(counter 1 fake0 rx_bytes) ))
  at 2000
  down1=$(( $(counter 0 fake0 rx_bytes) + $(counter 1 fake0 rx_bytes) ))
  ctl 0 "heal fake0" >/dev/null; ctl 1 "heal fake0" >/dev/null
  healed=$(now_ms)
  up0=$(counter 0 fake0 tx_bytes) up1=$(counter 1 fake0 tx_bytes)
  while [ $(($(now_ms) - healed)) -lt 3000 ] && { [ $took0 -lt 0 ] || [ $took1 -lt 0 ]; }; do
    sleep 0.05
    now=$(($(now_ms) - healed))
    b0=$(counter 0 fake0 tx_bytes) b1=$(counter 1 fake0 tx_bytes)
    [ $took0 -lt 0 ] && [ $((b0 - up0)) -gt $((4 << 20)) ] && took0=$now
    [ $took1 -lt 0 ] && [ $((b1 - up1)) -gt $((4 << 20)) ] && took1=$now
  done
  finish_peers
  expect_clean
  [ $((down1 - down0)) -lt $((64 << 10)) ] || why+=" $((down1 - down0)) bytes landed on the faulted fake0s;"
  [ $took0 -ge 0 ] || why+=" host0 did not send 4 MiB on the healed fake0 within 3 s;"
  [ $took1 -ge 0 ] || why+=" host1 did not send 4 MiB on the healed fake0 within 3 s;"
  expect_log 0 "$FAILBACK0" "failback of fake0"
  expect_log 1 "$FAILBACK0" "failback of fake0"
  heal_figures="landed while faulted $((down1 - down0)) B, 4 MiB on healed fake0 after $took0/$took1 ms"
}

# ---- more of test_net_faults' cases, and the failure class only IB has -------------------------------

# Ack-only loss at host 0's fake0 from 1.0 s: the data lands, the acks never come back (the stall
# watchdog, or RETRY_EXC_ERR); the re-sent chunks of completed messages must be dropped. Every probe of
# fake0 is answered, so it fails back and fails again: its back-off must double each time (a failback
# restarts it only after RERAIL_FAILBACK_PROBATION_MS, 2 s): at most 4 failbacks per host in the ~2.7 s
# of loss (100+200+400+800 ms of back-off and a detection each; without the probation, 100 ms each
# time: 6-7). RERAIL_IB_TIMEOUT=16 (1.07 s of RC retries, not 268 ms): while fake0 is failed, fake1 is
# the last live link, which the stall watchdog never fails but a retry timeout does; the fake's timer
# runs on its HCA threads, and on a loaded host one not scheduled for 268 ms failed it too (an error
# at 4.8 s under load); fake0's ack loss is still found by the watchdog at ~340 ms.
run_ackloss() {
  start_peers ackloss 3500 RERAIL_STALL_MS=300 RERAIL_IB_TIMEOUT=16
  at 1000; ctl 0 "ackloss fake0" >/dev/null
  finish_peers
  expect_clean
  expect_log 1 "$FAILOVER0" "failover of fake0 (the peer's acks lost)"
  local h
  for h in 0 1; do
    [ "$(count $h "$FAILBACK0")" -le 4 ] || why+=" host$h: $(count $h "$FAILBACK0") failbacks of fake0 (back-off not doubling);"
  done
}

# "Data landed, ack lost" at rerail's level: host 1's fake0 loses what it sends (one-way), so host 0's
# chunks land there and are RC-acknowledged but host 1's acks on that link never arrive; host 0's stall
# watchdog (or host 1's link-down notice) re-sends chunks of messages host 1 already completed. Receivers
# post one receive at a time, so a completed buffer stays the application's while the rest stream: a
# re-sent chunk written into it (late=) is a lost-ownership bug, not a retransmission.
run_txloss() {
  start_peers txloss 3500 RERAIL_STALL_MS=300 FAULT_PEER_RECV_AHEAD=1
  at 1000; ctl 1 "txloss fake0" >/dev/null
  finish_peers
  expect_clean
  expect_log 0 "$FAILOVER0" "failover of fake0 (its acks lost on the way back)"
  expect_log 1 "$FAILOVER0" "failover of fake0 (what it sends is lost)"
}

# The same on both rails for 0.8 s, then healed: no ack of host 1 reaches host 0 at all (rerail sends
# each ack on two links), so host 0 re-sends every unacknowledged chunk, of messages host 1 completed
# among them, on links that fail in turn; after the heal the links come back and the stream completes.
run_txlossall() {
  start_peers txlossall 4000 RERAIL_STALL_MS=300 FAULT_PEER_RECV_AHEAD=1 RERAIL_FAILBACK_MIN_MS=50 RERAIL_FAILBACK_MAX_MS=200
  at 1000; ctl 1 "txloss fake0" >/dev/null; ctl 1 "txloss fake1" >/dev/null
  at 1800; ctl 1 "heal fake0" >/dev/null; ctl 1 "heal fake1" >/dev/null
  finish_peers
  expect_clean
  expect_log 0 "$FAILOVER0" "failover of fake0 (no ack came back)"
  expect_log 0 "$FAILBACK0" "failback of fake0 after the heal"
}

# Every rail of host 0 black-holed (no event) or down for 1 s, far less than RERAIL_GIVEUP_MS (30 s):
# no error; once healed, the links are probed again and the stream completes.
run_allblackhole() {
  start_peers allblackhole 4000 RERAIL_STALL_MS=300 RERAIL_FAILBACK_MIN_MS=50 RERAIL_FAILBACK_MAX_MS=200
  at 1000; ctl 0 "blackhole fake0" >/dev/null; ctl 0 "blackhole fake1" >/dev/null
  at 2000; ctl 0 "heal fake0" >/dev/null; ctl 0 "heal fake1" >/dev/null
  finish_peers
  expect_clean
  expect_log 0 "$FAILBACK0" "failback of fake0 after the heal"
  expect_log 1 "$FAILBACK0" "failback of fake0 after the heal"
}
run_alldownup() {
  start_peers alldownup 4000 RERAIL_FAILBACK_MIN_MS=50 RERAIL_FAILBACK_MAX_MS=200
  at 1000; ctl 0 "down fake0" >/dev/null; ctl 0 "down fake1" >/dev/null
  at 2000; ctl 0 "up fake0" >/dev/null; ctl 0 "up fake1" >/dev/null
  finish_peers
  expect_clean
  expect_log 0 "$FAILBACK0" "failback of fake0 after PORT_ACTIVE"
  expect_log 1 "$FAILBACK0" "failback of fake0 after the peer's PORT_ACTIVE"
}

# Faults while the comms are still being set up (written as soon as the handles are exchanged, while
# connect / accept run): host 1's fake0 down, then up 1 s later; host 0's fake0 black-holed, healed
# 1.5 s later.
run_earlydown() {
  start_peers earlydown 3000 RERAIL_FAILBACK_MIN_MS=50 RERAIL_FAILBACK_MAX_MS=200
  ctl 1 "down fake0" >/dev/null
  at 1000; ctl 1 "up fake0" >/dev/null
  finish_peers
  expect_clean
}
run_earlyblackhole() {
  start_peers earlyblackhole 3500 RERAIL_STALL_MS=300 RERAIL_FAILBACK_MIN_MS=50 RERAIL_FAILBACK_MAX_MS=200
  ctl 0 "blackhole fake0" >/dev/null
  at 1500; ctl 0 "heal fake0" >/dev/null
  finish_peers
  expect_clean
}

# Host 0's fake0 dies (DEVICE_FATAL: its QPs flush, posts fail): the stream goes on over fake1.
run_fatal() {
  start_peers fatal 3000 RERAIL_FAILBACK_MIN_MS=50 RERAIL_FAILBACK_MAX_MS=200
  at 1000; ctl 0 "fatal fake0" >/dev/null
  finish_peers
  expect_clean
  expect_log 0 "$FAILOVER0" "failover of fake0 (device fatal)"
  expect_log 1 "$FAILOVER0" "failover of fake0 (the peer's device died)"
}

# A black hole while the receivers post one receive at a time (NCCL re-posts a slot only once the GPU
# consumed it): the re-sent chunks must not queue behind chunks of messages not yet posted.
run_lagging() {
  msg=$((1 << 20)) start_peers lagging 3500 RERAIL_STALL_MS=300 FAULT_PEER_RECV_AHEAD=1
  at 1000; ctl 0 "blackhole fake0" >/dev/null
  finish_peers
  expect_clean
  expect_log 0 "$FAILOVER0" "failover of fake0 (black hole)"
}

# Small eager messages (complete before the ack, re-sent from rerail's copy) with the port going down,
# and with a black hole and a lagging receiver (the stash takes re-sent duplicates).
run_eager() {
  msg=4096 start_peers eager 3000 RERAIL_EAGER_MAX=16384 RERAIL_FAILBACK_MIN_MS=50 RERAIL_FAILBACK_MAX_MS=200
  at 1000; ctl 0 "down fake0" >/dev/null
  at 2000; ctl 0 "up fake0" >/dev/null
  finish_peers
  expect_clean
  expect_log 0 "$FAILOVER0" "failover of fake0 (port down)"
}
run_eagerlag() {
  msg=8192 start_peers eagerlag 3500 RERAIL_EAGER_MAX=16384 RERAIL_STALL_MS=300 FAULT_PEER_RECV_AHEAD=1
  at 1000; ctl 0 "blackhole fake0" >/dev/null
  finish_peers
  expect_clean
  expect_log 0 "$FAILOVER0" "failover of fake0 (black hole)"
}

# Striping over both rails (RERAIL_POLICY=stripe) while fake1 flaps on host 1 every 200 ms for 5 s.
run_stripeflap() {
  start_peers stripeflap 6500 RERAIL_POLICY=stripe RERAIL_FAILBACK_MIN_MS=20 RERAIL_FAILBACK_MAX_MS=100
  local k
  for ((k = 0; k < 25; k++)); do
    at $((1000 + 200 * k))
    if ((k % 2 == 0)); then ctl 1 "down fake1" >/dev/null; else ctl 1 "up fake1" >/dev/null; fi
  done
  ctl 1 "up fake1" >/dev/null
  finish_peers
  expect_clean
  expect_log 1 'ib fake1 to peer rail 1 failed \(.*\): re-sending' "failover of fake1"
}

# fake0 of host 0 is down from the start (FAKEVERBS_PORT_DOWN): the plugin offers fake1 only there, the
# comm comes up on what works and streams.
run_connectdown() {
  ports[0]=fake1
  env0="FAKEVERBS_PORT_DOWN=fake0:1" start_peers connectdown 2000
  finish_peers
  expect_clean
}

# Each peer stops calling the plugin for 2 s, at different times: not a rail fault, no link may fail.
run_pause() {
  env0="FAULT_PEER_PAUSE=700:2000" env1="FAULT_PEER_PAUSE=1500:2000" \
    start_peers pause 4000 RERAIL_STALL_MS=200 RERAIL_HEARTBEAT_MS=50
  finish_peers
  expect_clean
  local h
  for h in 0 1; do
    # (the connection-level "closed the connection with a receive pending" at close is not a link: the
    # peers leave receives posted after the last message, and the first to close ends the other's; nor
    # is a link of a closing send comm, driven until its 0-byte terminator's ack is read, that reads
    # the peer's close with it: "failed (receiver closed the connection")
    ! grep "failed (" "$work/log$h" | grep -v "closed the connection with a receive pending" |
      grep -qv "failed (receiver closed the connection" ||
      why+=" host$h: a link was failed while the peer only paused;"
  done
  [ "$(field "$r0" maxgap_ms)" -ge 1500 ] 2>/dev/null || why+=" host0's pause did not stop the stream;"
}

# Host 1 is killed (every rail and the bootstrap stream close at once; its fake HCA answers nothing):
# host 0's test() must fail with ncclRemoteError long before RERAIL_GIVEUP_MS (60 s).
run_peerkill() {
  start_peers peerkill 20000 RERAIL_GIVEUP_MS=60000
  at 1000
  kill -9 "$(pgrep -P "${pids[1]}" -x net_fault_peer || echo "${pids[1]}")" 2>/dev/null
  local killed
  killed=$(now_ms)
  { wait "${pids[0]}"; } 2>/dev/null
  local waited=$(($(now_ms) - killed))
  finish_peers
  why=""  # host 1 printed nothing (killed); host 0 alone is judged
  [ -n "$r0" ] || why+=" host0 printed no RESULT;"
  [ "$(field "$r0" bad)" = 0 ] || why+=" host0 bad=$(field "$r0" bad);"
  [ "$(field "$r0" hang)" = 0 ] || why+=" host0 hang=$(field "$r0" hang);"
  [ "$(field "$r0" err)" = 6 ] || why+=" host0 err=$(field "$r0" err) (want 6, ncclRemoteError);"
  [ "$e0" = 4 ] || why+=" host0 exit $e0 (want 4: error);"
  [ $waited -lt 10000 ] || why+=" host0 took $waited ms to fail;"
  kill_figures="host0 failed $waited ms after the kill"
}

# The 0-byte end-of-stream marker, its sender closing the comm as soon as it completed (eager: when
# posted), on host 0's fake0 black-holed after warm-up (FAULT_PEER_LAST, one message): only the closing
# comm can re-send it (RETRY_EXC_ERR fails fake0, the marker goes again on fake1), so close must linger
# until it is acknowledged, not leave because a 0-byte send holds no eager byte. Host 1 must receive it;
# closeSend must return within its linger bound (1 s; < 3 s here). `eofdead`: both of host 0's ports
# black-holed, the marker cannot arrive. With grouped receives (maxRecvs 8, the IB default) the sender
# never gets the receive's announcement, so its isend is refused (NULL, as net_ib's without a CTS) until
# RERAIL_GIVEUP_MS (1.5 s here), then fails with ncclRemoteError: an error, never a hang; closeSend
# still returns within the bound.
run_eofclose() {
  local both=${1:-}
  env0="FAULT_PEER_LAST=send FAULT_PEER_CLOSE_NOW=1" env1="FAULT_PEER_LAST=recv" \
    start_peers eofclose 3000 FAULT_PEER_LAST_BYTES=0 RERAIL_STALL_MS=300 ${both:+RERAIL_GIVEUP_MS=1500}
  local _ closed
  for _ in $(seq 400); do
    grep -q READY "$work/out0" && grep -q READY "$work/out1" && break
    sleep 0.05
  done
  ctl 0 "blackhole fake0" >/dev/null
  [ -z "$both" ] || ctl 0 "blackhole fake1" >/dev/null
  echo GO >&6
  echo GO >&5
  finish_peers
  # eofdead: host 1 never gets the marker (hang=1, or an error once host 0 closed): host 0 alone is judged
  [ -z "$both" ] || why=$(tr ';' '\n' <<<"$why" | grep -v '^ *$' | grep -v host1 | sed 's/$/;/' | tr -d '\n')
  if [ -n "$both" ]; then
    [ "$e0" = 4 ] || why+=" host0 exit $e0 (want 4: error);"
    [ "$(field "$r0" err)" = 6 ] || why+=" host0 err=$(field "$r0" err) (want 6, ncclRemoteError, after RERAIL_GIVEUP_MS);"
  else
    [ "$e0" = 0 ] || why+=" host0 exit $e0;"
    [ "$(field "$r0" err)" = 0 ] || why+=" host0 err=$(field "$r0" err);"
    [ "$(field "$r0" sent)" = 1 ] || why+=" host0 did not complete the 0-byte send;"
  fi
  closed=$(sed -n 's/^CLOSED close_ms=//p' "$work/out0")
  [ -n "$closed" ] && [ "$closed" -lt 3000 ] || why+=" host0's closeSend took ${closed:-forever} ms (bound: 1 s linger);"
  eof_figures="closeSend ${closed:-?} ms"
  [ -z "$both" ] || return 0
  [ "$e1" = 0 ] || why+=" host1 exit $e1;"
  [ "$(field "$r1" recv)" = 1 ] || why+=" host1 never received the 0-byte marker (recv=$(field "$r1" recv) err=$(field "$r1" err));"
  expect_log 0 "$FAILOVER0" "failover of fake0 (black hole) while closing"
}
run_eofdead() { run_eofclose both; }

# ---- RERAIL_IB_TCP_FALLBACK: IB links and a TCP link to the same peer in one comm (issue 12 scope 5) ----

LASTRESORT='carries the traffic as the last resort'
IBBACK='takes the traffic back from the last resort, which carried [1-9][0-9]* chunks'

# Every IB port of host 0 down for 2.5 s, longer than RERAIL_GIVEUP_MS (1.5 s; `alldown` shows both comms
# fail then without a TCP link), with RERAIL_IB_TCP_FALLBACK=1 on both hosts: both directions go on over
# the comms' TCP links with no error and nothing lost (content, order, late writes checked), each send
# comm logs its TCP link taking over (WARN) and handing back to IB with a non-zero chunk count (INFO),
# fake0 fails back on both hosts, and each host sends > 4 MiB on fake0 again within 3 s of the up.
run_tcpfallback() {
  start_peers tcpfallback 7000 RERAIL_IB_TCP_FALLBACK=1 RERAIL_GIVEUP_MS=1500 RERAIL_FAILBACK_MIN_MS=50 \
    RERAIL_FAILBACK_MAX_MS=200
  local up0 up1 took0=-1 took1=-1 healed now b0 b1 h
  at 1000; ctl 0 "down fake0" >/dev/null; ctl 0 "down fake1" >/dev/null
  at 3500; ctl 0 "up fake0" >/dev/null; ctl 0 "up fake1" >/dev/null
  healed=$(now_ms)
  up0=$(counter 0 fake0 tx_bytes) up1=$(counter 1 fake0 tx_bytes)
  while [ $(($(now_ms) - healed)) -lt 3000 ] && { [ $took0 -lt 0 ] || [ $took1 -lt 0 ]; }; do
    sleep 0.05
    now=$(($(now_ms) - healed))
    b0=$(counter 0 fake0 tx_bytes) b1=$(counter 1 fake0 tx_bytes)
    [ $took0 -lt 0 ] && [ $((b0 - up0)) -gt $((4 << 20)) ] && took0=$now
    [ $took1 -lt 0 ] && [ $((b1 - up1)) -gt $((4 << 20)) ] && took1=$now
  done
  finish_peers
  expect_clean
  for h in 0 1; do
    expect_log $h "$LASTRESORT" "WARN: the TCP link carries the traffic"
    expect_log $h "$IBBACK" "INFO: an IB link takes the traffic back (with the chunks the TCP link carried)"
    expect_log $h "$FAILBACK0" "failback of fake0"
  done
  [ $took0 -ge 0 ] || why+=" host0 did not send 4 MiB on fake0 within 3 s of the up;"
  [ $took1 -ge 0 ] || why+=" host1 did not send 4 MiB on fake0 within 3 s of the up;"
  heal_figures="TCP carried $(grep -o 'which carried [0-9]* chunks' "$work/log0" | head -1 | tr -dc 0-9)/$(grep -o 'which carried [0-9]* chunks' "$work/log1" | head -1 | tr -dc 0-9) chunks, 4 MiB on fake0 after $took0/$took1 ms"
}

# The TCP link present, one IB port down and up (as `down`): fake1 takes over and the TCP link carries
# nothing (no last-resort WARN on either host).
run_tcpidle() {
  start_peers tcpidle 4000 RERAIL_IB_TCP_FALLBACK=1 RERAIL_FAILBACK_MIN_MS=50 RERAIL_FAILBACK_MAX_MS=200
  at 1000; ctl 0 "down fake0" >/dev/null
  at 2000; ctl 0 "up fake0" >/dev/null
  finish_peers
  expect_clean
  expect_log 0 "$FAILOVER0" "failover of fake0 (port down)"
  expect_log 0 "a TCP fallback link" "TCP link in the comm"
  local h
  for h in 0 1; do
    [ "$(count $h "$LASTRESORT")" = 0 ] || why+=" host$h: the TCP link carried data with fake1 up;"
  done
}

# Every IB port of host 1 down while connect / accept still run (as `earlydown`, both ports), up 2.5 s
# later, RERAIL_GIVEUP_MS 1.5 s: the connections are made and stream over their TCP links, then move to IB.
run_tcpearly() {
  start_peers tcpearly 5000 RERAIL_IB_TCP_FALLBACK=1 RERAIL_GIVEUP_MS=1500 RERAIL_FAILBACK_MIN_MS=50 RERAIL_FAILBACK_MAX_MS=200
  ctl 1 "down fake0" >/dev/null; ctl 1 "down fake1" >/dev/null
  at 2500; ctl 1 "up fake0" >/dev/null; ctl 1 "up fake1" >/dev/null
  finish_peers
  expect_clean
  local h
  for h in 0 1; do
    expect_log $h "$LASTRESORT" "WARN: the TCP link carries the traffic"
    expect_log $h "$IBBACK" "INFO: an IB link takes the traffic back"
  done
}

# 20 s of random faults (down, black hole, ack loss, heal) every 0.3-1 s on a random host and rail,
# never both rails of a pair at once; everything heals before the end.
run_soak() {
  start_peers soak 22000 RERAIL_STALL_MS=300 RERAIL_FAILBACK_MIN_MS=20 RERAIL_FAILBACK_MAX_MS=300
  local t=500 broken="" h r
  RANDOM=${IB_FAKE_FAULTS_SEED:-$$}
  echo "seed ${IB_FAKE_FAULTS_SEED:-$$}" >>"$work/sched"
  while [ $t -lt 19000 ]; do
    t=$((t + 300 + RANDOM % 700))
    at $t
    if [ -n "$broken" ]; then
      ctl "${broken% *}" "heal fake${broken#* }" >/dev/null
      broken=""
      continue
    fi
    h=$((RANDOM % 2)) r=$((RANDOM % 2))
    ctl $h "$(printf '%s\n' down blackhole ackloss | sed -n "$((RANDOM % 3 + 1))p") fake$r" >/dev/null
    broken="$h $r"
  done
  [ -z "$broken" ] || ctl "${broken% *}" "heal fake${broken#* }" >/dev/null
  finish_peers
  expect_clean
}

failed=0
echo "# ib_fake_faults: 2 hosts x 2 fake ports (FAKEVERBS_WIRE), RERAIL_TRANSPORT=ib, 256 KiB messages both ways"
echo "# figures host0/host1: msgs sent/received per direction, MB received, longest gap between receives"
for sc in "${scenarios[@]}"; do
  start=$(now_ms) heal_figures="" kill_figures="" eof_figures=""
  case $sc in
    down | blackhole | flap | alldown | heal | ackloss | txloss | txlossall | allblackhole | alldownup | fatal | earlydown | earlyblackhole | lagging | eager | eagerlag | stripeflap | connectdown | pause | \
      peerkill | eofclose | eofdead | soak | tcpfallback | tcpidle | tcpearly)
      env0="" env1="" msg="" ports=("fake0,fake1" "fake0,fake1")
      "run_$sc" ;;
    *) echo "ib_fake_faults: unknown scenario $sc" >&2; exit 2 ;;
  esac
  verdict "$sc" "$start" "$(seen)${heal_figures:+, $heal_figures}${kill_figures:+, $kill_figures}${eof_figures:+, $eof_figures}"
done
[ $failed -eq 0 ] || { echo "ib_fake_faults: $failed scenario(s) FAILED"; exit 1; }
echo "ib_fake_faults ok"
