#!/usr/bin/env bash
# run-nccl-tests.sh — validate rerail on a real GPU cluster with nccl-tests (issue 16).
#
# For each nccl-tests binary (all_reduce_perf, ...): one run WITHOUT rerail (NCCL_NET_PLUGIN=none:
# NCCL's own IB/socket transport, the baseline) and one WITH rerail (NCCL_NET_PLUGIN=rerail), under
# mpirun or srun. During the rerail run a fault can be injected on one node and NIC: after
# --fault-at seconds `ssh NODE sudo -n ip link set dev NIC down`, after --fault-for more seconds `up`.
# A rerail run passes when it exits 0, its log shows rerail was loaded (the `NET/rerail : rerail`
# init line; NCCL silently falls back to its own transport when a plugin fails to load) and every
# table closes with `# Out of bounds values : 0 OK`. Prints the busbw ratio rerail / baseline per
# binary (nccl-tests' `# Avg bus bandwidth`, and the out-of-place busbw of the largest size).
#
# Usage: run-nccl-tests.sh --hosts h1,h2 [options]          (see --help)
# Exit: 0 every rerail run passed (and every ratio >= --min-ratio), 1 a run failed, 2 bad usage.
# --dry-run prints the commands and the environment, runs nothing (what CI checks).
set -euo pipefail

usage() {
  cat <<'U'
Usage: run-nccl-tests.sh --hosts H1,H2[,...] [options]
  --launcher mpirun|srun   how ranks start (default mpirun; srun inside a Slurm allocation)
  --hosts LIST             comma-separated node names (required with mpirun; srun: default the allocation)
  --gpus-per-node N        ranks (GPUs) per node (default 8)
  --nccl-tests DIR         directory holding all_reduce_perf etc. (default $NCCL_TESTS_DIR or ./nccl-tests/build)
  --tests LIST             binaries without _perf (default all_reduce,all_gather,reduce_scatter,alltoall)
  -b SIZE -e SIZE -f N     sizes as nccl-tests (default -b 8 -e 8G -f 2)
  -n N -w N                iterations and warm-up (default -n 20 -w 5); results are always checked (-c 1)
  --rerail-lib DIR         where libnccl-net-rerail.so is on every node (default /opt/rerail/lib)
  --tuner                  also NCCL_TUNER_PLUGIN=rerail in the rerail run
  --env K=V                extra environment for both runs (repeatable)
  --no-baseline            skip the runs without rerail (no ratios)
  --fault-node NODE        node on which to take a NIC down during each rerail run (with --fault-nic)
  --fault-nic IFACE        the NIC (netdev name, e.g. ens1f0np0)
  --fault-at SECONDS       when, after the rerail run started (default 20)
  --fault-for SECONDS      how long the NIC stays down (default 20; 0: never brought back up)
  --min-ratio R            fail when a busbw ratio rerail/baseline is below R (default 0: report only)
  --out DIR                logs (default ./nccl-tests-YYYYmmdd-HHMMSS)
  --mpirun-args "ARGS"     extra mpirun arguments (e.g. "--mca btl tcp,self")
  --srun-args "ARGS"       extra srun arguments
  --dry-run                print the commands, run nothing
U
}

die() { echo "run-nccl-tests.sh: $*" >&2; exit 2; }
is_uint() { [[ $1 =~ ^[0-9]+$ ]]; }
is_size() { [[ $1 =~ ^[0-9]+[KMGkmg]?$ ]]; }

launcher=mpirun hosts="" gpn=8 nt_dir=${NCCL_TESTS_DIR:-./nccl-tests/build}
tests=all_reduce,all_gather,reduce_scatter,alltoall
minb=8 maxb=8G step=2 iters=20 warm=5 rlib=/opt/rerail/lib tuner=0 baseline=1
fnode="" fnic="" fat=20 ffor=20 minratio=0 out="" mpi_extra="" srun_extra="" dry=0
extra_env=()
need() { [ $# -ge 2 ] && [ -n "$2" ] && [[ $2 != --* ]] || die "$1 needs a value"; }
while [ $# -gt 0 ]; do
  case $1 in
    --launcher) need "$@"; launcher=$2; shift 2 ;;
    --hosts) need "$@"; hosts=$2; shift 2 ;;
    --gpus-per-node) need "$@"; gpn=$2; shift 2 ;;
    --nccl-tests) need "$@"; nt_dir=$2; shift 2 ;;
    --tests) need "$@"; tests=$2; shift 2 ;;
    -b) need "$@"; minb=$2; shift 2 ;;
    -e) need "$@"; maxb=$2; shift 2 ;;
    -f) need "$@"; step=$2; shift 2 ;;
    -n) need "$@"; iters=$2; shift 2 ;;
    -w) need "$@"; warm=$2; shift 2 ;;
    --rerail-lib) need "$@"; rlib=$2; shift 2 ;;
    --tuner) tuner=1; shift ;;
    --env) need "$@"; [[ $2 =~ ^[A-Za-z_][A-Za-z0-9_]*=.*$ ]] || die "--env wants NAME=VALUE, got '$2'"
           extra_env+=("$2"); shift 2 ;;
    --no-baseline) baseline=0; shift ;;
    --fault-node) need "$@"; fnode=$2; shift 2 ;;
    --fault-nic) need "$@"; fnic=$2; shift 2 ;;
    --fault-at) need "$@"; fat=$2; shift 2 ;;
    --fault-for) need "$@"; ffor=$2; shift 2 ;;
    --min-ratio) need "$@"; minratio=$2; shift 2 ;;
    --out) need "$@"; out=$2; shift 2 ;;
    --mpirun-args) need "$@"; mpi_extra=$2; shift 2 ;;
    --srun-args) need "$@"; srun_extra=$2; shift 2 ;;
    --dry-run) dry=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown argument '$1' (--help lists the options)" ;;
  esac
done

case $launcher in mpirun|srun) ;; *) die "--launcher must be mpirun or srun, got '$launcher'" ;; esac
if [ -z "$hosts" ]; then
  [ "$launcher" = srun ] && [ -n "${SLURM_JOB_NODELIST:-}" ] || die "--hosts is required (with srun: or run inside an allocation)"
fi
[[ -z $hosts || $hosts =~ ^[A-Za-z0-9._-]+(,[A-Za-z0-9._-]+)*$ ]] || die "--hosts must be comma-separated node names, got '$hosts'"
is_uint "$gpn" && [ "$gpn" -ge 1 ] || die "--gpus-per-node must be a positive integer, got '$gpn'"
for v in "$iters" "$warm" "$step" "$fat" "$ffor"; do is_uint "$v" || die "not a non-negative integer: '$v'"; done
is_size "$minb" && is_size "$maxb" || die "-b/-e must be sizes like 8, 64K, 8G"
[[ $minratio =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "--min-ratio must be a number, got '$minratio'"
[[ $tests =~ ^[a-z_]+(,[a-z_]+)*$ ]] || die "--tests must be a comma-separated list like all_reduce,all_gather"
known=" all_reduce all_gather reduce_scatter alltoall sendrecv broadcast reduce gather scatter hypercube "
IFS=, read -r -a test_list <<<"$tests"
for t in "${test_list[@]}"; do [[ $known == *" $t "* ]] || die "unknown nccl-tests binary '${t}_perf'"; done
if [ -n "$fnode$fnic" ]; then
  [ -n "$fnode" ] && [ -n "$fnic" ] || die "--fault-node and --fault-nic go together"
  [[ $fnic =~ ^[A-Za-z0-9._-]+$ ]] || die "--fault-nic must be an interface name, got '$fnic'"
  [[ $fnode =~ ^[A-Za-z0-9._-]+$ ]] || die "--fault-node must be a node name, got '$fnode'"
  if [ -n "$hosts" ] && [[ ",$hosts," != *",$fnode,"* ]]; then die "--fault-node '$fnode' is not one of --hosts ($hosts)"; fi
fi
[ -n "$out" ] || out=./nccl-tests-$(date +%Y%m%d-%H%M%S)

IFS=, read -r -a host_list <<<"$hosts"
nnodes=${#host_list[@]}
[ -n "$hosts" ] || nnodes=${SLURM_JOB_NUM_NODES:-1}
np=$((nnodes * gpn))

# The environment of one run: $1 = rerail|baseline.
run_env() {
  local e=(NCCL_DEBUG=INFO "NCCL_DEBUG_SUBSYS=INIT,NET")
  if [ "$1" = rerail ]; then
    e+=(NCCL_NET_PLUGIN=rerail "LD_LIBRARY_PATH=$rlib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}")
    [ "$tuner" = 1 ] && e+=(NCCL_TUNER_PLUGIN=rerail)
  else
    e+=(NCCL_NET_PLUGIN=none)
  fi
  printf '%s\n' "${e[@]}" ${extra_env[@]+"${extra_env[@]}"}
}

# The launch command of one run as a string (printed by --dry-run, run with bash -c): the run's
# environment is set on the launcher (`env K=V ... mpirun -x K ...` / `srun --export=ALL`), so values
# with commas or colons need no launcher-specific quoting.
launch_cmd() {
  local kind=$1 t=$2 env_lines cmd kv
  local bin="$nt_dir/${t}_perf"
  mapfile -t env_lines < <(run_env "$kind")
  local args="-b $minb -e $maxb -f $step -g 1 -n $iters -w $warm -c 1"
  cmd="env"
  for kv in "${env_lines[@]}"; do cmd+=" ${kv%%=*}=\"${kv#*=}\""; done
  if [ "$launcher" = mpirun ]; then
    local hl="" h
    for h in "${host_list[@]}"; do hl+="${hl:+,}$h:$gpn"; done
    cmd+=" mpirun -np $np -H $hl --bind-to none"
    for kv in "${env_lines[@]}"; do cmd+=" -x ${kv%%=*}"; done
    [ -n "$mpi_extra" ] && cmd+=" $mpi_extra"
  else
    cmd+=" srun -N $nnodes --ntasks-per-node=$gpn --gpus-per-node=$gpn"
    [ -n "$hosts" ] && cmd+=" -w $hosts"
    cmd+=" --export=ALL"
    [ -n "$srun_extra" ] && cmd+=" $srun_extra"
  fi
  echo "$cmd $bin $args"
}

fault_cmds() {  # down and up commands, one per line
  echo "ssh -o BatchMode=yes $fnode sudo -n ip link set dev $fnic down"
  echo "ssh -o BatchMode=yes $fnode sudo -n ip link set dev $fnic up"
}

echo "# run-nccl-tests: launcher $launcher, $nnodes node(s) x $gpn GPU(s) = $np ranks, tests ${test_list[*]}"
echo "# rerail run env: $(run_env rerail | tr '\n' ' ')"
[ "$baseline" = 1 ] && echo "# baseline run env: $(run_env baseline | tr '\n' ' ')"
if [ -n "$fnode" ]; then
  mapfile -t fc < <(fault_cmds)
  echo "# fault in every rerail run: at +${fat}s: ${fc[0]}"
  [ "$ffor" -gt 0 ] && echo "#                          at +$((fat + ffor))s: ${fc[1]}"
fi

if [ "$dry" = 1 ]; then
  echo "mkdir -p $out"
  for t in "${test_list[@]}"; do
    [ "$baseline" = 1 ] && echo "$(launch_cmd baseline "$t") > $out/${t}.baseline.log 2>&1"
    if [ -n "$fnode" ]; then
      echo "( sleep $fat; ${fc[0]}$([ "$ffor" -gt 0 ] && echo "; sleep $ffor; ${fc[1]}") ) &"
    fi
    echo "$(launch_cmd rerail "$t") > $out/${t}.rerail.log 2>&1"
  done
  exit 0
fi

for t in "${test_list[@]}"; do [ -x "$nt_dir/${t}_perf" ] || die "$nt_dir/${t}_perf not found (--nccl-tests DIR)"; done
command -v "$launcher" >/dev/null || die "$launcher not found"
mkdir -p "$out"

# Average busbw and the out-of-place busbw of the largest size from a log.
avg_busbw() { awk -F: '/# Avg bus bandwidth/ {gsub(/ /, "", $2); print $2; exit}' "$1"; }
last_busbw() { awk '!/^#/ && NF >= 13 && $1 ~ /^[0-9]+$/ {b = $8} END {print b}' "$1"; }

fails=0
summary=()
for t in "${test_list[@]}"; do
  if [ "$baseline" = 1 ]; then
    echo "== $t: baseline (NCCL_NET_PLUGIN=none)"
    bash -c "$(launch_cmd baseline "$t")" >"$out/$t.baseline.log" 2>&1 || echo "   baseline exited $? (see $out/$t.baseline.log)"
  fi
  echo "== $t: rerail (NCCL_NET_PLUGIN=rerail)"
  fpid=""
  if [ -n "$fnode" ]; then
    ( sleep "$fat"; echo "$(date +%T) ${fc[0]}"; frc=0; eval "${fc[0]}" || frc=$?; echo "rc $frc"
      if [ "$ffor" -gt 0 ]; then
        sleep "$ffor"; echo "$(date +%T) ${fc[1]}"; frc=0; eval "${fc[1]}" || frc=$?; echo "rc $frc"
      fi
    ) >"$out/$t.fault.log" 2>&1 &
    fpid=$!
  fi
  rc=0
  bash -c "$(launch_cmd rerail "$t")" >"$out/$t.rerail.log" 2>&1 || rc=$?
  if [ -n "$fpid" ]; then
    wait "$fpid" || true
    # The run may end before the fault: then it tested nothing about the fault.
    grep -q ' down$' "$out/$t.fault.log" || echo "   note: the fault was not injected during the run"
    [ "$ffor" -gt 0 ] && ! grep -q ' up$' "$out/$t.fault.log" && eval "${fc[1]}" || true
  fi
  log=$out/$t.rerail.log verdict=PASS why=""
  if [ -n "$fpid" ] && grep -q '^rc [1-9]' "$out/$t.fault.log"; then
    verdict=FAIL; why+=" a fault command failed (see $out/$t.fault.log);"
  fi
  [ "$rc" = 0 ] || { verdict=FAIL; why+=" exit $rc;"; }
  grep -q 'NET/rerail : rerail ' "$log" || { verdict=FAIL; why+=" rerail not loaded (no 'NET/rerail : rerail' line);"; }
  ntab=$(grep -c '# Out of bounds values' "$log" || true)
  nok=$(grep -c '# Out of bounds values : 0 OK' "$log" || true)
  [ "$ntab" -gt 0 ] && [ "$ntab" = "$nok" ] || { verdict=FAIL; why+=" 'Out of bounds values : 0 OK' $nok of $ntab;"; }
  ratio="n/a" lratio="n/a"
  if [ "$baseline" = 1 ]; then
    ra=$(avg_busbw "$log") ba=$(avg_busbw "$out/$t.baseline.log") rl=$(last_busbw "$log") bl=$(last_busbw "$out/$t.baseline.log")
    ratio=$(awk -v r="${ra:-0}" -v b="${ba:-0}" 'BEGIN {print (b > 0 ? sprintf("%.3f", r / b) : "n/a")}')
    lratio=$(awk -v r="${rl:-0}" -v b="${bl:-0}" 'BEGIN {print (b > 0 ? sprintf("%.3f", r / b) : "n/a")}')
    if [ "$ratio" != n/a ] && awk -v r="$ratio" -v m="$minratio" 'BEGIN {exit !(r < m)}'; then
      verdict=FAIL; why+=" avg busbw ratio $ratio < $minratio;"
    fi
  fi
  [ "$verdict" = PASS ] || fails=$((fails + 1))
  summary+=("$(printf '%-16s %-4s avg busbw ratio %-6s largest-size busbw ratio %-6s%s' "$t" "$verdict" "$ratio" "$lratio" "$why")")
done
echo "== summary (logs in $out)"
printf '%s\n' "${summary[@]}"
[ "$fails" = 0 ]
