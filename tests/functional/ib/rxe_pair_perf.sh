#!/usr/bin/env bash
# rerail's net plugin in IB mode (RERAIL_TRANSPORT=ib) between two QEMU guests over Soft-RoCE, driven
# by rerail-perf as two ranks (guest a = rank 0, guest b = rank 1, rxe0/rxe1 on one virtual wire per
# rail: scripts/rxe-guest.sh --pair --rails 2). The guests run rxe_pair_perf_guest.sh; this script
# boots them and checks their output.
#
#   rxe_pair_perf.sh perf|failover RXE_GUEST_SH RERAIL_PERF NET_SO      (exit 77: cannot boot guests here)
#
# perf: sendrecv and all_reduce 8 B .. 8 MiB, every value verified (#wrong 0 on every row, "Out of
#   bounds values : 0 OK"), and the log shows the IB transport carried it: both ranks offer the IB
#   ports rxe0,rxe1 (transports: ib(...)), and links came up on both rails. Figures, printed and never
#   asserted: 8 MiB broadcast (one direction) on 2 rails and on rxe0 only, ib_write_bw on rxe0 (when
#   perftest is installed), and their ratios.
# failover: rail 0 of guest a is pulled (QEMU set_link off, RXE_CUT) for 6 s during 1 MiB sendrecv
#   loops of 10 s each, over links of 2 QPs: the run must end with #wrong 0 and at least one failover
#   WARN naming rxe0; the times guest a saw (port down event -> its failover WARN, port up ->
#   failback) are printed.
set -uo pipefail
mode=$1 guest=$2 perf=$3 so=$4
here=$(cd "$(dirname "$0")" && pwd)

case "$mode" in
  perf) timeout_s=420 ;;
  failover) timeout_s=240; export RXE_CUT=${RXE_CUT:-a:0:12:6} ;;
  *) echo "usage: $0 perf|failover RXE_GUEST_SH RERAIL_PERF NET_SO" >&2; exit 2 ;;
esac
out=$(bash "$guest" --pair --rails 2 --timeout "$timeout_s" --with "$perf" --with "$so" \
        --with "$here/rxe_pair_perf_guest.sh" -- "bash $here/rxe_pair_perf_guest.sh $mode $perf $so" 2>&1)
rc=$?
# The verdict comes first, the guests' output after it: CI keeps the head of a failing test's output.
if [ "$rc" = 77 ]; then echo "$out"; exit 77; fi
if [ "$rc" != 0 ]; then echo "FAIL: guest exit $rc (124: timeout, 125: a guest ended without a result)"; echo "$out"; exit 1; fi
verdict=$(python3 - "$mode" "$out" <<'PY'
import re, sys
mode, out = sys.argv[1], sys.argv[2]
def need(cond, what):
    if not cond:
        print("FAIL:", what); sys.exit(1)
def guest(role):
    m = re.search(rf"^---- guest {role} ----\n(.*?)(?=^---- guest |\Z)", out, re.S | re.M)
    need(m, f"output of guest {role}"); return m.group(1)
def runs(text):
    """{label: text of that rerail-perf run}, from '## run LABEL' to '## rc LABEL RC' (RC appended)."""
    d = {}
    for m in re.finditer(r"^(?:\[[\d.]+\] )?## run (\w+)[^\n]*\n(.*?)^(?:\[[\d.]+\] )?## rc \1 (\d+)$", text, re.S | re.M):
        d[m.group(1)] = (m.group(2), int(m.group(3)))
    return d
def table(text):
    """[(coll, size, best_us, oop_wrong, ip_wrong, oop_us, ip_us)] from rerail-perf's tables (best_us:
    the faster of the out-of-place and in-place times)."""
    rows, coll = [], None
    for line in text.splitlines():
        line = re.sub(r"^\[[\d.]+\] ", "", line)
        m = re.match(r"# rerail-perf (\w+):", line)
        if m: coll = m.group(1)
        f = line.split()
        if len(f) == 13 and f[0].isdigit():
            rows.append((coll, int(f[0]), min(float(f[5]), float(f[9])), f[8], f[12], float(f[5]), float(f[9])))
    return rows
def verified(label, text, rc, colls, sizes=None):
    need(rc == 0, f"{label}: rerail-perf exit {rc}")
    oob = re.findall(r"# Out of bounds values : (\d+) (\w+)", text)
    need(len(oob) == len(colls) and all(n == "0" and s == "OK" for n, s in oob), f"{label}: out of bounds lines {oob}")
    rows = table(text)
    for c in colls:
        got = [r[1] for r in rows if r[0] == c]
        need(got and (sizes is None or got == sizes), f"{label}: {c} sizes {got}")
    bad = [r for r in rows if r[3] != "0" or r[4] != "0"]
    need(not bad, f"{label}: rows with #wrong != 0: {bad}")
    return rows
def ib_used(label, a, b, rails):
    for who, t in (("a", a), ("b", b)):
        need(f"RERAIL_TRANSPORT=ib: offering IB ports {rails}" in t and f"transports: ib({rails})" in t,
             f"{label}: guest {who} offers the IB ports {rails}")
        need("transports: tcp" not in t, f"{label}: guest {who} fell back to TCP")
    for r in rails.split(","):
        need(re.search(rf"link \d up \(ib {r} link|\(ib {r} to peer rail \d\): connecting -> healthy", a + b),
             f"{label}: a link came up on {r}")
def warns(t):
    return [l for l in t.splitlines() if " WARN " in l and "NET/rerail" in l]

A, B = guest("a"), guest("b")
ra, rb = runs(A), runs(B)
if mode == "perf":
    sizes = [8 * 4 ** k for k in range(11)]  # 8 B .. 8 MiB
    need("ib2" in ra and "ib2" in rb, "run ib2 in both guests")
    rows = verified("ib2", ra["ib2"][0], ra["ib2"][1], ["sendrecv", "all_reduce"], sizes)
    need(rb["ib2"][1] == 0, f"ib2: rank 1 exit {rb['ib2'][1]}")
    ib_used("ib2", ra["ib2"][0], rb["ib2"][0], "rxe0,rxe1")
    w = warns(ra["ib2"][0]) + warns(rb["ib2"][0])
    print(f"ib2: sendrecv + all_reduce, {len(rows)} rows 8 B .. 8 MiB, #wrong 0; {len(w)} plugin WARN line(s) (TCG delays)")
    for l in w[:6]: print("  ", l)
    fig, rounds = {}, {"bc1": [], "wbw": []}
    labels = [("bc2", "rxe0,rxe1")] + [(f"bc1r{k}", "rxe0") for k in (1, 2, 3)]
    for label, rails in labels:
        if label not in ra: continue
        r = verified(label, ra[label][0], ra[label][1], ["broadcast"], [8 << 20])
        ib_used(label, ra[label][0], rb[label][0], rails)
        mbs = (8 << 20) / r[0][2]  # B/us = MB/s (1e6)
        if label == "bc2": fig["bc2"] = mbs
        else: rounds["bc1"].append(mbs)
    for k in (1, 2, 3):
        for m in re.finditer(r"^\s*8388608\s+\d+\s+([\d.]+)\s+([\d.]+)", ra.get(f"wbwr{k}", ("", 0))[0], re.M):
            rounds["wbw"].append(float(m.group(2)) * 1.048576)  # perftest's MB is 2^20 B
    for key, v in rounds.items():
        if v:
            fig[key] = sorted(v)[len(v) // 2]
            print(f"{key} per round (MB/s): " + ", ".join(f"{x:.2f}" for x in v) + f"; median {fig[key]:.2f}")
    print("FIGURES (TCG emulation: only the ratios mean something)")
    if "bc2" in fig: print(f"FIGURE rerail-perf broadcast 8 MiB a->b, IB 2 rails (rxe0,rxe1): {fig['bc2']:.2f} MB/s")
    if "bc1" in fig: print(f"FIGURE rerail-perf broadcast 8 MiB a->b, IB 1 rail (rxe0):      {fig['bc1']:.2f} MB/s (median of 3)")
    if "wbw" in fig: print(f"FIGURE ib_write_bw 8 MiB a->b on rxe0:                         {fig['wbw']:.2f} MB/s (median of 3)")
    else: print("FIGURE ib_write_bw: not run (perftest not installed)")
    if "bc2" in fig and "bc1" in fig: print(f"FIGURE ratio 2 rails / 1 rail: {fig['bc2'] / fig['bc1']:.2f}")
    pairs = [a / b for a, b in zip(rounds["bc1"], rounds["wbw"]) if b > 0]
    if pairs:  # each round's own ratio (both measured back to back), then their median
        print("ratio per round: " + ", ".join(f"{x:.2f}" for x in pairs))
        print(f"FIGURE ratio rerail 1 rail / ib_write_bw: {sorted(pairs)[len(pairs) // 2]:.2f} (median of the rounds' ratios)")
else:
    need("cut" in ra and "cut" in rb, "run cut in both guests")
    rows = verified("cut", ra["cut"][0], ra["cut"][1], ["sendrecv"], [1 << 20])
    need(rb["cut"][1] == 0, f"cut: rank 1 exit {rb['cut'][1]}")
    ib_used("cut", ra["cut"][0], rb["cut"][0], "rxe0,rxe1")
    need(", 2 QPs, epoch" in ra["cut"][0] + rb["cut"][0], "cut: links of 2 QPs (RERAIL_IB_QPS_PER_LINK=2)")
    need("rxe-guest: cut: guest a rail 0 off" in out, "the host pulled rail 0 of guest a")
    w = [l for l in warns(ra["cut"][0]) + warns(rb["cut"][0]) if "rxe0" in l and "failed" in l]
    need(w, "a failover WARN naming rxe0")
    print(f"cut: sendrecv 1 MiB, #wrong 0, {len(w)} failover WARN(s) naming rxe0:")
    for l in w[:6]: print("  ", l)
    ts = lambda pat: next((float(m.group(1)) for m in re.finditer(r"^\[([\d.]+)\] (.*)$", ra["cut"][0], re.M)
                           if re.search(pat, m.group(2))), None)
    down, up = ts(r"IB rail rxe0 down"), ts(r"IB rail rxe0 up")
    fo = ts(r"WARN .*rxe0.* failed")
    fb = ts(r"\(ib rxe0 to peer rail 0\): probing -> healthy")
    if down is not None and fo is not None: print(f"FIGURE guest a: port down event -> its failover WARN: {(fo - down) * 1e3:.0f} ms")
    if down is not None and up is not None: print(f"FIGURE guest a: port down -> up events: {(up - down):.1f} s (cut for 6 s)")
    # The cut falls in the first timed loop (out-of-place, 10 s); the in-place loop after it runs on
    # both rails again: the ratio of their mean iteration times is what the outage cost that loop.
    print(f"FIGURE sendrecv 1 MiB mean iteration: {rows[0][5] / 1e3:.0f} ms in the loop with the cut, "
          f"{rows[0][6] / 1e3:.0f} ms in the loop after it (x{rows[0][5] / rows[0][6]:.2f})")
    if up is not None and fb is not None and fb > up: print(f"FIGURE guest a: port up event -> rxe0 send link failed back: {(fb - up):.1f} s")
print("PASS")
PY
)
vrc=$?
echo "$verdict"
echo "$out"
[ "$vrc" = 0 ] || { echo "$verdict" | grep '^FAIL' >&2; exit 1; }
