#!/usr/bin/env bash
# bench_accel.sh - spritefs-bench --dataset accelerators --quick end to end on 800 generated
# photos with a small profile (32:0.05, 640 samples/s per accelerator): every medium has a row
# in results.json with its accelerators at AU >= 90% (or the fraction of one), samples/s, MB/s,
# AU and CPU core-seconds per delivered GB (the daemon's only on the mounts), the store is at
# least 4x the budget, T11's floor and cold pass of the same run and their ratio, the AU curves
# and the two PNGs are there, the table is on stdout, a bad
# --profile is refused up front, and no mount or folder is left behind.
#   usage: bench_accel.sh BENCH_SCRIPT BUILD_DIR
set -uo pipefail
BENCH_PY_MODULES="numpy PIL"

source "$(dirname "$0")/bench_lib.sh"

# refused before anything is prepared: exit 2, one line naming the option
bad_case() { # ARGS...: exit 2, one line naming --profile, no output folder
	local rc=0
	"$BENCH" --quick --out "$OUT/bad" "$@" >"$OUT/bad.log" 2>&1 || rc=$?
	[[ $rc -eq 2 && $(wc -l <"$OUT/bad.log") -eq 1 ]] || fail "$*: exit $rc: $(cat "$OUT/bad.log")"
	grep -q -- "--profile" "$OUT/bad.log" || fail "$*: the message does not name --profile: $(cat "$OUT/bad.log")"
	[[ ! -e $OUT/bad ]] || fail "$*: made the output folder before refusing"
}
bad_case --dataset accelerators --profile 0:0.1
bad_case --dataset accelerators --profile 32:0
bad_case --dataset accelerators --profile h100
bad_case --dataset photos --profile 32:0.05
echo "bad --profile values refused up front"

"$BENCH" accelerators --quick --profile 32:0.05 --out "$OUT/res" >"$OUT/stdout" 2>"$OUT/stderr" &
BPID=$!
wait "$BPID"
rc=$?
tail -30 "$OUT/stderr"
cat "$OUT/stdout"
((rc == 0)) || fail "spritefs-bench --dataset accelerators exited with $rc"
left=$(leftovers)
[[ -z $left ]] || fail "the bench left mounts or folders behind: $left"
grep -q '^| medium | state | accelerators | samples/s | MB/s | AU |' "$OUT/stdout" || fail "no table on stdout"
for p in accel_au.png accel_speed.png; do
	[[ $(head -c 8 "$OUT/res/$p" 2>/dev/null | od -An -tx1 | tr -d ' \n') == 89504e470d0a1a0a ]] ||
		fail "$p missing or not a PNG"
done

$PY - "$OUT/res/results.json" <<'PYEOF' || exit 1
import json, os, sys
r = json.load(open(sys.argv[1]))
s = r["summary"]
bad = []
def num(x, lo, hi):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and lo <= x <= hi
p = s.get("profile", {})
if p.get("batch") != 32 or not num(p.get("compute_s"), 0.0499, 0.0501) or not num(p.get("samples_s_per_accelerator"), 639, 641):
    bad.append(f"profile {p}")
if not num(s.get("store_over_budget"), 4.0, 1e6):
    bad.append(f"the store is {s.get('store_over_budget')}x the budget, not at least 4x")
rows = {x["medium"]: x for x in s.get("rows", [])}
media = ["spritefs-cold", "spritefs-warm", "store-ssd", "store-tmpfs"]
try:
    import torch, torchvision  # noqa: F401
    media.append("torch-jpeg")
except ImportError:
    print("no torch here: the peer's row is not checked")
for m in media:
    x = rows.get(m)
    if not x:
        bad.append(f"no row for {m}"); continue
    n = x.get("accelerators")
    if not (isinstance(n, int) and 0 <= n <= 4):
        bad.append(f"{m}: accelerators {n}")
    if n == 0 and not num(x.get("fraction_of_one"), 0.0001, 1):
        bad.append(f"{m}: holds no accelerator, and no fraction of one: {x.get('fraction_of_one')}")
    for k, lo, hi in (("samples_s", 1, 1e7), ("mb_s", 0.1, 1e6), ("au", 0.001, 1.0001),
                      ("reader_cpu_s_per_gb", 0.001, 1e5)):
        if not num(x.get(k), lo, hi):
            bad.append(f"{m}.{k} = {x.get(k)}")
    # MB/s is samples/s of 224x224x3 tiles
    if num(x.get("samples_s"), 1, 1e7) and num(x.get("mb_s"), 0.1, 1e6) and \
            abs(x["mb_s"] - x["samples_s"] * 150528 / 1e6) > 0.01 * x["mb_s"]:
        bad.append(f"{m}: {x['mb_s']} MB/s is not {x['samples_s']} samples/s of 224x224x3 tiles")
    d = x.get("daemon_cpu_s_per_gb")
    if m.startswith("spritefs") and not num(d, 0.0001, 1e5):
        bad.append(f"{m}: the daemon's CPU per GB = {d}")
    if not m.startswith("spritefs") and d is not None:
        bad.append(f"{m}: a daemon's CPU where there is no daemon: {d}")
    curve = s.get("au_vs_accelerators", {}).get(m) or []
    if not curve or curve[0][0] != 1:
        bad.append(f"{m}: AU against accelerators does not start at 1: {curve}")
    if n and not any(c[0] == n and c[1] >= 0.9 for c in curve):
        bad.append(f"{m}: {n} accelerators, but no trial at {n} with AU >= 90%: {curve}")
    if any(c[0] == n + 1 and c[1] >= 0.9 for c in curve):
        bad.append(f"{m}: {n} accelerators, but {n + 1} held AU >= 90%: {curve}")
    sp = s.get("au_vs_speed", {}).get(m) or []
    if len(sp) != 3 or sorted(round(v[0]) for v in sp) != [160, 640, 2560]:
        bad.append(f"{m}: AU against speed at {[v[0] for v in sp]}, not 160, 640, 2560 samples/s")
if not any(t["id"] == "T12" for t in s.get("targets", [])):
    bad.append("no T12")
# T11: the floor and the cold pass of the same run, and their ratio as the target's figure
cc = s.get("cold_cpu") or {}
fl = cc.get("floor") or {}
if not num(fl.get("copy_gb_per_s"), 0.1, 1000) or not num(fl.get("lz4_decoded_gb_per_s"), 0.1, 1000):
    bad.append(f"T11 floor rates {fl}")
elif abs(fl["floor_core_s_per_gb"] - (1 / fl["copy_gb_per_s"] + 1 / fl["lz4_decoded_gb_per_s"])) > 1e-6:
    bad.append(f"T11 floor is not one lz4 decode plus one copy per GB: {fl}")
ps = cc.get("passes") or []
each = fl.get("floors_core_s_per_gb") or []  # the floor before the pass, and after it
if len(ps) != 1:
    bad.append(f"T11: {len(ps)} cold passes in a quick run, not 1")
for q in ps:
    # one epoch's views of the train split: each tile once (150,528 bytes) and the views' heads
    tiles = (s.get("data") or {}).get("train_files", 0) * 150528
    if not tiles <= q.get("bytes", 0) < tiles + (1 << 20) or not num(q.get("daemon_core_s_per_gb"), 0.001, 100) \
            or not num(q.get("readers_core_s_per_gb"), 0.0, 100) or q.get("read_amplification") is None:
        bad.append(f"T11 cold pass {q}")
    elif len(each) != len(ps) + 1 or abs(q["floor_core_s_per_gb"] - (each[0] + each[1]) / 2) > 1e-6:
        bad.append(f"T11: the pass's floor {q.get('floor_core_s_per_gb')} is not the mean of those "
                   f"measured before and after it, {each}")
    elif abs(q["ratio"] - q["core_s_per_gb"] / q["floor_core_s_per_gb"]) > 1e-6:
        bad.append(f"T11 ratio {q['ratio']} is not {q['core_s_per_gb']} / {q['floor_core_s_per_gb']}")
# T12's bound: the smaller of fio x compression and the CPUs at the floor's cost of a byte
bd = s.get("bound") or {}
if bd.get("decode_from") != "floor" or not fl.get("floor_core_s_per_gb") \
        or abs(bd["decode_tiles_mb_s"] - min(len(os.sched_getaffinity(0)), 64) * 1e3 / fl["floor_core_s_per_gb"]) > 1e-6 \
        or bd.get("tiles_mb_s") != min(x for x in (bd.get("disk_tiles_mb_s"), bd["decode_tiles_mb_s"]) if x):
    bad.append(f"T12 bound is not min(fio x compression, the CPUs at the floor): {bd}")
t11 = [t for t in s.get("targets", []) if t["id"] == "T11"]
if len(t11) != 1 or not num(t11[0].get("measured"), 0.5, 100) or t11[0]["pass"] != (t11[0]["measured"] <= 1.3):
    bad.append(f"T11 target row {t11}")
if bad:
    print("FAIL: results.json: " + "; ".join(bad)); sys.exit(1)
print("results.json ok:", {m: rows[m]["accelerators"] for m in media})
PYEOF
echo PASS
