#!/usr/bin/env bash
# bench_larger.sh - spritefs-bench --dataset larger end to end on a small store (1000 samples
# per split at 224x224x1, -o cache=32M, windows of 2 sheets): the report must have every row
# with sane numbers - one read per stored byte at a budget holding the working set, a cold
# epoch below its bound, hntrain on the mount giving --preload's weights, a budget sweep that
# reads more below the working set - a real PNG, and no mount or folder left behind.
#   usage: bench_larger.sh BENCH_SCRIPT BUILD_DIR
set -uo pipefail
[[ -d ${SPRITEFS_FMNIST:-/usr/share/datasets/fashion-mnist} ]] || { echo "SKIP: no Fashion-MNIST"; exit 77; }
command -v fio >/dev/null || { echo "SKIP: no fio (the bound needs it)"; exit 77; }

source "$(dirname "$0")/bench_lib.sh"

env -u SPRITEFS_BENCH_CACHE "$BENCH" --dataset larger --quick --limit 1000 --out "$OUT/res" \
	>"$OUT/stdout" 2>"$OUT/stderr" &
BPID=$!
wait "$BPID"
rc=$?
tail -20 "$OUT/stderr"
cat "$OUT/stdout"
((rc == 0)) || fail "spritefs-bench --dataset larger exited with $rc"
left=$(grep -F "spritefs-bench.$BPID" /proc/mounts; ls -d "/dev/shm/spritefs-bench.$BPID" \
	"/var/tmp/spritefs-bench.$BPID" 2>/dev/null)
[[ -z $left ]] || fail "the bench left mounts or folders behind: $left"
for row in 'read amplification of a cold epoch' 'cold epoch vs bound' 'hntrain data-wait share, mount' \
	'hntrain samples/s, mount vs --preload' '| budget MiB |'; do
	grep -qF "$row" "$OUT/stdout" || fail "no row '$row' in the report"
done
[[ $(head -c 8 "$OUT/res/larger.png" | od -An -tx1 | tr -d ' \n') == 89504e470d0a1a0a ]] ||
	fail "larger.png missing or not a PNG"

$PY - "$OUT/res/results.json" <<'PYEOF' || exit 1
import json, sys
s = json.load(open(sys.argv[1]))["summary"]
bad = []
def num(x, lo, hi):
    return isinstance(x, (int, float)) and lo <= x <= hi
ep = s.get("cold_epoch") or {}
# stats.json's working set counts the readers the view had at once (NCPU
# O_DIRECT threads here), and readers beyond the budget wait for older
# batches rather than evict their sheets: one read per stored byte from one
# working set up.
if not num(ep.get("read_amplification"), 0.99, 1.05):
    bad.append(f"cold epoch at a budget above the working set: read amplification {ep.get('read_amplification')} > 1.05")
if not ep.get("budget_bytes", 0) >= ep.get("working_set", 1):
    bad.append(f"premise: budget {ep.get('budget_bytes')} below the working set {ep.get('working_set')}")
for k, lo, hi in (("fio_store_mb_s", 1, 1e6), ("lz4_mb_s_per_thread", 10, 1e6), ("compression_ratio", 1.2, 20),
                  ("bound_tiles_mb_s", 1, 1e7), ("cold_vs_bound", 0.01, 1.5)):
    if not num(s.get(k), lo, hi):
        bad.append(f"{k} = {s.get(k)}")
if not num(ep.get("samples"), 1000, 1000):
    bad.append(f"cold epoch delivered {ep.get('samples')} samples, expected 1000")
tr = s.get("train") or {}
for k in ("mount", "preload"):
    t = tr.get(k) or {}
    if not (num(t.get("samples_s"), 1, 1e7) and num(t.get("data_wait_share"), 0, 1)):
        bad.append(f"hntrain {k}: {t}")
if s.get("weights_same") is not True:
    bad.append(f"weights mount vs --preload: {s.get('weights_same')}")
sw = s.get("sweep") or []
if len(sw) < 3:
    bad.append(f"sweep of {len(sw)} budgets")
else:
    for e in sw:
        if e["budget_bytes"] >= e["working_set"] and not num(e["read_amplification"], 0.99, 1.05):
            bad.append(f"sweep: budget {e['budget_bytes']} >= working set {e['working_set']}, amplification {e['read_amplification']}")
        if not num(e.get("tiles_mb_s"), 0.1, 1e7):
            bad.append(f"sweep: budget {e['budget_bytes']}: {e.get('tiles_mb_s')} MB/s")
    if not sw[0]["read_amplification"] > 1.05:
        bad.append(f"the smallest budget reads each byte once: {sw[0]}")
if bad:
    print("FAIL: " + "; ".join(bad)); sys.exit(1)
PYEOF
echo PASS
