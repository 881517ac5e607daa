#!/usr/bin/env bash
# scripts/run-nccl-tests.sh without a cluster: (1) --dry-run prints the launch commands with the
# environment and the fault commands in place, for mpirun and srun; (2) bad arguments are rejected with
# exit 2 and a message naming the problem; (3) the verdict logic on recorded-style outputs, with
# stand-ins for mpirun, ssh and all_reduce_perf on PATH (they print nccl-tests-format tables; nothing
# here claims a cluster run).
set -euo pipefail
script=$1
fail() { echo "FAIL: $*" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# ---- 1. dry-run, mpirun, with a fault ----
out=$(bash "$script" --hosts n1,n2 --gpus-per-node 4 --tests all_reduce,alltoall --fault-node n2 \
      --fault-nic ens1f0 --fault-at 15 --fault-for 30 --nccl-tests /nt --out /logs --env RERAIL_POLICY=failover --dry-run)
echo "$out"
has() { grep -qF -- "$1" <<<"$out" || fail "dry-run lacks: $1"; }
count() { [ "$(grep -cF -- "$1" <<<"$out")" = "$2" ] || fail "dry-run: want $2 lines with: $1"; }
has "mkdir -p /logs"
for t in all_reduce alltoall; do
  has "env NCCL_DEBUG=\"INFO\" NCCL_DEBUG_SUBSYS=\"INIT,NET\" NCCL_NET_PLUGIN=\"none\" RERAIL_POLICY=\"failover\" mpirun -np 8 -H n1:4,n2:4 --bind-to none -x NCCL_DEBUG -x NCCL_DEBUG_SUBSYS -x NCCL_NET_PLUGIN -x RERAIL_POLICY /nt/${t}_perf -b 8 -e 8G -f 2 -g 1 -n 20 -w 5 -c 1 > /logs/$t.baseline.log 2>&1"
  has "env NCCL_DEBUG=\"INFO\" NCCL_DEBUG_SUBSYS=\"INIT,NET\" NCCL_NET_PLUGIN=\"rerail\" LD_LIBRARY_PATH=\"/opt/rerail/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}\" RERAIL_POLICY=\"failover\" mpirun -np 8 -H n1:4,n2:4 --bind-to none -x NCCL_DEBUG -x NCCL_DEBUG_SUBSYS -x NCCL_NET_PLUGIN -x LD_LIBRARY_PATH -x RERAIL_POLICY /nt/${t}_perf -b 8 -e 8G -f 2 -g 1 -n 20 -w 5 -c 1 > /logs/$t.rerail.log 2>&1"
done
fault="( sleep 15; ssh -o BatchMode=yes n2 sudo -n ip link set dev ens1f0 down; sleep 30; ssh -o BatchMode=yes n2 sudo -n ip link set dev ens1f0 up ) &"
count "$fault" 2
# The fault is armed right before each rerail run, never before a baseline run.
python3 - "$out" "$fault" <<'PY' || fail "fault order"
import sys
lines = sys.argv[1].splitlines()
for i, l in enumerate(lines):
    if l == sys.argv[2]:
        assert 'NCCL_NET_PLUGIN="rerail"' in lines[i + 1], lines[i + 1]
    if 'NCCL_NET_PLUGIN="rerail"' in l and "mpirun" in l:
        assert lines[i - 1] == sys.argv[2], lines[i - 1]
PY

# ---- srun, tuner, no baseline ----
out=$(bash "$script" --launcher srun --hosts a,b,c --gpus-per-node 8 --tests sendrecv --tuner --no-baseline \
      --rerail-lib /usr/lib/rerail --nccl-tests /nt --out /o --dry-run)
has "env NCCL_DEBUG=\"INFO\" NCCL_DEBUG_SUBSYS=\"INIT,NET\" NCCL_NET_PLUGIN=\"rerail\" LD_LIBRARY_PATH=\"/usr/lib/rerail\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}\" NCCL_TUNER_PLUGIN=\"rerail\" srun -N 3 --ntasks-per-node=8 --gpus-per-node=8 -w a,b,c --export=ALL /nt/sendrecv_perf"
grep -q 'NCCL_NET_PLUGIN="none"' <<<"$out" && fail "--no-baseline still runs a baseline"
grep -q 'ssh ' <<<"$out" && fail "a fault command without --fault-node"

# ---- 2. bad arguments: exit 2 and a clear message ----
reject() {  # reject "message part" args...
  local want=$1 rc=0 err
  shift
  err=$(bash "$script" "$@" --dry-run 2>&1 >/dev/null) || rc=$?
  [ "$rc" = 2 ] || fail "'$*' exit $rc, want 2"
  grep -qF -- "$want" <<<"$err" || fail "'$*': message '$err' lacks '$want'"
}
reject "unknown argument '--frobnicate'" --hosts a,b --frobnicate
reject "--hosts is required" --tests all_reduce
reject "--launcher must be mpirun or srun, got 'pdsh'" --hosts a --launcher pdsh
reject "--fault-node and --fault-nic go together" --hosts a,b --fault-node b
reject "--fault-node 'c' is not one of --hosts (a,b)" --hosts a,b --fault-node c --fault-nic eth0
reject "--fault-nic must be an interface name, got 'eth0;reboot'" --hosts a,b --fault-node b --fault-nic 'eth0;reboot'
reject "--gpus-per-node must be a positive integer, got 'x'" --hosts a --gpus-per-node x
reject "unknown nccl-tests binary 'allreduce_perf'" --hosts a --tests allreduce
reject "--env wants NAME=VALUE, got 'FOO'" --hosts a --env FOO
reject "-b/-e must be sizes" --hosts a -e 8Q
reject "--hosts needs a value" --hosts
reject "not a non-negative integer: '-3'" --hosts a,b --fault-node b --fault-nic e --fault-at -3

# ---- 3. verdicts and ratios, with stand-ins on PATH ----
mkdir -p "$tmp/bin" "$tmp/nt"
cat >"$tmp/bin/mpirun" <<'S'
#!/usr/bin/env bash
# stand-in: skip launcher options, run the binary once with the environment env(1) set
while [ $# -gt 0 ]; do case $1 in -np|-H|-x|--bind-to) shift 2 ;; *) break ;; esac; done
exec "$@"
S
cat >"$tmp/bin/ssh" <<'S'
#!/usr/bin/env bash
echo "$*" >>"$STUB_SSH_LOG"
[ -z "${STUB_SSH_FAIL:-}" ]
S
cat >"$tmp/nt/all_reduce_perf" <<'S'
#!/usr/bin/env bash
# stand-in printing nccl-tests' format; busbw 20 without rerail, 18 with (or as STUB_* say)
bw=20
if [ "$NCCL_NET_PLUGIN" = rerail ]; then
  bw=18
  [ -n "${STUB_NOLOAD:-}" ] || echo "host:1:1 [0] NCCL INFO NET/rerail : rerail 0.1.0 ABI v12, transports: tcp(eth0)"
fi
sleep 1.5
echo "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong"
echo "           8             2     float     sum      -1    20.00    0.00    0.00      0    20.00    0.00    0.00      0"
echo "     1048576        262144     float     sum      -1    50.00   20.97   $bw.00      0    50.00   20.97   $bw.00      0"
echo "# Out of bounds values : ${STUB_WRONG:-0} $([ -n "${STUB_WRONG:-}" ] && echo FAILED || echo OK)"
echo "# Avg bus bandwidth    : $bw.5"
[ -z "${STUB_WRONG:-}" ]
S
chmod +x "$tmp/bin/"* "$tmp/nt/all_reduce_perf"
export STUB_SSH_LOG=$tmp/ssh.log
run() { PATH="$tmp/bin:$PATH" bash "$script" --hosts n1,n2 --tests all_reduce --nccl-tests "$tmp/nt" --out "$tmp/o" "$@"; }
out=$(run --fault-node n2 --fault-nic ens1 --fault-at 0 --fault-for 1) || fail "a passing run failed: $out"
echo "$out"
grep -q '^all_reduce  *PASS avg busbw ratio 0.902  *largest-size busbw ratio 0.900' <<<"$out" || fail "ratio line: $out"
[ "$(cat "$tmp/ssh.log")" = "$(printf -- '-o BatchMode=yes n2 sudo -n ip link set dev ens1 down\n-o BatchMode=yes n2 sudo -n ip link set dev ens1 up')" ] ||
  fail "fault commands run: $(cat "$tmp/ssh.log")"
rc=0; out=$(STUB_WRONG=3 run) || rc=$?
[ "$rc" = 1 ] && grep -q "FAIL.*'Out of bounds values : 0 OK' 0 of 1" <<<"$out" || fail "wrong values not caught (rc $rc): $out"
rc=0; out=$(STUB_NOLOAD=1 run) || rc=$?
[ "$rc" = 1 ] && grep -q "FAIL.*rerail not loaded" <<<"$out" || fail "fallback to NCCL's transport not caught: $out"
rc=0; out=$(run --min-ratio 0.95) || rc=$?
[ "$rc" = 1 ] && grep -q "FAIL.*avg busbw ratio 0.902 < 0.95" <<<"$out" || fail "--min-ratio not applied: $out"
rc=0; out=$(STUB_SSH_FAIL=1 run --fault-node n1 --fault-nic ens2 --fault-at 0 --fault-for 0) || rc=$?
[ "$rc" = 1 ] && grep -q "FAIL.*a fault command failed" <<<"$out" || fail "a failed fault command not reported: $out"
rc=0; out=$(run --nccl-tests "$tmp/none" 2>&1) || rc=$?
[ "$rc" = 2 ] && grep -q "all_reduce_perf not found" <<<"$out" || fail "missing nccl-tests not reported: $out"
echo "PASS: run-nccl-tests.sh dry-run, argument checks and verdicts"
