#!/usr/bin/env bash
# Runs rerail-perf on loopback and asserts from its nccl-tests-style output that every verified
# result has #wrong = 0 and every table closes with "# Out of bounds values : 0 OK".
# Usage: perf_check.sh RERAIL_PERF PLUGIN NRANKS COLLECTIVES [extra rerail-perf flags...]
set -euo pipefail
perf=$1 plugin=$2 n=$3 colls=$4
shift 4
out=$(mktemp)
trap 'rm -f "$out"' EXIT
# Sizes cover the empty-chunk, sub-slice, multi-slice and multi-loop cases of the ring schedule.
set +e
timeout 100 "$perf" "$colls" -N "$n" --plugin "$plugin" -b 8 -e 6M -f 8 -n 2 -w 1 -c 1 -C 2 --timeout 90 "$@" >"$out"
rc=$?
set -e
cat "$out"
[ "$rc" -eq 0 ] || { echo "FAIL: rerail-perf exited with $rc"; exit 1; }
python3 - "$out" "$colls" <<'PY'
import sys
lines = open(sys.argv[1]).read().splitlines()
expected = sys.argv[2].split(",")
if expected == ["all"]:
    expected = ["all_gather", "all_reduce", "alltoall", "broadcast", "reduce_scatter", "sendrecv"]
tables = [l.split()[2].rstrip(":") for l in lines if l.startswith("# rerail-perf ")]
if sorted(tables) != sorted(expected):
    sys.exit("FAIL: tables %s, expected %s" % (tables, expected))
rows = [l.split() for l in lines if l and not l.startswith("#")]
if len(rows) < 3 * len(expected):
    sys.exit("FAIL: only %d result rows" % len(rows))
for r in rows:
    if len(r) != 13:
        sys.exit("FAIL: malformed row %r" % r)
    if r[8] != "0" or r[12] != "0":
        sys.exit("FAIL: wrong values in row %r" % r)
oob = [l for l in lines if l.startswith("# Out of bounds values")]
if len(oob) != len(expected) or any(not l.endswith(": 0 OK") for l in oob):
    sys.exit("FAIL: closing lines %r" % oob)
if len([l for l in lines if l.startswith("# Avg bus bandwidth")]) != len(expected):
    sys.exit("FAIL: missing '# Avg bus bandwidth' lines")
print("PASS: %d rows, #wrong = 0 everywhere" % len(rows))
PY
