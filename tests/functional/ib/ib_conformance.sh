#!/usr/bin/env bash
# The NCCL-proxy conformance suite with RERAIL_TRANSPORT=ib on a given set of IB ports: this process and
# its conformance_peer process both open the plugin on those ports, and every case must have run on
# them. Each gtest case runs in its own process, as under gtest_discover_tests; one result line per case.
#
#   ib_conformance.sh --ports P0,P1,... [--fake LIBFAKEVERBS] [--case-timeout S] [--filter GTEST_FILTER]
#                     CONFORMANCE_TEST [CONFORMANCE_TEST ARGS...]
#
#   --ports    the IB ports every plugin init of either process must offer, in order, and nothing else
#              (its INFO line "transports: ib(P0,P1,...)"; never TCP devices)
#   --fake     run over the fake libibverbs (RERAIL_IB_LIB, FAKEVERBS_DEVICES=4): the two processes are two
#              hosts of one fake fabric (FAKEVERBS_WIRE, a directory made here per case), and at least one
#              process must have executed RDMA for the other (fake_host.cc's exit line). Without it the
#              real libibverbs is used (rxe in a QEMU guest: rxe_conformance_guest.sh).
#   --case-timeout  bound of one case's process (default 300 s)
#   --filter   gtest filter of the cases to run (default: all)
# The caller sets the plugin's environment (RERAIL_TRANSPORT=ib is set here; conformance_test pins
# RERAIL_TCP_IFNAME=lo for the bootstrap streams). Also checked: some case brought an IB link up
# ("link N up (ib PORT"). Exit 0 when every case passed.
set -u
ports="" fake="" case_timeout=300 filter="*"
while [ $# -gt 0 ]; do
  case "$1" in
    --ports) ports=$2; shift 2 ;;
    --fake) fake=$2; shift 2 ;;
    --case-timeout) case_timeout=$2; shift 2 ;;
    --filter) filter=$2; shift 2 ;;
    *) break ;;
  esac
done
[ -n "$ports" ] && [ $# -ge 1 ] || { echo "usage: $0 --ports P0,P1,... [--fake LIB] [--case-timeout S] [--filter F] CONFORMANCE_TEST [ARGS...]" >&2; exit 2; }
bin=$1
shift
top=$(mktemp -d "${TMPDIR:-/tmp}/rrconf.XXXXXX")
trap 'rm -rf "$top"' EXIT
export RERAIL_TRANSPORT=ib RERAIL_TCP_IFNAME=lo
[ -n "$fake" ] && export RERAIL_IB_LIB=$fake FAKEVERBS_DEVICES=4
now_ms() { local t=${EPOCHREALTIME/./}; echo $((t / 1000)); }  # bash 5: microseconds since the epoch

# Cases that cannot pass over IB, each with its reason (none are filtered silently).
declare -A skip=()

cases=$("$bin" --gtest_list_tests --gtest_filter="$filter" | awk '/^[^ ]/ {suite=$1} /^  [^ ]/ {print suite $1}')
[ -n "$cases" ] || { echo "FAIL: no cases listed by $bin (filter $filter)"; exit 1; }
pass=0 fail=0 hosts_moving=0 linked=0 n=0
t_all=$(now_ms)
for c in $cases; do
  if [ -n "${skip[$c]:-}" ]; then
    echo "NOT RUN over IB: $c (${skip[$c]})"
    continue
  fi
  n=$((n + 1))
  wire=()
  if [ -n "$fake" ]; then mkdir "$top/$n"; wire=(env "FAKEVERBS_WIRE=$top/$n"); fi
  start=$(now_ms)
  out=$(${wire[@]+"${wire[@]}"} timeout "$case_timeout" "$bin" --gtest_color=no --echo-plugin-log --gtest_filter="$c" "$@" 2>&1)
  rc=$?
  ms=$(($(now_ms) - start))
  why=""
  [ $rc -eq 0 ] || why="exit $rc$([ $rc = 124 ] && echo ": past --case-timeout $case_timeout s")"
  grep -q "^\[  PASSED  \] 1 test" <<<"$out" || why="${why:+$why, }not passed"
  grep -q "SKIPPED" <<<"$out" && why="${why:+$why, }skipped"
  # Every plugin init of either process (one INFO line each) must have offered exactly these IB ports.
  inits=$(grep -c "NET/rerail : rerail .* transports: " <<<"$out")
  ib_inits=$(grep -cF "transports: ib($ports)" <<<"$out")
  [ "$inits" -eq "$ib_inits" ] || why="${why:+$why, }$((inits - ib_inits)) of $inits plugin inits not on the IB ports $ports"
  links=$(grep -cE "link [0-9]+ up \(ib " <<<"$out")
  [ "$links" -gt 0 ] && linked=$((linked + 1))
  # Hosts that executed verbs requests for another process in this case (fake_host.cc's exit line).
  moved=0
  [ -n "$fake" ] && moved=$(grep -c "requests sent to other hosts, [1-9][0-9]* executed for them" <<<"$out")
  hosts_moving=$((hosts_moving + moved))
  if [ -z "$why" ]; then
    pass=$((pass + 1))
    printf 'ok   %-70s %7d ms  IB inits: %s, IB links up: %s%s\n' "$c" "$ms" "$inits" "$links" \
      "$([ -n "$fake" ] && echo ", hosts that served RDMA: $moved")"
  else
    fail=$((fail + 1))
    printf 'FAIL %-70s %7d ms  (%s)\n' "$c" "$ms" "$why"
    echo "$out" | tail -60
  fi
done
echo "ib_conformance ($ports): $pass passed, $fail failed, ${#skip[@]} not run over IB, $linked cases brought IB links up, $(($(now_ms) - t_all)) ms$([ -n "$fake" ] && echo ", $hosts_moving host-cases served RDMA")"
[ $fail -eq 0 ] || exit 1
[ $linked -gt 0 ] || { echo "FAIL: no case brought an IB link up"; exit 1; }
[ -z "$fake" ] || [ $hosts_moving -gt 0 ] || { echo "FAIL: no process executed a request of another: the data did not cross the fake fabric"; exit 1; }
echo "ib_conformance ok"
