#!/usr/bin/env bash
# bench_pytorch.sh - spritefs-bench pytorch --quick end to end (T13: resnet18 on the CPU fed by
# the spritefs reader and by ImageFolder, 2 DataLoader workers each; 60 camera-sized JPEGs,
# about 30 s on 2 cores): a wrong --model, --no-torch and a --data without train/ are refused up
# front; results.json has a row per feed with samples/s, each sample of the training split seen
# exactly once (the indices counted) and its labels counted; T13's ratio is the rows' and its
# verdict follows from it ("too small to measure" under 2 s); the table is on stdout. Then
# --data on a folder with a truncated JPEG and a text file named x.jpg: ImageFolder reads only
# the photos the store holds, and both feeds see the same number of samples. No mount or
# folder is left behind.
#   usage: bench_pytorch.sh BENCH_SCRIPT BUILD_DIR
set -uo pipefail
BENCH_PY_MODULES="numpy PIL torch torchvision"

source "$(dirname "$0")/bench_lib.sh"

bad_case() { # WORD ARGS...: exit 2, one line naming WORD, no output folder
	local word=$1 rc=0
	shift
	"$BENCH" pytorch --quick --out "$OUT/bad" "$@" >"$OUT/bad.log" 2>&1 || rc=$?
	[[ $rc -eq 2 && $(wc -l <"$OUT/bad.log") -eq 1 ]] || fail "$*: exit $rc: $(cat "$OUT/bad.log")"
	grep -q -- "$word" "$OUT/bad.log" || fail "$*: the message does not name $word: $(cat "$OUT/bad.log")"
	[[ ! -e $OUT/bad ]] || fail "$*: made the output folder before refusing"
}
bad_case --model --model cnn
bad_case --no-torch --no-torch
mkdir -p "$OUT/notrain"
bad_case --data --data "$OUT/notrain"
echo "a wrong --model, --no-torch and --data without train/ refused up front"

check() { # RESULTS TRAIN_FILES CLASSES: the rows, the exactly-once checks and T13
	$PY - "$@" <<'PYEOF'
import json, sys
r = json.load(open(sys.argv[1]))
want_n, want_k = int(sys.argv[2]), int(sys.argv[3])
s = r["summary"]
bad = []
def num(x, lo, hi):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and lo <= x <= hi
rows = {x["feed"]: x for x in s["rows"]}
if set(rows) != {"spritefs-reader", "imagefolder"}:
    bad.append(f"rows {sorted(rows)}")
for feed, x in rows.items():
    for k in ("samples_s", "epoch_samples_s", "train_s"):
        if not num(x.get(k), 1e-3, 1e7):
            bad.append(f"{feed}.{k} = {x.get(k)}")
    if x.get("split_samples") != want_n or x.get("classes") != want_k:
        bad.append(f"{feed}: {x.get('split_samples')} samples of {x.get('classes')} classes, "
                   f"not the store's {want_n} of {want_k}")
    if x.get("exactly_once") is not True or sum(x.get("label_counts") or []) != want_n:
        bad.append(f"{feed}: exactly_once {x.get('exactly_once')}, labels {x.get('label_counts')}")
    if x.get("workers") != 2 or x.get("batch") != 16:
        bad.append(f"{feed}: {x.get('workers')} workers, batch {x.get('batch')}")
for run in s["runs"]:
    if not num(run.get("others_busy"), 0.0, 1.0) or len(run.get("loadavg") or []) != 3:
        bad.append(f"{run['feed']} run {run['run']}: others_busy {run.get('others_busy')}, "
                   f"loadavg {run.get('loadavg')}")
    for e in run.get("per_epoch") or [{}]:
        if e.get("samples") != want_n or e.get("duplicates") != 0 or e.get("missing") != 0:
            bad.append(f"{run['feed']} run {run['run']}: {e.get('samples')} samples, "
                       f"{e.get('duplicates')} twice, {e.get('missing')} missing")
t = s["targets"][0]
ratio = rows["spritefs-reader"]["samples_s"] / rows["imagefolder"]["samples_s"] if len(rows) == 2 else None
if t["id"] != "T13" or ratio is None or abs(t["measured"] - ratio) > 1e-9:
    bad.append(f"T13 measured {t.get('measured')}, the rows give {ratio}")
short = any(x["train_s"] < 2 for x in rows.values())
want = "too small to measure" if short else ("pass" if ratio >= 5 else "miss")
if t.get("verdict") != want:
    bad.append(f"T13 verdict {t.get('verdict')}, expected {want} (train_s "
               f"{[x['train_s'] for x in rows.values()]}, ratio {ratio})")
if bad:
    print("FAIL: " + "; ".join(bad)); sys.exit(1)
print("results.json ok:", {f: round(x["samples_s"], 1) for f, x in rows.items()}, t["verdict"])
PYEOF
}

"$BENCH" pytorch --quick --out "$OUT/res" >"$OUT/stdout" 2>"$OUT/stderr" &
BPID=$!
wait "$BPID"
rc=$?
tail -12 "$OUT/stderr"
cat "$OUT/stdout"
((rc == 0)) || fail "spritefs-bench pytorch exited with $rc"
left=$(leftovers)
[[ -z $left ]] || fail "the bench left mounts or folders behind: $left"
grep -q '^| feed | runs | samples/s (steady) | samples/s (whole epochs) |' "$OUT/stdout" || fail "no table on stdout"
grep -q '^| T13 | ' "$OUT/stdout" || fail "no T13 row on stdout"
mp=$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["data"]["mean_megapixels"])' "$OUT/res/results.json")
$PY -c 'import sys; sys.exit(not 2 <= float(sys.argv[1]) <= 12)' "$mp" || fail "the photos average $mp megapixels, not 2-12"
check "$OUT/res/results.json" 48 5 || exit 1

# a folder of the user's with files the packer skips: ImageFolder must not meet them
D=$OUT/photos
$PY "$(dirname "$BENCH")/mkphotos.py" --count 60 --classes 3 --seed 2 --min-side 64 --max-side 200 "$D" \
	>"$OUT/mkphotos.log" 2>&1 || fail "mkphotos.py: $(tail -3 "$OUT/mkphotos.log")"
head -c 3000 "$D/train/c00/00000.jpg" >"$D/train/c01/truncated.jpg"
echo "not an image" >"$D/train/c02/x.jpg"
"$BENCH" pytorch --quick --data "$D" --out "$OUT/data" >"$OUT/data.stdout" 2>"$OUT/data.stderr" &
BPID=$!
wait "$BPID"
rc=$?
tail -8 "$OUT/data.stderr"
((rc == 0)) || fail "spritefs-bench pytorch --data exited with $rc"
left=$(leftovers)
[[ -z $left ]] || fail "the bench left mounts or folders behind: $left"
grep -q "not in the store" "$OUT/data.stdout" || fail "no note on the files the packer skipped"
[[ -e $D/train/c02/x.jpg ]] || fail "--data: the bench removed a file of the user's folder"
check "$OUT/data/results.json" 48 3 || exit 1
echo PASS
