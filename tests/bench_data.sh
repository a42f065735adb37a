#!/usr/bin/env bash
# bench_data.sh - spritefs-bench --data on a real-looking photo folder, one with the files a user's
# folder holds: good JPEGs (mkphotos.py) and a PNG, a truncated JPEG, a text file named x.jpg,
# an SVG and an empty class folder. The packer skips the bad three; the bench must then:
#   * complete on every medium (exit 0, no measurement failed): the tree's readers
#     (spritefs-readbench, PyTorch's ImageFolder, hntrain) never meet a file the packer skipped;
#   * read on every medium exactly the samples the store holds (the tree's files and decoded
#     samples, the store's, the mount's, PyTorch's train split, hntrain's epoch);
#   * say "too small to measure", never "miss", for targets on a store of 61 samples (every
#     timed run lasts milliseconds), in the table and in results.json;
#   * scale the throughput plot to what it measured, and announce only the PNG files it drew
#     (not DIR/*.png, not an older PNG left in the output folder);
# and torch_loader.py --files (--dataset accelerators --data reads the folder in place) reads
# only the files listed.
#   usage: bench_data.sh BENCH_SCRIPT BUILD_DIR
set -uo pipefail
BENCH_PY_MODULES="numpy PIL"

source "$(dirname "$0")/bench_lib.sh"

# ---- the folder ------------------------------------------------------------------------
D=$OUT/photos
$PY "$(dirname "$BENCH")/mkphotos.py" --count 60 --classes 3 --seed 1 --min-side 64 --max-side 120 "$D" \
	>"$OUT/mkphotos.log" 2>&1 || fail "mkphotos.py: $(tail -3 "$OUT/mkphotos.log")"
c=$D/train/c00
head -c 600 "$c/00000.jpg" >"$c/trunc.jpg"
echo "not a JPEG" >"$c/x.jpg"
printf '<svg xmlns="http://www.w3.org/2000/svg" width="8" height="8"/>\n' >"$c/drawing.svg"
mkdir "$D/train/empty"
$PY -c 'import sys, numpy as np; from PIL import Image
Image.fromarray((np.random.RandomState(1).rand(90, 100, 3) * 255).astype("uint8")).save(sys.argv[1])' \
	"$D/train/c01/rgb.png" || fail "cannot write a PNG"
# 48 train + 12 test JPEGs and the PNG: 49 train samples, 12 test; 3 files skipped
mkdir -p "$OUT/res"
touch -d 2020-01-01 "$OUT/res/old.png" # a PNG of an earlier run: not this run's

"$BENCH" --quick --no-gpu --data "$D" --tile 32x32x3 --out "$OUT/res" >"$OUT/stdout" 2>"$OUT/stderr" &
BPID=$!
wait "$BPID"
rc=$?
echo "--- stderr (tail)"
tail -30 "$OUT/stderr"
((rc == 0)) || fail "spritefs-bench --data exited with $rc: $(grep -h 'FAILED' "$OUT/stderr" | head -5)"
left=$(leftovers)
[[ -z $left ]] || fail "the bench left mounts or folders behind: $left"
grep -q FAILED "$OUT/stderr" && fail "a measurement failed: $(grep FAILED "$OUT/stderr")"
grep -q 'MISMATCH' "$OUT/stdout" && fail "the bench reports a mismatch between media"
grep -q 'are not in the store' "$OUT/stderr" || fail "no note that the skipped files were left out"
[[ $(wc -l <"$OUT/res/logs/left-out.txt") -eq 3 ]] || fail "logs/left-out.txt: $(cat "$OUT/res/logs/left-out.txt")"

# ---- the announced plots -----------------------------------------------------------------
done_line=$(grep ' done in ' "$OUT/stderr") || fail "no 'done in' line"
echo "$done_line"
[[ $done_line == *'*'* ]] && fail "the last line announces a pattern, not files: $done_line"
[[ $done_line == *old.png* ]] && fail "the last line announces an older run's PNG: $done_line"
announced=$(grep -o "[^ ,]*\.png" <<<"$done_line")
if command -v gnuplot >/dev/null; then
	[[ -n $announced ]] || fail "gnuplot is installed but no plot is announced: $done_line"
fi
for p in $announced; do
	[[ -s $p && $(head -c 8 "$p" | od -An -tx1 | tr -d ' \n') == 89504e470d0a1a0a ]] ||
		fail "announced $p is not a PNG file"
done

# ---- samples per medium, verdicts, the plot's scale --------------------------------------
$PY - "$OUT/res" "$OUT/stdout" <<'PYEOF' || exit 1
import json, math, os, re, sys
out, stdout = sys.argv[1], open(sys.argv[2]).read()
r = json.load(open(os.path.join(out, "results.json")))
data, s, bad = r["data"], r["summary"], []
if data.get("samples") != 61 or data.get("splits") != {"train": 49, "test": 12}:
    bad.append(f"store: {data.get('samples')} samples, splits {data.get('splits')} (expected 61: 49 + 12)")
if data.get("files") != 61 or data.get("left_out") != 3 or data.get("found") != 64:
    bad.append(f"tree: {data.get('files')} files read of {data.get('found')} found, {data.get('left_out')} left out")
n, ntrain = data.get("samples"), data.get("splits", {}).get("train")
seen = set()
for x in r["records"]:
    if x["kind"] not in ("read", "decode"):
        continue
    m, res = x["medium"], x.get("result") or {}
    passes = res.get("passes") or 1
    seen.add(m)
    if m.startswith("torch"):
        got, want = res.get("samples"), ntrain  # ImageFolder over train/
    elif x["kind"] == "decode":
        got, want = res.get("samples", 0) // passes, n
    elif m.startswith("tiff"):
        got, want = res.get("files"), n  # one file per sample
    else:
        continue
    if got != want:
        bad.append(f"{x['kind']} {m}/{x['state']}: {got} samples, the store holds {want}")
need = {"tiff-tmpfs", "tiff-ssd", "store-tmpfs", "store-ssd", "spritefs", "spritefs-npy"}
if os.system(f"{sys.executable} -c 'import torch, torchvision' 2>/dev/null") == 0:
    need |= {"torch-tiff-tmpfs", "torch-tiff-ssd", "torch-spritefs-byclass"}
if need - seen:
    bad.append(f"media not read: {sorted(need - seen)}")
train = [t for t in s["train"] if not t["name"].startswith(("sweep-", "dp-")) and not t.get("peer")]
if len(train) < 5 or any(t.get("samples") != ntrain for t in train):
    bad.append("training samples per run: %s (the store's train split: %s)"
               % ({t["name"]: t.get("samples") for t in train}, ntrain))
tg = s["targets"]
for t in tg:
    if t.get("verdict") == "miss" or t.get("pass") is False:
        bad.append(f"{t['id']} is a miss on a 61-sample store: {t.get('small')}")
for k in ("T1", "T2", "T3", "T5", "T7"):
    ts = [t for t in tg if t["id"] == k]
    if not ts or any(t.get("verdict") != "too small to measure" or not t.get("small") for t in ts):
        bad.append(f"{k}: verdicts {[t.get('verdict') for t in ts]}, not 'too small to measure'")
rows = [l for l in stdout.splitlines() if re.match(r"\| T[0-9]", l)]
if not any("too small to measure" in l for l in rows) or any("**miss**" in l for l in rows):
    bad.append("the targets table: " + " / ".join(rows))
# the plot: each panel's log axis spans the decades of its own values
gp = open(os.path.join(out, "plot.gp")).read()
ranges = [(float(a), float(b)) for a, b in re.findall(r"set yrange \[([0-9.e+-]+):([0-9.e+-]+)\]", gp)]
cols = [[float(v) for v in l.rsplit('"', 1)[1].split()[:2]]
        for l in open(os.path.join(out, "throughput.dat")) if not l.startswith("#")]
for (lo, hi), vals in zip(ranges, ([c[0] for c in cols], [c[1] for c in cols])):
    v = [x for x in vals if x > 0]
    if not (lo <= min(v) < 10 * lo and hi / 10 < max(v) <= hi):
        bad.append(f"plot axis [{lo}:{hi}] for values {min(v)}..{max(v)}")
if len(ranges) != 2:
    bad.append(f"plot.gp: {len(ranges)} fitted axes, not 2: {gp}")
if "too short to measure" not in gp:
    bad.append("plot.gp does not mark the runs too short to measure")
if bad:
    print("FAIL: " + "\nFAIL: ".join(bad)); sys.exit(1)
print(f"ok: {n} samples on {len(seen)} media, targets {[(t['id'], t['verdict']) for t in tg]}")
PYEOF
# ---- torch_loader.py --files: what --dataset accelerators --data gives it, the folder read in
# place (its store's train paths): the kept files only, the empty and skipped ones passed over
if $PY -c 'import torch, torchvision' 2>/dev/null; then
	find "$D/train" -type f ! -name trunc.jpg ! -name x.jpg ! -name drawing.svg | sort >"$OUT/kept.txt"
	res=$($PY "$(dirname "$BENCH")/torch_loader.py" --workers 0 --resize-short 40 --crop 32 \
		--files "$OUT/kept.txt" "$D/train" 2>"$OUT/tl.err") || fail "torch_loader.py --files: $(tail -3 "$OUT/tl.err")"
	[[ $res == *'"samples": 49,'* ]] || fail "torch_loader.py --files read other than 49 samples: $res"
	echo "torch_loader.py --files: $res"
fi
echo PASS
