#!/usr/bin/env bash
# validate-ib.sh — rerail's IB verbs transport (RERAIL_TRANSPORT=ib) on a real RDMA cluster, two nodes
# (issue 12). Runs on node A (rank 0, ib_write_bw client) and reaches node B (rank 1, ib_write_bw server,
# the pulled port) by ssh; passwordless ssh and the same build on both nodes (same path, or
# REMOTE_BUILD_DIR). Steps, in this order, each selectable with --steps / STEPS:
#   preflight  the ports rerail will use on each node (rerail-info: RERAIL_IB_HCA's selection, the GID
#              index NCCL's rule picks, link layer, netdev, LID), rail k = A's k-th port <-> B's k-th
#              port (the plugin pairs them so), and `ib_write_bw` over each rail, B server / A client:
#              the GB/s the wire gives (perftest; NOT RUN when ib_write_bw is missing on a node)
#   perf       rerail-perf, rank 0 on A and rank 1 on B, RERAIL_TRANSPORT=ib over every rail:
#              sendrecv + all_reduce, every value verified
#   failover   rerail-perf sendrecv loops of FAILOVER_ARGS while FAULT_CMD_DOWN runs on B (rail FAULT_RAIL)
#              FAULT_AT seconds after both ranks logged that rail's links up, FAULT_CMD_UP FAULT_FOR s later
#   nccl       nccl-tests all_reduce_perf + sendrecv_perf with NCCL_NET_PLUGIN=rerail (the built
#              libnccl-net-rerail.so) and RERAIL_TRANSPORT=ib, through scripts/run-nccl-tests.sh
#              (mpirun; a baseline run with NCCL's own IB first); NOT RUN without GPUs, nccl-tests or mpirun
# Pass criteria (printed at the start and judged at the end):
#   preflight: A and B list the same number of ports (>= 1); every rail's ib_write_bw gives a figure
#   perf:      both ranks exit 0; every row #wrong 0 and every table "Out of bounds values : 0 OK";
#              both ranks' logs show the IB transport (offering IB ports ..., transports: ib(...), never
#              transports: tcp) and a link up on every rail of their node; sendrecv busbw at the largest
#              size / the sum of the rails' ib_write_bw >= MIN_RATIO (0.8, issue 12; needs preflight);
#              all_reduce's ratio is printed, not judged (its reduction runs on the CPU)
#   failover:  the same verification (#wrong 0, exit 0, IB only); FAULT_CMD_DOWN and FAULT_CMD_UP ran
#              during the run and exited 0; a failover WARN naming the pulled rail (either node); the
#              rail failed back (a "probing -> healthy" line of that rail) after FAULT_CMD_UP
#   nccl:      run-nccl-tests.sh's verdict per binary (exit 0, NET/rerail loaded, "Out of bounds
#              values : 0 OK" in every table; busbw ratio to NCCL's own IB printed)
# Prints PASS/FAIL/NOT RUN lines and a summary; exits 0 only if nothing failed and something passed,
# 1 otherwise, 2 on bad usage. --dry-run prints every command with the host it would run on
# ("[A host] ..." / "[B host] ..."), runs nothing (the rails are then those RERAIL_IB_HCA names, or
# placeholders).
#
# Usage: validate-ib.sh --peer B_HOST [--steps "preflight perf failover nccl"] [--build-dir DIR] [--out DIR]
#                       [--dry-run]
#        HOSTS="a b" validate-ib.sh ...      (a: this node's name as B reaches it, b: the peer)
# Env knobs [defaults]:
#   HOSTS ["<hostname> <peer>"]  A_ADDR [first of HOSTS]: rank 0's rendezvous address, A's mpirun name
#   B_ADDR [B]: the ib_write_bw server's address   SSH [ssh -o BatchMode=yes]: called as $SSH B "bash -c '..'"
#   STEPS [preflight perf failover nccl]   BUILD_DIR [build]   REMOTE_BUILD_DIR [the absolute BUILD_DIR]
#   OUT_DIR [a temp dir on A: rerail-info.*.txt, wbw.rail*.txt, perf.*.log, failover.*.log, nccl/]
#   RERAIL_*: every one set here goes to both ranks and to rerail-info. RERAIL_IB_HCA picks the rails
#     (NCCL's syntax, e.g. "=mlx5_0:1,mlx5_1:1"); RERAIL_IB_GID_INDEX, RERAIL_IB_TIMEOUT,
#     RERAIL_IB_RETRY_CNT; RERAIL_TCP_IFNAME: the interface of the handshake streams (net_plugin/README.md)
#   IB_WRITE_BW [ib_write_bw]   WBW_ARGS [-s 8388608 -D 5]   WBW_PORT [18515; rail k: +k]   WBW_TIMEOUT [60 s]
#   PERF_ARGS [-b 8 -e 512M -f 4 -n 20 -w 5 -c 1]   PERF_CHANNELS [2 x rails; channel c uses rail c mod rails]
#   PERF_PORT [29517: the first run's rendezvous port on A, then +1 per run]   PERF_TIMEOUT [600 s]
#   MIN_RATIO [0.8]: busbw = size / the faster time of the largest size (2 ranks: nccl-tests' busbw for
#     sendrecv and all_reduce alike); sendrecv moves data both ways at once, ib_write_bw one way
#   FAILOVER_ARGS [-b 64M -e 64M -w 2 -c 1 --duration 15]   FAULT_RAIL [0]   FAULT_AT [5 s]   FAULT_FOR [10 s]
#   FAULT_CMD_DOWN / FAULT_CMD_UP: run on B; default by B's link layer (rerail-info): RoCE
#     "sudo -n ip link set dev <netdev> down|up"; InfiniBand "sudo -n ibportstate -C <hca> -P <port> <lid>
#     <port> disable|enable" (infiniband-diags, the local-CA form of its man page; not tried on hardware).
#     Both need root; sudo -n fails at once where no password-less rule exists. An interrupted run still
#     runs FAULT_CMD_UP on exit.
#   NCCL_TESTS_DIR [./nccl-tests/build]   GPUS_PER_NODE [the GPUs nvidia-smi -L lists on A]
#   NCCL_TESTS_ARGS [extra run-nccl-tests.sh arguments, e.g. "-e 1G --mpirun-args '--mca btl tcp,self'";
#     a NIC pulled during the nccl-tests runs too (RoCE): "--fault-node B --fault-nic ens1f0np0"]
#   NCCL_MIN_RATIO [0: the busbw ratio rerail / NCCL's own IB is reported, not judged]
# Where it ran: only between two QEMU guests over Soft-RoCE (ctest -L rxe: ib_rxe_validate_ib, every
# step but nccl), never on a physical HCA or cluster. CI checks the --dry-run plan, the argument errors
# and the verdicts on stand-ins (validate_ib_dry_run, validate_ib_verdicts).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
ROOT=$PWD

usage() { sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
die() { echo "validate-ib.sh: $*" >&2; exit 2; }

dry=0 peer="" steps_arg=""
need() { if [ $# -lt 2 ] || [ -z "$2" ] || [[ $2 == --* ]]; then die "$1 needs a value"; fi; }
while [ $# -gt 0 ]; do
  case $1 in
    --peer) need "$@"; peer=$2; shift 2 ;;
    --steps) need "$@"; steps_arg=$2; shift 2 ;;
    --build-dir) need "$@"; BUILD_DIR=$2; shift 2 ;;
    --out) need "$@"; OUT_DIR=$2; shift 2 ;;
    --dry-run) dry=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown argument '$1' (--help lists the options)" ;;
  esac
done

# ---- configuration and its checks (exit 2) ---------------------------------------------------------
STEPS=${steps_arg:-${STEPS:-preflight perf failover nccl}}
STEPS=${STEPS//,/ }
for s in $STEPS; do
  case $s in preflight|perf|failover|nccl) ;; *) die "unknown step '$s' in STEPS (allowed: preflight perf failover nccl)" ;; esac
done
[ -n "${STEPS// /}" ] || die "STEPS is empty (allowed: preflight perf failover nccl)"
read -r -a hosts <<<"${HOSTS:-}"
if [ -n "$peer" ]; then
  [ ${#hosts[@]} -eq 0 ] || [ "${hosts[1]:-}" = "$peer" ] || die "--peer '$peer' and HOSTS='${HOSTS:-}' disagree"
  [ ${#hosts[@]} -gt 0 ] || hosts=("$(hostname)" "$peer")
fi
[ ${#hosts[@]} -gt 0 ] || die "no peer: give --peer B_HOST or HOSTS=\"a b\" (A = this node, B = the node reached by ssh)"
[ ${#hosts[@]} -eq 2 ] || die "HOSTS must name exactly two nodes (this one, then the peer), got '${HOSTS:-}'"
for h in "${hosts[@]}"; do [[ $h =~ ^[A-Za-z0-9._-]+$ ]] || die "not a host name: '$h'"; done
[ "${hosts[0]}" != "${hosts[1]}" ] || die "HOSTS names the same node twice ('${hosts[0]}')"
A=${hosts[0]} B=${hosts[1]}
A_ADDR=${A_ADDR:-$A} B_ADDR=${B_ADDR:-$B}
read -r -a ssh_cmd <<<"${SSH:-ssh -o BatchMode=yes}"
BUILD_DIR=${BUILD_DIR:-build}
case $BUILD_DIR in /*) ;; *) BUILD_DIR=$ROOT/$BUILD_DIR ;; esac
REMOTE_BUILD_DIR=${REMOTE_BUILD_DIR:-$BUILD_DIR}
IB_WRITE_BW=${IB_WRITE_BW:-ib_write_bw} WBW_ARGS=${WBW_ARGS:--s 8388608 -D 5} WBW_PORT=${WBW_PORT:-18515} WBW_TIMEOUT=${WBW_TIMEOUT:-60}
PERF_ARGS=${PERF_ARGS:--b 8 -e 512M -f 4 -n 20 -w 5 -c 1} PERF_PORT=${PERF_PORT:-29517}
PERF_TIMEOUT=${PERF_TIMEOUT:-600} MIN_RATIO=${MIN_RATIO:-0.8}
FAILOVER_ARGS=${FAILOVER_ARGS:--b 64M -e 64M -w 2 -c 1 --duration 15}
FAULT_RAIL=${FAULT_RAIL:-0} FAULT_AT=${FAULT_AT:-5} FAULT_FOR=${FAULT_FOR:-10}
NCCL_TESTS_DIR=${NCCL_TESTS_DIR:-./nccl-tests/build} NCCL_MIN_RATIO=${NCCL_MIN_RATIO:-0}
for v in WBW_PORT WBW_TIMEOUT PERF_PORT PERF_TIMEOUT FAULT_RAIL FAULT_AT FAULT_FOR; do
  [[ ${!v} =~ ^[0-9]+$ ]] || die "$v must be a non-negative integer, got '${!v}'"
done
for v in ${PERF_CHANNELS:+PERF_CHANNELS} ${GPUS_PER_NODE:+GPUS_PER_NODE}; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "$v must be a positive integer, got '${!v}'"
done
for v in MIN_RATIO NCCL_MIN_RATIO; do [[ ${!v} =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "$v must be a number, got '${!v}'"; done
if [ "$dry" = 0 ]; then
  OUT_DIR=${OUT_DIR:-$(mktemp -d /tmp/rerail-validate-ib.XXXXXX)}
  mkdir -p "$OUT_DIR" || die "cannot create OUT_DIR '$OUT_DIR'"
else
  OUT_DIR=${OUT_DIR:-/tmp/rerail-validate-ib.XXXXXX}
fi
step() { [[ " $STEPS " == *" $1 "* ]]; }

# Every RERAIL_* variable of this environment, for both nodes (RERAIL_TRANSPORT is set per run).
rr_env=""
while IFS='=' read -r k v; do
  [ "$k" = RERAIL_TRANSPORT ] || rr_env+=" $k=$(printf %q "$v")"
done < <(env | grep -E '^RERAIL_[A-Z0-9_]+=' | sort)

# ---- running commands on A and B -------------------------------------------------------------------
fails=0 passes=0 notruns=0 summary=()
pass()   { echo "PASS: $*"; passes=$((passes + 1)); summary+=("PASS: $*"); }
fail()   { echo "FAIL: $*"; fails=$((fails + 1)); summary+=("FAIL: $*"); }
notrun() { echo "NOT RUN: $*"; notruns=$((notruns + 1)); summary+=("NOT RUN: $*"); }

# on A|B CMD: run the bash command line CMD on node A (here) or B (through $SSH); --dry-run prints it.
on() {
  local who=$1 cmd=$2
  if [ "$dry" = 1 ]; then
    if [ "$who" = A ]; then echo "[A $A] $cmd"; else echo "[B $B] $cmd"; fi
    return 0
  fi
  if [ "$who" = A ]; then bash -c "$cmd"; else "${ssh_cmd[@]}" "$B" "bash -c $(printf %q "$cmd")"; fi
}
# Prefix every line with the arrival time on A ([EPOCHREALTIME]), to order events of both nodes.
stamp() { local l; while IFS= read -r l; do printf '[%s] %s\n' "$EPOCHREALTIME" "$l"; done; }
unstamp() { sed -E 's/^\[[0-9.]+\] //' "$@"; }
bdir() { if [ "$1" = A ]; then echo "$BUILD_DIR"; else echo "$REMOTE_BUILD_DIR"; fi; }
# shellcheck disable=SC2016  # a sed bracket expression, not a shell expansion
re_escape() { printf '%s' "$1" | sed 's/[][\.*^$()+?{}|/]/\\&/g'; }

# ---- the plan --------------------------------------------------------------------------------------
echo "# validate-ib: A=$A (rank 0, $BUILD_DIR) B=$B (rank 1, $REMOTE_BUILD_DIR), steps: $STEPS"
echo "# B's commands run as: ${ssh_cmd[*]} $B \"bash -c '<command>'\"; logs in $OUT_DIR"
echo "# RERAIL_* for both nodes:${rr_env:- (none)}"
cat <<EOF
# pass criteria:
#   preflight: A and B list the same number of IB/RoCE ports (>= 1); ib_write_bw gives a figure on every rail
#   perf:      #wrong 0 on every row and 'Out of bounds values : 0 OK', both ranks exit 0; both nodes on the
#              IB transport only (no TCP fallback) with a link up on every rail; sendrecv busbw (largest
#              size) / sum of ib_write_bw >= $MIN_RATIO
#   failover:  as perf (#wrong 0, IB only) with rail $FAULT_RAIL of B down ${FAULT_AT}s after its links came up, for ${FAULT_FOR}s: the fault
#              commands exit 0, a failover WARN names the rail, the rail fails back after the up command
#   nccl:      run-nccl-tests.sh: exit 0, NET/rerail loaded, 'Out of bounds values : 0 OK' in every table
EOF

# ---- rails: rerail-info on both nodes ----------------------------------------------------------------
# One line per port: name dev port linklayer(ib|roce) gidindex netdev lid speed_mbps
ports_of() {  # rerail-info text on stdin
  awk '
    function flush() { if (name != "") print name, dev, port, ll, gid, (nd == "" ? "-" : nd), lid, sp; name = "" }
    /^IB devices/ { ib = 1; next }
    ib && /^  skipped:/ { next }
    ib && /^  [^ ]+ port [0-9]+:$/ { flush(); name = $1; dev = name; sub(/:.*/, "", dev); port = $3; sub(/:/, "", port)
                                     ll = "ib"; gid = 0; nd = ""; lid = 0; sp = 0; next }
    ib && /^    link layer:/ { ll = ($0 ~ /Ethernet/) ? "roce" : "ib"; next }
    ib && /^    gid:/ { gid = $3; if ($(NF - 1) == "on") nd = $NF; next }
    ib && /^    speed:/ { sp = $2; next }
    ib && /^    lid:/ { lid = $2; next }
    ib && /^[^ ]/ { flush(); ib = 0 }
    END { flush() }'
}
info_cmd() { echo "env$rr_env $(bdir "$1")/tools/rerail-info --plugin $(bdir "$1")/net_plugin/libnccl-net-rerail.so; ibv_devinfo -l"; }
PA=() PB=()   # "name dev port ll gid netdev lid speed" per rail
rails=0 rails_why=""
discover() {
  local who f
  for who in A B; do
    f=$OUT_DIR/rerail-info.$who.txt
    on "$who" "$(info_cmd "$who")" >"$f" 2>&1 \
      || echo "(exit $?)" >>"$f"
  done
  mapfile -t PA < <(ports_of <"$OUT_DIR/rerail-info.A.txt")
  mapfile -t PB < <(ports_of <"$OUT_DIR/rerail-info.B.txt")
  echo "# ports A ($A): ${#PA[@]}; B ($B): ${#PB[@]} (rerail-info, RERAIL_IB_HCA='${RERAIL_IB_HCA:-}')"
  local k
  for ((k = 0; k < ${#PA[@]} || k < ${#PB[@]}; k++)); do
    echo "#   rail $k: A ${PA[$k]:-(none)} | B ${PB[$k]:-(none)}   (name dev port linklayer gid netdev lid Mbps)"
  done
  rails=$(( ${#PA[@]} < ${#PB[@]} ? ${#PA[@]} : ${#PB[@]} ))
  if [ ${#PA[@]} -eq 0 ] || [ ${#PB[@]} -eq 0 ]; then
    rails_why="no usable IB/RoCE port on $([ ${#PA[@]} -eq 0 ] && echo "A ($(grep -m1 'IB devices' "$OUT_DIR/rerail-info.A.txt"))") $([ ${#PB[@]} -eq 0 ] && echo "B ($(grep -m1 'IB devices' "$OUT_DIR/rerail-info.B.txt"))")"
  fi
}
# --dry-run: the rails RERAIL_IB_HCA names (port 1 when it gives none), else one placeholder rail.
dry_rails() {
  local spec=${RERAIL_IB_HCA:-} item dev port
  spec=${spec#=}
  PA=() PB=()
  if [ -n "$spec" ] && [[ $spec != ^* ]]; then
    IFS=, read -r -a items <<<"$spec"
    for item in "${items[@]}"; do
      dev=${item%%:*} port=1
      [[ $item == *:* ]] && port=${item#*:}
      PA+=("$item $dev $port ? ${RERAIL_IB_GID_INDEX:-<gid>} <netdev-of-$dev> <lid-of-$dev:$port> ?")
    done
  else
    PA=("<hca> <hca> <port> ? ${RERAIL_IB_GID_INDEX:-<gid>} <netdev> <lid> ?")
  fi
  PB=("${PA[@]}")
  rails=${#PA[@]}
  echo "# rails: rerail-info on each node lists them; the plan below shows ${rails} rail(s): ${PA[*]%% *}"
}

field() { local -a f; read -r -a f <<<"$1"; echo "${f[$2]}"; }   # field "rec" N (0 name 1 dev 2 port 3 ll 4 gid 5 netdev 6 lid)

# ---- 1. preflight ----------------------------------------------------------------------------------
WBW=()   # GB/s per rail
wbw_sum=""
preflight() {
  local k ra rb srv cli log have
  for who in A B; do
    have=$(on "$who" "command -v $IB_WRITE_BW || echo missing")
    if [ "$dry" = 0 ] && [[ $have == *missing* || -z $have ]]; then
      notrun "preflight ib_write_bw (perftest not installed on $who: apt-get install perftest / yum install perftest)"
      return
    fi
  done
  for ((k = 0; k < rails; k++)); do
    ra=${PA[$k]} rb=${PB[$k]} log=$OUT_DIR/wbw.rail$k
    srv="timeout $WBW_TIMEOUT $IB_WRITE_BW -d $(field "$rb" 1) -i $(field "$rb" 2) -x $(field "$rb" 4) $WBW_ARGS -F --report_gbits -p $((WBW_PORT + k))"
    cli="for i in 1 2 3 4 5 6 7 8 9 10; do sleep 1; timeout $WBW_TIMEOUT $IB_WRITE_BW -d $(field "$ra" 1) -i $(field "$ra" 2) -x $(field "$ra" 4) $WBW_ARGS -F --report_gbits -p $((WBW_PORT + k)) $B_ADDR && break; done"
    if [ "$dry" = 1 ]; then on B "$srv &"; on A "$cli"; continue; fi
    on B "$srv" >"$log.B.txt" 2>&1 &
    local spid=$!
    on A "$cli" >"$log.A.txt" 2>&1
    wait "$spid"
    # perftest's result row: #bytes #iterations BW-peak BW-average[Gb/sec] MsgRate
    local gbits
    gbits=$(awk '$1 ~ /^[0-9]+$/ && NF >= 5 && $4 ~ /^[0-9.]+$/ {g = $4} END {print g}' "$log.A.txt")
    if [ -n "$gbits" ]; then
      WBW[k]=$(awk -v g="$gbits" 'BEGIN {printf "%.3f", g / 8}')
      pass "preflight rail $k ($(field "$ra" 0) -> $B:$(field "$rb" 0)): ib_write_bw ${WBW[k]} GB/s ($gbits Gb/s)"
    else
      fail "preflight rail $k ($(field "$ra" 0) -> $B:$(field "$rb" 0)): no ib_write_bw figure (see $log.A.txt: $(grep -m1 -iE 'error|fail|unable' "$log.A.txt"))"
    fi
  done
  [ "$dry" = 1 ] && return
  if [ ${#WBW[@]} -eq "$rails" ]; then
    wbw_sum=$(printf '%s\n' "${WBW[@]}" | awk '{s += $1} END {printf "%.3f", s}')
    echo "FIGURE ib_write_bw sum over $rails rail(s): $wbw_sum GB/s"
  fi
}

# ---- 2./3. rerail-perf across the nodes ------------------------------------------------------------
perf_port=$((PERF_PORT - 1))   # run_pair takes the next port: the first run uses PERF_PORT
# perf_cmd WHO RANK ARGS: rerail-perf as rank RANK of 2 on node WHO, rendezvous at A.
perf_cmd() {
  local who=$1 rank=$2 args=$3 d
  d=$(bdir "$who")
  echo "env PMI_RANK=$rank PMI_SIZE=2 RERAIL_TRANSPORT=ib NCCL_DEBUG=INFO$rr_env timeout $((PERF_TIMEOUT + 60))" \
       "$d/tools/rerail-perf/rerail-perf $args --plugin $d/net_plugin/libnccl-net-rerail.so" \
       "--rendezvous $A_ADDR:$perf_port --no-progress --timeout $PERF_TIMEOUT"
}
# run_pair LABEL ARGS [FAULT]: both ranks (logs $OUT_DIR/LABEL.A.log / .B.log, stamped); FAULT: run the
# fault commands meanwhile (their log: LABEL.fault.log). Sets rc_a rc_b.
rc_a=0 rc_b=0
run_pair() {
  local label=$1 args=$2 fault=${3:-} pb fpid=""
  perf_port=$((perf_port + 1))
  if [ "$dry" = 1 ]; then
    on B "$(perf_cmd B 1 "$args") &"
    [ -n "$fault" ] && fault_plan
    on A "$(perf_cmd A 0 "$args")"
    return
  fi
  { on B "$(perf_cmd B 1 "$args")"; echo "## exit $?"; } 2>&1 | stamp >"$OUT_DIR/$label.B.log" &
  pb=$!
  if [ -n "$fault" ]; then run_fault "$label" >"$OUT_DIR/$label.fault.log" 2>&1 & fpid=$!; fi
  { on A "$(perf_cmd A 0 "$args")"; echo "## exit $?"; } 2>&1 | stamp >"$OUT_DIR/$label.A.log"
  wait "$pb"
  [ -n "$fpid" ] && wait "$fpid"
  rc_a=$(unstamp "$OUT_DIR/$label.A.log" | awk '$1 == "##" && $2 == "exit" {r = $3} END {print (r == "" ? "none" : r)}')
  rc_b=$(unstamp "$OUT_DIR/$label.B.log" | awk '$1 == "##" && $2 == "exit" {r = $3} END {print (r == "" ? "none" : r)}')
  return 0
}

# Rows of rank 0's tables: coll size oop_busbw oop_wrong ip_busbw ip_wrong oop_us ip_us
perf_rows() {
  unstamp "$1" | awk '/^# rerail-perf [a-z_]+:/ {c = $3; sub(/:/, "", c)}
                      !/^#/ && NF == 13 && $1 ~ /^[0-9]+$/ {print c, $1, $8, $9, $12, $13, $6, $10}'
}
# busbw (GB/s, 3 decimals) of COLL's largest size from the faster of its two times: size / time. With
# 2 ranks that is nccl-tests' busbw for sendrecv (factor 1) and all_reduce (2(n-1)/n = 1), and it keeps
# the precision rerail-perf's 2-decimal GB/s column loses on slow fabrics.
top_busbw() {
  awk -v c="$1" '$1 == c {t = ($7 < $8 ? $7 : $8); b = (t > 0 ? sprintf("%.3f", $2 / t / 1e3) : "")} END {print b}' <<<"$2"
}
# verify LABEL NCOLLS: exit codes, #wrong, out-of-bounds lines, the IB transport and a link on every rail.
verify() {
  local label=$1 ncoll=$2 la=$OUT_DIR/$1.A.log lb=$OUT_DIR/$1.B.log ok=1 rows bad oob who log k rec name missing="" ibok=1
  rows=$(perf_rows "$la")
  bad=$(awk '$4 != "0" || $6 != "0"' <<<"$rows" | head -3 | tr '\n' ';')
  oob=$(unstamp "$la" | grep -c '^# Out of bounds values : 0 OK')
  if [ "$rc_a" = 0 ] && [ "$rc_b" = 0 ] && [ -n "$rows" ] && [ -z "$bad" ] && [ "$oob" = "$ncoll" ]; then
    pass "$label: both ranks exit 0, $(wc -l <<<"$rows") rows verified, #wrong 0, $oob x 'Out of bounds values : 0 OK'"
  else
    fail "$label: rank 0 exit $rc_a, rank 1 exit $rc_b, $(grep -c . <<<"$rows") rows, 'Out of bounds : 0 OK' $oob of $ncoll${bad:+, wrong rows: $bad} (see $la, $lb)"
    ok=0
  fi
  for who in A B; do
    log=$OUT_DIR/$label.$who.log
    if ! grep -q 'RERAIL_TRANSPORT=ib: offering IB ports' "$log" || ! grep -q 'transports: ib(' "$log" \
       || grep -q 'transports: tcp' "$log"; then
      fail "$label: node $who not on the IB transport only ($(unstamp "$log" | grep -m1 -o 'transports: [a-z]*([^)]*)' || echo 'no init line'))"
      ok=0 ibok=0; continue
    fi
    for ((k = 0; k < rails; k++)); do
      if [ "$who" = A ]; then rec=${PA[$k]}; else rec=${PB[$k]}; fi
      name=$(re_escape "$(field "$rec" 0)")
      grep -qE "\(ib $name to peer rail [0-9]+\): connecting -> healthy|link [0-9]+ up \(ib $name link " "$log" || missing+=" $who:$(field "$rec" 0)"
    done
  done
  if [ "$ibok" = 0 ]; then :
  elif [ -z "$missing" ]; then pass "$label: both nodes on IB only, a link up on each of the $rails rail(s) of each node"
  else fail "$label: no link came up on rail(s)$missing"; ok=0; fi
  [ "$ok" = 1 ]
}

perf() {
  local ch=${PERF_CHANNELS:-$((2 * rails))} rows sr ar
  run_pair perf "sendrecv,all_reduce $PERF_ARGS -C $ch"
  [ "$dry" = 1 ] && return
  verify perf 2
  rows=$(perf_rows "$OUT_DIR/perf.A.log")
  awk '{last[$1] = $0} END {for (c in last) {split(last[c], f, " ")
        printf "#   %-10s %12s B  busbw %s / %s GB/s (out-of-place / in-place)\n", f[1], f[2], f[3], f[5]}}' <<<"$rows"
  sr=$(top_busbw sendrecv "$rows") ar=$(top_busbw all_reduce "$rows")
  echo "FIGURE rerail-perf busbw at the largest size: sendrecv ${sr:-?} GB/s, all_reduce ${ar:-?} GB/s ($rails rail(s), $ch channels)"
  if [ -z "$wbw_sum" ]; then
    notrun "perf busbw / ib_write_bw ratio (no ib_write_bw figures: preflight not in STEPS or not run)"
  elif [ -z "$sr" ]; then
    fail "perf busbw / ib_write_bw ratio: no sendrecv row"
  else
    local r ra
    r=$(awk -v a="$sr" -v b="$wbw_sum" 'BEGIN {printf "%.3f", a / b}')
    ra=$(awk -v a="${ar:-0}" -v b="$wbw_sum" 'BEGIN {printf "%.3f", a / b}')
    echo "FIGURE all_reduce busbw / ib_write_bw sum: $ra (not judged: the reduction runs on the CPU)"
    if awk -v r="$r" -v m="$MIN_RATIO" 'BEGIN {exit !(r >= m)}'; then
      pass "perf: sendrecv busbw $sr GB/s / ib_write_bw sum $wbw_sum GB/s = $r >= $MIN_RATIO"
    else
      fail "perf: sendrecv busbw $sr GB/s / ib_write_bw sum $wbw_sum GB/s = $r < $MIN_RATIO"
    fi
  fi
}

# ---- 3. failover -----------------------------------------------------------------------------------
fault_down="" fault_up="" fault_pending=0
fault_cmds() {
  local rec=${PB[$FAULT_RAIL]} dev port ll nd lid
  dev=$(field "$rec" 1) port=$(field "$rec" 2) ll=$(field "$rec" 3) nd=$(field "$rec" 5) lid=$(field "$rec" 6)
  local roce_d="sudo -n ip link set dev $nd down" roce_u="sudo -n ip link set dev $nd up"
  local ib_d="sudo -n ibportstate -C $dev -P $port $lid $port disable" ib_u="sudo -n ibportstate -C $dev -P $port $lid $port enable"
  if [ -n "${FAULT_CMD_DOWN:-}" ]; then fault_down=$FAULT_CMD_DOWN
  elif [ "$ll" = roce ]; then fault_down=$roce_d
  elif [ "$ll" = ib ]; then fault_down=$ib_d
  else fault_down="$roce_d   # RoCE; on InfiniBand: $ib_d"; fi
  if [ -n "${FAULT_CMD_UP:-}" ]; then fault_up=$FAULT_CMD_UP
  elif [ "$ll" = roce ]; then fault_up=$roce_u
  elif [ "$ll" = ib ]; then fault_up=$ib_u
  else fault_up="$roce_u   # RoCE; on InfiniBand: $ib_u"; fi
}
fault_plan() {
  echo "[A $A] # in the background of the run: wait until both ranks log a link of rail $FAULT_RAIL up (connecting -> healthy), then"
  echo "[A $A] sleep $FAULT_AT"
  on B "$fault_down"
  echo "[A $A] sleep $FAULT_FOR"
  on B "$fault_up"
}
# run_fault LABEL: the timeline of one fault, stamped. The clock starts once both ranks have a link of the
# rail up: a port pulled before its links connected only delays them (no failover to see).
run_fault() {
  local la=$OUT_DIR/$1.A.log lb=$OUT_DIR/$1.B.log na nb i
  na=$(re_escape "$(field "${PA[$FAULT_RAIL]}" 0)") nb=$(re_escape "$(field "${PB[$FAULT_RAIL]}" 0)")
  for ((i = 0; i < 10 * PERF_TIMEOUT; i++)); do
    grep -qE "\(ib $na to peer rail [0-9]+\): connecting -> healthy" "$la" 2>/dev/null \
      && grep -qE "\(ib $nb to peer rail [0-9]+\): connecting -> healthy" "$lb" 2>/dev/null && break
    grep -q '^\[[0-9.]*\] ## exit' "$la" 2>/dev/null && { echo "[$EPOCHREALTIME] rank 0 ended before rail $FAULT_RAIL came up"; return; }
    sleep 0.1
  done
  echo "[$EPOCHREALTIME] rail $FAULT_RAIL up on both ranks"
  sleep "$FAULT_AT"
  echo "[$EPOCHREALTIME] down: $fault_down"
  on B "$fault_down"; echo "[$EPOCHREALTIME] down rc $?"
  sleep "$FAULT_FOR"
  echo "[$EPOCHREALTIME] up: $fault_up"
  on B "$fault_up"; echo "[$EPOCHREALTIME] up rc $?"
}
failover() {
  local ch=${PERF_CHANNELS:-$((2 * rails))}
  if [ "$FAULT_RAIL" -ge "$rails" ]; then fail "failover: FAULT_RAIL $FAULT_RAIL but only $rails rail(s)"; return; fi
  fault_cmds
  echo "# failover: rail $FAULT_RAIL of B ($(field "${PB[$FAULT_RAIL]}" 0)): down '$fault_down', up '$fault_up'"
  fault_pending=1
  run_pair failover "sendrecv $FAILOVER_ARGS -C $ch" fault
  [ "$dry" = 1 ] && return
  fault_pending=0
  local fl=$OUT_DIR/failover.fault.log la=$OUT_DIR/failover.A.log lb=$OUT_DIR/failover.B.log
  verify failover 1
  local t_down t_up rc_d rc_u na nb
  t_down=$(awk '$2 == "down:" {gsub(/[][]/, "", $1); print $1}' "$fl")
  t_up=$(awk '$2 == "up:" {gsub(/[][]/, "", $1); print $1}' "$fl")
  rc_d=$(awk '$2 == "down" && $3 == "rc" {print $4}' "$fl") rc_u=$(awk '$2 == "up" && $3 == "rc" {print $4}' "$fl")
  if [ "$rc_d" = 0 ] && [ "$rc_u" = 0 ]; then pass "failover: fault commands ran on B (down ${FAULT_AT}s after rail $FAULT_RAIL's links came up, up ${FAULT_FOR}s later), exit 0"
  else fail "failover: fault command exit codes down '${rc_d:-not run}', up '${rc_u:-not run}' (see $fl; root/sudo needed)"; fi
  na=$(re_escape "$(field "${PA[$FAULT_RAIL]}" 0)") nb=$(re_escape "$(field "${PB[$FAULT_RAIL]}" 0)")
  local wa wb
  wa=$(grep -E "WARN.*ib ${na}[ )].*failed|WARN.*\(ib $na link [0-9]+\) failed" "$la" | head -2)
  wb=$(grep -E "WARN.*ib ${nb}[ )].*failed|WARN.*\(ib $nb link [0-9]+\) failed" "$lb" | head -2)
  if [ -n "$wa$wb" ]; then
    pass "failover: WARN naming rail $FAULT_RAIL seen ($(printf '%s\n' "$wa" "$wb" | grep -c .) line(s), e.g. $(unstamp <<<"${wb:-$wa}" | head -1 | cut -c1-160))"
    local t_w
    t_w=$(printf '%s\n' "$wa" "$wb" | grep . | sed -E 's/^\[([0-9.]+)\].*/\1/' | sort -n | head -1)
    [ -n "$t_down" ] && echo "FIGURE failover: down command -> first failover WARN: $(awk -v a="$t_down" -v b="$t_w" 'BEGIN {printf "%.0f", (b - a) * 1000}') ms"
  else
    fail "failover: no failover WARN naming rail $FAULT_RAIL (A: $(field "${PA[$FAULT_RAIL]}" 0), B: $(field "${PB[$FAULT_RAIL]}" 0)) in $la / $lb"
  fi
  local t_fb
  t_fb=$(grep -hE "\(ib ($na|$nb) to peer rail [0-9]+\): probing -> healthy" "$la" "$lb" \
         | sed -E 's/^\[([0-9.]+)\].*/\1/' | awk -v u="${t_up:-9e18}" '$1 > u' | sort -n | head -1)
  if [ -n "$t_fb" ]; then
    pass "failover: rail $FAULT_RAIL failed back (probing -> healthy) $(awk -v a="$t_up" -v b="$t_fb" 'BEGIN {printf "%.1f", b - a}') s after the up command"
  else
    fail "failover: rail $FAULT_RAIL did not fail back after the up command (no 'probing -> healthy' after it; longer --duration in FAILOVER_ARGS?)"
  fi
}
cleanup() {  # an interrupted failover step must not leave B's port down
  if [ "$fault_pending" = 1 ] && [ "$dry" = 0 ] && [ -n "$fault_up" ]; then
    echo "# cleanup: $fault_up on B"; on B "$fault_up" || true
  fi
}
trap cleanup EXIT

# ---- 4. nccl-tests through scripts/run-nccl-tests.sh ------------------------------------------------
nccl() {
  local why="" gpn=${GPUS_PER_NODE:-} t args=() kv
  if [ "$dry" = 0 ]; then
    if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >"$OUT_DIR/nvidia-smi.A.txt" 2>&1; then why="no GPU on A (nvidia-smi)"
    elif ! on B "nvidia-smi -L" >"$OUT_DIR/nvidia-smi.B.txt" 2>&1; then why="no GPU on B (nvidia-smi)"
    elif ! command -v mpirun >/dev/null 2>&1; then why="mpirun not found"
    elif [ "$REMOTE_BUILD_DIR" != "$BUILD_DIR" ]; then why="REMOTE_BUILD_DIR differs from BUILD_DIR (mpirun exports one LD_LIBRARY_PATH)"
    else
      for t in all_reduce sendrecv; do [ -x "$NCCL_TESTS_DIR/${t}_perf" ] || why="$NCCL_TESTS_DIR/${t}_perf not found (NCCL_TESTS_DIR)"; done
    fi
    if [ -n "$why" ]; then notrun "nccl: nccl-tests with NCCL_NET_PLUGIN=rerail ($why)"; return; fi
    [ -n "$gpn" ] || gpn=$(grep -c '^GPU ' "$OUT_DIR/nvidia-smi.A.txt")
  fi
  args=(--hosts "$A_ADDR,$B" --gpus-per-node "${gpn:-8}" --tests "all_reduce,sendrecv" --nccl-tests "$NCCL_TESTS_DIR"
        --rerail-lib "$BUILD_DIR/net_plugin" --env RERAIL_TRANSPORT=ib --out "$OUT_DIR/nccl" --min-ratio "$NCCL_MIN_RATIO")
  while IFS= read -r kv; do args+=(--env "$kv"); done < <(env | grep -E '^RERAIL_[A-Z0-9_]+=' | grep -v '^RERAIL_TRANSPORT=' | sort)
  [ -n "${RERAIL_IB_HCA:-}" ] && args+=(--env "NCCL_IB_HCA=$RERAIL_IB_HCA")   # the baseline on the same ports
  local extra=()
  eval "extra=(${NCCL_TESTS_ARGS:-})"
  if [ "$dry" = 1 ]; then
    echo "[A $A] scripts/run-nccl-tests.sh ${args[*]} ${extra[*]}   # prints, with --dry-run:"
    scripts/run-nccl-tests.sh "${args[@]}" "${extra[@]}" --dry-run | sed "s/^/[A $A]   /"
    return
  fi
  local log=$OUT_DIR/nccl.txt rc=0
  scripts/run-nccl-tests.sh "${args[@]}" "${extra[@]}" 2>&1 | tee "$log"; rc=${PIPESTATUS[0]}
  local line n=0
  while IFS= read -r line; do
    n=$((n + 1))
    if [[ $line =~ ^[a-z_]+\ +PASS ]]; then pass "nccl: $line"; else fail "nccl: $line"; fi
  done < <(sed -n '/^== summary/,$p' "$log" | grep -E '^[a-z_]+ +(PASS|FAIL)')
  [ "$n" -gt 0 ] || fail "nccl: run-nccl-tests.sh exit $rc without a summary (see $log)"
}

# ---- run -------------------------------------------------------------------------------------------
if [ "$dry" = 1 ]; then
  on A "$(info_cmd A)"; on B "$(info_cmd B)"; dry_rails
else
  if ! reach=$(on B "echo reached" 2>&1) || [[ $reach != *reached* ]]; then
    fail "cannot run commands on B (${ssh_cmd[*]} $B)${reach:+: $(tail -n 1 <<<"$reach")}"
    echo "---- validate-ib: $passes passed, $fails failed, $notruns not run"; exit 1
  fi
  if step preflight || step perf || step failover; then
    for who in A B; do
      d=$(bdir $who)
      if ! on "$who" "test -x $d/tools/rerail-perf/rerail-perf && test -x $d/tools/rerail-info && test -f $d/net_plugin/libnccl-net-rerail.so"; then
        fail "node $who: $d/tools/rerail-perf/rerail-perf, tools/rerail-info or net_plugin/libnccl-net-rerail.so missing (build them there; BUILD_DIR / REMOTE_BUILD_DIR)"
        echo "---- validate-ib: $passes passed, $fails failed, $notruns not run"; exit 1
      fi
    done
    discover
  fi
fi
ib_steps_ok=1
if [ "$dry" = 0 ] && { step preflight || step perf || step failover; } && [ -n "$rails_why" ]; then
  fail "rails: $rails_why"; ib_steps_ok=0
  for s in preflight perf failover; do step $s && notrun "$s (no rails)"; done
elif [ "$dry" = 0 ] && { step preflight || step perf || step failover; } && [ ${#PA[@]} -ne ${#PB[@]} ]; then
  fail "rails: A has ${#PA[@]} port(s), B ${#PB[@]}: the plugin pairs them in order, only $rails rail(s) are used"
fi
if [ "$ib_steps_ok" = 1 ]; then
  step preflight && { echo "== preflight"; preflight; }
  step perf && { echo "== perf"; perf; }
  step failover && { echo "== failover"; failover; }
fi
step nccl && { echo "== nccl"; nccl; }
[ "$dry" = 1 ] && { echo "# dry run: nothing was run"; exit 0; }

echo "== validate-ib summary ($A <-> $B, $rails rail(s); logs in $OUT_DIR)"
printf '  %s\n' "${summary[@]}"
echo "---- validate-ib: $passes passed, $fails failed, $notruns not run"
[ "$fails" -eq 0 ] && [ "$passes" -gt 0 ]
