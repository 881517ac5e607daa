#!/usr/bin/env bash
# rerail on a real GPU (issue 13; facts: docs in reference/gpu-validation.md).
#
# Runs torch.distributed (NCCL backend), 2 ranks on one GPU with distinct NCCL_HOSTID, through
# libnccl-net-rerail.so on loopback rails, with the profiler (and the tuner when built) loaded:
#   1. host-only plugin (ptrSupport HOST: NCCL stages through its own mapped host buffers)
#   2. GPU buffers offered to the plugin (RERAIL_FORCE_STAGING=1, which implies RERAIL_GPU_BUFFERS=1;
#      NCCL_NET_GDR_LEVEL=SYS): NCCL hands rerail cudaMalloc'd buffers (GDRDMA) and rerail stages
#      them through host slots with the CUDA driver: pinned slots, then pageable (RERAIL_STAGING_SLOTS=0)
#   3. two network namespaces joined by 2 veth rails (scripts/netns-rails.sh), one rank in each,
#      rail 1 of host 1 pulled (link down), then black-holed (iptables DROP), mid-run and healed (root,
#      netns and veth needed, iptables for the black hole; else NOT RUN)
# checks every op's result, that NCCL's logs show NET/rerail for every peer, then runs the kernels'
# tests (on the GPU: rerail-kernels-gpu-test, also under compute-sanitizer when present) and benchmark.
# Prints PASS/FAIL/NOT RUN lines and exits 0 only if nothing failed and something ran. Without a GPU it stops at once with a FAIL line saying why.
#
# A GPU machine without the build's dependencies: scripts/bundle-for-gpu.sh here, then run there.
# Env: BUILD_DIR (default build), PYTHON (default python3), OUT_DIR (logs; default a temp dir),
# RANK_TIMEOUT (s per torch rank, 300), STALL_DUMP_S (a torch run whose logs stay unchanged this long,
# 45, gets every thread of each rank dumped to OUT_DIR/NAME.rankR.stacks: eu-stack or gdb, else
# /proc's kernel stacks and wait channels; once per run; then, with STALL_KILL=1 (default), the ranks
# are stopped so a stall costs ~STALL_DUMP_S, not RANK_TIMEOUT), SANITIZER_TIMEOUT (s, 300), VALIDATE_FAULT_ITERS (60),
# FAULT_KINDS (netns faults, "down blackhole"), FAULT_RUNS (runs per kind, 1), STEPS (default "host gpu plugin netns kernels": the parts to run;
# add "gpumatrix" for the GPU-buffer stall of issue 13: GPU buffers under NCCL with one suspect taken
# away per variant, MATRIX_RUNS (1) runs each, every stalled run's threads dumped:
#   base      RERAIL_GPU_BUFFERS=1 NCCL_NET_GDR_LEVEL=SYS (GPU chunks staged, host chunks direct)
#   simple    + NCCL_PROTO=Simple (no LL / LL128 lines written into GPU buffers by a copy)
#   noeager   + RERAIL_EAGER_MAX=0 (no eager copy at isend, no stashed chunk copied at irecv)
#   noread    + NCCL_NET_GDR_READ=0 (sends from NCCL's host buffers: only receives land in GPU memory)
#   onestream + RERAIL_TCP_STREAMS=1 (one stream, one staging slot and one CUDA stream per link)
#   e.g. STEPS="gpumatrix" MATRIX_RUNS=2 RANK_TIMEOUT=120 scripts/validate-gpu.sh).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
BUILD_DIR=${BUILD_DIR:-build}
PYTHON=${PYTHON:-python3}
OUT_DIR=${OUT_DIR:-$(mktemp -d /tmp/rerail-validate-gpu.XXXXXX)}
mkdir -p "$OUT_DIR"
fails=0; passes=0
pass()   { echo "PASS: $*"; passes=$((passes + 1)); }
fail()   { echo "FAIL: $*"; fails=$((fails + 1)); }
notrun() { echo "NOT RUN: $*"; }
finish() {
  echo "---- validate-gpu: $passes passed, $fails failed; logs in $OUT_DIR"
  [[ $fails -eq 0 && $passes -gt 0 ]] && exit 0 || exit 1
}

# ---- 0. is there a GPU? ----------------------------------------------------------------------------
why=""
if ! command -v nvidia-smi >/dev/null 2>&1; then
  why="nvidia-smi not found (no NVIDIA driver on this machine)"
elif ! nvidia-smi -L >"$OUT_DIR/nvidia-smi.txt" 2>&1; then
  why="nvidia-smi failed: $(head -1 "$OUT_DIR/nvidia-smi.txt")"
elif ! "$PYTHON" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  why="torch missing or torch.cuda.is_available() is False ($PYTHON)"
fi
if [[ -n "$why" ]]; then
  fail "no usable GPU: $why"
  for s in "torch 2 ranks host-only plugin" "torch 2 ranks GPU buffers + RERAIL_FORCE_STAGING=1" \
           "NET/rerail for every peer" "profiler/tuner loaded" "netns rails with a fault" \
           "rerail-stage-bench"; do notrun "$s (no GPU)"; done
  finish
fi
echo "GPU: $(head -1 "$OUT_DIR/nvidia-smi.txt")"
mode=$(nvidia-smi --query-gpu=compute_mode --format=csv,noheader | head -1)
[[ "$mode" == "Default" ]] || fail "compute mode is '$mode', two processes need Default"
"$PYTHON" -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version())'

NET="$PWD/$BUILD_DIR/net_plugin/libnccl-net-rerail.so"
PROF=$(ls "$PWD/$BUILD_DIR"/profiler_plugin/libnccl-profiler-rerail.so 2>/dev/null)
TUNER=$(ls "$PWD/$BUILD_DIR"/tuner_plugin/libnccl-tuner-rerail.so 2>/dev/null)
[[ -f "$NET" ]] || { fail "$NET not built (cmake --build $BUILD_DIR)"; finish; }

# ---- 1./2. torch runs ------------------------------------------------------------------------------
# A stalled run's threads, for the next look at it: user stacks (eu-stack, else gdb) of every thread of
# the rank's python process, and per thread its name, kernel wait channel and kernel stack (root).
dump_stacks() {  # pid, file
  local pid=$1 out=$2 t
  {
    echo "# $(date -u +%FT%TZ) pid $pid: $(tr '\0' ' ' </proc/"$pid"/cmdline 2>/dev/null)"
    if command -v eu-stack >/dev/null 2>&1; then timeout 60 eu-stack -p "$pid" 2>&1
    elif command -v gdb >/dev/null 2>&1; then
      timeout 120 gdb -p "$pid" -batch -nx -ex 'set pagination off' -ex 'thread apply all bt' 2>&1
    else echo "(neither eu-stack nor gdb: kernel side only)"; fi
    for t in /proc/"$pid"/task/*; do
      echo "## thread ${t##*/} $(cat "$t/comm" 2>/dev/null) wchan=$(cat "$t/wchan" 2>/dev/null) syscall=$(cut -d' ' -f1 "$t/syscall" 2>/dev/null)"
      cat "$t/stack" 2>/dev/null
    done
  } >"$out" 2>&1
}
# Runs beside the ranks: once their logs stop growing for STALL_DUMP_S, dumps each rank once.
watch_stall() {  # name, timeout pids...
  local name=$1; shift
  local last="" same=0 r p child
  while :; do
    sleep 5
    local alive=0
    for p in "$@"; do kill -0 "$p" 2>/dev/null && alive=1; done
    [[ $alive -eq 1 ]] || return 0
    local now; now=$(cat "$OUT_DIR/$name".rank*.log 2>/dev/null | wc -c)
    if [[ "$now" == "$last" ]]; then same=$((same + 5)); else same=0; last=$now; fi
    if [[ $same -ge ${STALL_DUMP_S:-45} ]]; then
      r=0
      for p in "$@"; do
        child=$(pgrep -P "$p" | head -1)   # timeout's child: the rank (through stdbuf's exec)
        [[ -n "$child" ]] && dump_stacks "$child" "$OUT_DIR/$name.rank$r.stacks"
        r=$((r + 1))
      done
      echo "$name: no log output for ${same} s: threads dumped to $OUT_DIR/$name.rank*.stacks"
      if [[ ${STALL_KILL:-1} == 1 ]]; then
        for p in "$@"; do pkill -TERM -P "$p" 2>/dev/null; done
        echo "$name: stopped after the dump (STALL_KILL=1)"
      fi
      return 0
    fi
  done
}
# Env of run_torch: NETNS (a netns-rails.sh prefix: rank r runs in host r's namespace on its rails),
# FAULT (a function run in the background while the ranks run).
run_torch() {  # name, extra env...
  local name=$1; shift
  local port=$(( 20000 + RANDOM % 20000 )) pids=() r rc=0 master=127.0.0.1 ifs=lo boot=lo
  local -a nsexec=() linebuf=()
  # NCCL's INFO lines go to a fully buffered stdout: a rank killed by the timeout would lose its last ones
  command -v stdbuf >/dev/null 2>&1 && linebuf=(stdbuf -oL -eL)
  if [[ -n "${NETNS:-}" ]]; then
    master=$(RERAIL_NETNS_PREFIX=$NETNS scripts/netns-rails.sh addr 0 0); ifs=rail; boot=rail0
  fi
  for r in 0 1; do
    [[ -n "${NETNS:-}" ]] && nsexec=(ip netns exec "$NETNS-h$r")
    "${nsexec[@]}" env MASTER_ADDR=$master MASTER_PORT=$port WORLD_SIZE=2 RANK=$r NCCL_HOSTID=host$r \
        NCCL_NET_PLUGIN="$NET" NCCL_NET=rerail NCCL_SOCKET_IFNAME=$boot RERAIL_TCP_IFNAME=$ifs \
        NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_MNNVL_ENABLE=0 NCCL_NVLS_ENABLE=0 \
        NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,ENV,TUNING \
        ${PROF:+NCCL_PROFILER_PLUGIN=$PROF} ${TUNER:+NCCL_TUNER_PLUGIN=$TUNER} \
        TORCH_NCCL_ASYNC_ERROR_HANDLING=0 PYTHONFAULTHANDLER=1 "$@" \
        timeout "${RANK_TIMEOUT:-300}" "${linebuf[@]}" "$PYTHON" scripts/validate-gpu.py >"$OUT_DIR/$name.rank$r.log" 2>&1 &
    pids+=($!)
  done
  local fpid="" wpid
  if [[ -n "${FAULT:-}" ]]; then "$FAULT" "$OUT_DIR/$name.rank0.log" & fpid=$!; fi
  watch_stall "$name" "${pids[@]}" & wpid=$!
  for r in 0 1; do wait "${pids[$r]}" || rc=1; done
  [[ -n "$fpid" ]] && wait "$fpid"
  wait "$wpid"
  local logs=("$OUT_DIR/$name".rank*.log)
  local wrong ok
  wrong=$(grep -c '^WRONG' "${logs[@]}" | awk -F: '{s+=$2} END {print s+0}')
  ok=$(grep -c '^OK' "${logs[@]}" | awk -F: '{s+=$2} END {print s+0}')
  local result=0
  if [[ $rc -eq 0 && $wrong -eq 0 && $ok -gt 0 ]]; then pass "$name: $ok checked ops, 0 wrong"
  else
    fail "$name: exit $rc, $ok ok, $wrong wrong (see $OUT_DIR/$name.rank*.log)"; result=1
    grep -h '^WRONG' "${logs[@]}" | head -3
  fi
  grep -q 'Assigned NET plugin rerail\|Using network rerail' "${logs[@]}" \
    && pass "$name: NCCL assigned NET plugin rerail" || fail "$name: no 'Assigned NET plugin rerail' in the logs"
  local via other
  via=$(grep -ho 'via NET/[A-Za-z]*' "${logs[@]}" | sort | uniq -c | tr '\n' ' ')
  other=$(grep -ho 'via [A-Za-z/]*' "${logs[@]}" | grep -v 'via NET/rerail' | sort -u | tr '\n' ' ')
  if grep -q 'via NET/rerail' "${logs[@]}" && [[ -z "$other" ]]; then pass "$name: every peer via NET/rerail ($via)"
  else fail "$name: peers not all via NET/rerail (${via:-none}; others: ${other:-none})"; fi
  grep -q 'nNodes 2' "${logs[@]}" && pass "$name: nNodes 2" || fail "$name: NCCL did not see 2 nodes"
  if [[ -n "$PROF" ]]; then
    grep -qi 'PROFILER/rerail\|profiler.*rerail' "${logs[@]}" && pass "$name: profiler loaded" \
      || fail "$name: profiler plugin set but no PROFILER/rerail line"
  fi
  if [[ -n "$TUNER" ]]; then
    grep -qi 'TUNER/rerail\|tuner.*rerail' "${logs[@]}" && pass "$name: tuner loaded" \
      || fail "$name: tuner plugin set but no TUNER/rerail line"
  fi
  echo "$name" "GDRDMA: $(grep -c 'GDRDMA' "${logs[@]}" | awk -F: '{s+=$2} END {print s+0}') log lines"
  return $result
}
[[ -z "$PROF" ]] && notrun "profiler (not built)"
[[ -z "$TUNER" ]] && notrun "tuner (not built)"
STEPS=" ${STEPS:-host gpu plugin netns kernels} "
step() { [[ "$STEPS" == *" $1 "* ]]; }
step host && run_torch host-only
if step gpu; then
run_torch gpu-staged RERAIL_FORCE_STAGING=1 NCCL_NET_GDR_LEVEL=SYS
if grep -q 'GPU buffers offered' "$OUT_DIR"/gpu-staged.rank*.log && grep -q 'GDRDMA' "$OUT_DIR"/gpu-staged.rank*.log; then
  pass "gpu-staged: rerail offered GPU buffers and NCCL used them (GDRDMA)"
else
  fail "gpu-staged: GPU buffers not used ($(grep -ho 'GPU buffers not offered.*' "$OUT_DIR"/gpu-staged.rank*.log | head -1))"
fi
grep -hm1 -o 'staging: .*pinned slots.*\|staging slots stay pageable.*' "$OUT_DIR"/gpu-staged.rank0.log
# the same with pageable slots only (RERAIL_STAGING_SLOTS=0: every GPU chunk through the driver's bounce buffers)
run_torch gpu-staged-pageable RERAIL_FORCE_STAGING=1 NCCL_NET_GDR_LEVEL=SYS RERAIL_STAGING_SLOTS=0
fi

if step gpumatrix; then
  for v in base simple noeager noread onestream; do
    case $v in
      base) extra=() ;;
      simple) extra=(NCCL_PROTO=Simple) ;;
      noeager) extra=(RERAIL_EAGER_MAX=0) ;;
      noread) extra=(NCCL_NET_GDR_READ=0) ;;
      onestream) extra=(RERAIL_TCP_STREAMS=1) ;;
    esac
    for ((j = 1; j <= ${MATRIX_RUNS:-1}; j++)); do
      run_torch "gpumatrix-$v-$j" RERAIL_GPU_BUFFERS=1 NCCL_NET_GDR_LEVEL=SYS "${extra[@]}"
      [[ -f "$OUT_DIR/gpumatrix-$v-$j.rank0.stacks" ]] && echo "gpumatrix-$v-$j: STALLED (stacks in $OUT_DIR)"
    done
  done
fi

# GPU buffers through the plugin's ABI table directly (no NCCL: runs whether or not NCCL picks GDR)
PGT="$BUILD_DIR/tests/rerail-plugin-gpu-test"
if ! step plugin; then :
elif [[ -x "$PGT" ]]; then
  if RERAIL_TCP_IFNAME=lo "$PGT" "$NET" >"$OUT_DIR/plugin-gpu-test.log" 2>&1; then
    pass "rerail-plugin-gpu-test: $(grep -m1 '^checked' "$OUT_DIR/plugin-gpu-test.log")"
  else fail "rerail-plugin-gpu-test (see $OUT_DIR/plugin-gpu-test.log: $(grep -m1 FAIL "$OUT_DIR/plugin-gpu-test.log"))"; fi
  grep -m1 '^loopback' "$OUT_DIR/plugin-gpu-test.log"
else notrun "rerail-plugin-gpu-test (not built)"; fi

# ---- 3. netns rails with a fault mid-run -----------------------------------------------------------
pull_rail() {  # rank-0 log: wait for 40 checked ops, fault host 1's rail 1 ($FAULT_KIND) for 3 s, heal it
  local log=$1 i out=${1%.rank0.log}.fault.txt
  for ((i = 0; i < 600; i++)); do
    [[ $(grep -c '^OK' "$log" 2>/dev/null) -ge 40 ]] && break
    sleep 0.1
  done
  echo "fault: host 1 rail 1 $FAULT_KIND after $(grep -c '^OK' "$log") ops" >"$out"
  case $FAULT_KIND in
    down) RERAIL_NETNS_PREFIX=rrgpu scripts/netns-rails.sh fail 1 1 >>"$out" 2>&1 ;;
    blackhole) RERAIL_NETNS_PREFIX=rrgpu scripts/netns-rails.sh blackhole 1 1 >>"$out" 2>&1 ;;
  esac
  sleep 3
  RERAIL_NETNS_PREFIX=rrgpu scripts/netns-rails.sh heal 1 1 >>"$out" 2>&1
  echo "fault: healed after $(grep -c '^OK' "$log") ops" >>"$out"
}
why=""
if ! step netns; then why="not in STEPS"
elif [[ $(id -u) -ne 0 ]]; then why="not root"
elif ! ip netns add rrgpuprobe 2>"$OUT_DIR/netns-probe.txt"; then why="ip netns add failed: $(head -1 "$OUT_DIR/netns-probe.txt")"
else
  ip netns del rrgpuprobe
  if ! RERAIL_NETNS_PREFIX=rrgpu scripts/netns-rails.sh up 2 2 >"$OUT_DIR/netns-up.txt" 2>&1; then
    why="netns-rails.sh up 2 2 failed: $(tail -1 "$OUT_DIR/netns-up.txt")"
    RERAIL_NETNS_PREFIX=rrgpu scripts/netns-rails.sh down >/dev/null 2>&1
  fi
fi
if [[ -n "$why" ]]; then
  notrun "netns rails with a fault mid-run ($why)"
else
  k=0
  for kind in ${FAULT_KINDS:-down blackhole}; do
   for ((j = 1; j <= ${FAULT_RUNS:-1}; j++)); do
    k=$((k + 1)); n=netns-fault$k-$kind
    if [[ $kind == blackhole ]] && ! ip netns exec rrgpu-h1 iptables -w 5 -S >/dev/null 2>&1; then
      notrun "$n: no working iptables in the namespaces"; continue
    fi
    FAULT_KIND=$kind NETNS=rrgpu FAULT=pull_rail run_torch $n VALIDATE_ITERS=${VALIDATE_FAULT_ITERS:-60}; right=$?
    cat "$OUT_DIR/$n.fault.txt"
    seen=0
    grep -qE 'rail rail1 to peer .* failed|\(rail rail1[^)]*\) (failed|down)' "$OUT_DIR/$n".rank*.log && seen=1
    if [[ $right -eq 0 && $seen -eq 1 ]] && grep -q 'healed' "$OUT_DIR/$n.fault.txt"; then
      pass "$n: rail1 $kind mid-run and healed, rerail failed over and back, every op right ($(grep -c '^OK' "$OUT_DIR/$n.rank0.log") ops on rank 0)"
    else
      fail "$n: results right: $([[ $right -eq 0 ]] && echo yes || echo NO), rail1 failure in rerail's log: $([[ $seen -eq 1 ]] && echo yes || echo NO) (see $OUT_DIR/$n.*)"
    fi
    RERAIL_NETNS_PREFIX=rrgpu scripts/netns-rails.sh up 2 2 >/dev/null 2>&1   # a clean fabric for the next run
   done
  done
  RERAIL_NETNS_PREFIX=rrgpu scripts/netns-rails.sh down >/dev/null 2>&1
fi

# ---- 4. kernels ------------------------------------------------------------------------------------
if ! step kernels; then notrun "kernels (not in STEPS)"
elif [[ -f "$BUILD_DIR/CTestTestfile.cmake" ]]; then
  if ctest --test-dir "$BUILD_DIR" -R 'KernelsEmu|kernels_|Staging\.|Stager\.|StagerGpu\.|GpuBuffers\.|CudaDriver\.' >"$OUT_DIR/ctest-kernels.log" 2>&1; then
    pass "kernels/staging tests ($(grep -o '[0-9]* tests passed.*' "$OUT_DIR/ctest-kernels.log"))"
  else fail "kernels/staging tests (see $OUT_DIR/ctest-kernels.log)"; fi
else   # a copied build (binaries only): run them directly
  for t in tests/kernels_emu_test tests/staging_test tests/stager_test tests/stager_gpu_test kernels/rerail-kernels-gpu-test; do
    if [[ ! -x "$BUILD_DIR/$t" ]]; then notrun "$t (not in $BUILD_DIR)"; continue; fi
    log="$OUT_DIR/$(basename "$t").log"
    if "$BUILD_DIR/$t" >"$log" 2>&1; then
      pass "$t ($(grep -E '^\[  PASSED  \]|^\[  SKIPPED \] [0-9]|^PASS:' "$log" | tr -s ' \n' ' '))"
    else fail "$t (see $log: $(grep -m1 FAIL "$log"))"; fi
  done
fi
GT="$BUILD_DIR/kernels/rerail-kernels-gpu-test"
if ! step kernels; then :
elif [[ -x "$GT" ]] && command -v compute-sanitizer >/dev/null 2>&1; then
  if timeout "${SANITIZER_TIMEOUT:-300}" compute-sanitizer --tool memcheck --error-exitcode 9 "$GT" >"$OUT_DIR/sanitizer-memcheck.log" 2>&1; then
    pass "compute-sanitizer memcheck on rerail-kernels-gpu-test ($(grep -m1 'ERROR SUMMARY' "$OUT_DIR/sanitizer-memcheck.log"))"
  else fail "compute-sanitizer memcheck (see $OUT_DIR/sanitizer-memcheck.log: $(grep -m1 'ERROR SUMMARY' "$OUT_DIR/sanitizer-memcheck.log"))"; fi
else notrun "compute-sanitizer (not found or no GPU test binary)"; fi
if ! step kernels; then :
elif [[ -x "$BUILD_DIR/kernels/rerail-stage-bench" ]]; then
  if "$BUILD_DIR/kernels/rerail-stage-bench" $((64 << 20)) 20 | tee "$OUT_DIR/stage-bench.txt"; then
    pass "rerail-stage-bench (bytes checked)"
  else fail "rerail-stage-bench"; fi
else notrun "rerail-stage-bench (not built: RERAIL_ENABLE_CUDA off or nvcc missing)"; fi
finish
