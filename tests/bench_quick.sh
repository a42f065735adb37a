#!/usr/bin/env bash
# bench_quick.sh - spritefs-bench --quick end to end: it must prepare the data on tmpfs, the disk
# and a real spritefs mount, train on each, and leave a valid results.json (media, fields,
# machine info, targets), the Markdown table on stdout and real PNG plots - and no mount or
# temp folder behind, on any exit path.
#   usage: bench_quick.sh BENCH_SCRIPT BUILD_DIR
set -uo pipefail

source "$(dirname "$0")/bench_lib.sh"

"$BENCH" --quick --out "$OUT/res" >"$OUT/stdout" 2>"$OUT/stderr" &
BPID=$!
wait "$BPID"
rc=$?
echo "--- stderr (tail)"
tail -40 "$OUT/stderr"
echo "--- stdout"
cat "$OUT/stdout"
((rc == 0)) || fail "spritefs-bench --quick exited with $rc"
left=$(leftovers)
[[ -z $left ]] || fail "the bench left mounts or folders behind: $left"

grep -q '^| medium | state | raw MB/s' "$OUT/stdout" || fail "no reading table on stdout"
grep -q '^| run | medium | state | device' "$OUT/stdout" || fail "no training table on stdout"
grep -q '^| # | measure' "$OUT/stdout" || fail "no targets table on stdout"
grep -q 'MISMATCH' "$OUT/stdout" && fail "the bench reports a mismatch between media"

for p in throughput.png epoch_split.png; do
	[[ -s $OUT/res/$p ]] || fail "$p missing"
	[[ $(head -c 8 "$OUT/res/$p" | od -An -tx1 | tr -d ' \n') == 89504e470d0a1a0a ]] ||
		fail "$p is not a PNG"
done

$PY - "$OUT/res/results.json" <<'PYEOF' || exit 1
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except Exception as e:
    print("FAIL: results.json is not valid JSON:", e); sys.exit(1)
bad = []
m = r.get("machine", {})
for k in ("cpu", "cores", "ram_bytes", "kernel", "disk"):
    if not m.get(k):
        bad.append("machine." + k)
s = r.get("summary", {})
reads = {(x["medium"], x["state"]): x for x in s.get("reads", [])}
for med, st, fields in [("tiff-tmpfs", "warm", ("mb_s", "files_s", "samples_s")),
                        ("tiff-ssd", "cold", ("mb_s", "files_s", "samples_s")),
                        ("store-tmpfs", "warm", ("mb_s", "samples_s")),
                        ("store-ssd", "cold", ("mb_s", "samples_s")),
                        ("spritefs", "cold", ("mb_s", "samples_s")),
                        ("spritefs", "warm", ("mb_s", "files_s", "samples_s")),
                        ("batches-tmpfs", "warm", ("mb_s", "samples_s"))]:
    x = reads.get((med, st))
    if not x:
        bad.append(f"reads {med}/{st} missing"); continue
    for f in fields:
        if not (isinstance(x.get(f), (int, float)) and x[f] > 0):
            bad.append(f"reads {med}/{st}.{f} = {x.get(f)}")
if not s.get("samples_same"):
    bad.append("media delivered different samples: %s" % s.get("sample_sums"))
train = {t["name"]: t for t in s.get("train", [])}
for n in ("cpu-tiff-tmpfs", "cpu-tiff-ssd", "cpu-store-tmpfs", "cpu-store-ssd", "cpu-spritefs"):
    t = train.get(n)
    if not t:
        bad.append("train " + n + " missing"); continue
    for f in ("samples_s", "wall_s", "compute_s"):
        if not (isinstance(t.get(f), (int, float)) and t[f] > 0):
            bad.append(f"train {n}.{f} = {t.get(f)}")
    if not isinstance(t.get("data_wait_s"), (int, float)):
        bad.append(f"train {n}.data_wait_s missing")
    if not (isinstance(t.get("test_acc"), (int, float)) and 0.3 < t["test_acc"] <= 1):
        bad.append(f"train {n}.test_acc = {t.get('test_acc')}")
    if not t.get("weights_xxh3"):
        bad.append(f"train {n}.weights_xxh3 missing")
if s.get("weights_mismatch"):
    bad.append("weights differ between media: %s" % s["weights_mismatch"])
if not any(t["name"].startswith("sweep-cores") for t in s.get("train", [])):
    bad.append("no cores sweep")
c = s.get("ceilings", {})
for k in ("fio_disk_mb_s", "fio_store_mb_s", "dd_tmpfs_mb_s"):
    if not (isinstance(c.get(k), (int, float)) and c[k] > 0):
        bad.append("ceilings." + k)
tg = {t["id"]: t for t in s.get("targets", [])}
for k in ("T1", "T2", "T3", "T4b", "T5", "T7"):
    if k not in tg:
        bad.append("target " + k + " missing")
    elif k != "T3" and tg[k]["measured"] is None:
        bad.append("target " + k + " not measured")
t2 = {t.get("reads"): t for t in s.get("targets", []) if t["id"] == "T2"}
for k in ("direct", "buffered"):
    if k not in t2 or t2[k]["measured"] is None:
        bad.append("T2 with " + k + " reads not measured")
if bad:
    print("FAIL: results.json:", "; ".join(bad)); sys.exit(1)
print("results.json ok:", len(r.get("records", [])), "records")
PYEOF
echo PASS
