#!/usr/bin/env bash
# bench_review.sh - spritefs-bench review --quick end to end (resnet-fm, 256 training and 256
# test images of Fashion-MNIST through one mount, 1 epoch, about a minute on 2 cores): a bad
# --model or --data is refused up front; results.json has a row for every run of the CPU
# matrix, each measured row with a time per epoch, samples/s that agree with the split's size,
# and a test accuracy; the rows that cannot run on the CPU say why instead of a number; the
# effects (GA on/off, the baseline repeated) are ratios of the rows; the report's "what the
# measurements support" section is on stdout; no mount or folder is left behind. Then
# spritefs-bench accuracy --quick: the figure it prints is its log's.
#   usage: bench_review.sh BENCH_SCRIPT BUILD_DIR
set -uo pipefail
BENCH_PY_MODULES="numpy"
[[ -d ${SPRITEFS_FMNIST:-/usr/share/datasets/fashion-mnist} ]] || { echo "SKIP: no Fashion-MNIST"; exit 77; }

source "$(dirname "$0")/bench_lib.sh"

bad_case() { # WORD ARGS...: exit 2, one line naming WORD, no output folder
	local word=$1 rc=0
	shift
	"$BENCH" review --quick --out "$OUT/bad" "$@" >"$OUT/bad.log" 2>&1 || rc=$?
	[[ $rc -eq 2 && $(wc -l <"$OUT/bad.log") -eq 1 ]] || fail "$*: exit $rc: $(cat "$OUT/bad.log")"
	grep -q -- "$word" "$OUT/bad.log" || fail "$*: the message does not name $word: $(cat "$OUT/bad.log")"
	[[ ! -e $OUT/bad ]] || fail "$*: made the output folder before refusing"
}
bad_case --model --model cnn
bad_case --data --data "$OUT"
echo "a non-residual --model and --data refused up front"

"$BENCH" review --quick --no-gpu --out "$OUT/res" >"$OUT/stdout" 2>"$OUT/stderr" &
BPID=$!
wait "$BPID"
rc=$?
tail -20 "$OUT/stderr"
cat "$OUT/stdout"
((rc == 0)) || fail "spritefs-bench review exited with $rc"
left=$(leftovers)
[[ -z $left ]] || fail "the bench left mounts or folders behind: $left"
grep -q '^| run | framework | GA | AMP | host memory | epoch s | samples/s | test acc |' "$OUT/stdout" ||
	fail "no table on stdout"
grep -q '^### What the measurements support' "$OUT/stdout" || fail "no 'what the measurements support' section"

torch=1
$PY -c 'import torch, torchvision' 2>/dev/null || torch=0
$PY - "$OUT/res/results.json" "$torch" <<'PYEOF' || exit 1
import json, sys
r = json.load(open(sys.argv[1]))
torch = sys.argv[2] == "1"
s = r["summary"]
bad = []
def num(x, lo, hi):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and lo <= x <= hi
splits = r["data"].get("splits", {})
if splits != {"train": 256, "test": 256}:
    bad.append(f"the mount's splits are {splits}, not 256 and 256")
if s.get("device") != "cpu" or s.get("batch") != 64:
    bad.append(f"device {s.get('device')}, batch {s.get('batch')}: expected the CPU at 64")
rows = {x["name"]: x for x in s.get("rows", [])}
measured = ["hntrain-ga1-off", "hntrain-ga2-off", "hntrain-ga1-off-repeat"]
if torch:
    measured += ["pytorch-ga1-off", "pytorch-ga2-off", "pytorch-ga1-bf16", "pytorch-ga2-bf16",
                 "pytorch-ga1-off-repeat"]
for name in measured:
    x = rows.get(name)
    if not x:
        bad.append(f"no row {name}"); continue
    if x.get("status") != "measured":
        bad.append(f"{name}: status {x.get('status')} ({x.get('why')})"); continue
    for k, lo, hi in (("epoch_s", 1e-3, 3600), ("samples_s", 0.01, 1e7), ("test_acc", 0.0, 1.0)):
        if not num(x.get(k), lo, hi):
            bad.append(f"{name}.{k} = {x.get(k)}")
    # samples/s x the epoch's seconds is the training split: the numbers are the run's own
    if num(x.get("epoch_s"), 1e-3, 3600) and num(x.get("samples_s"), 0.01, 1e7) and \
            abs(x["samples_s"] * x["epoch_s"] - 256) > 2.6:
        bad.append(f"{name}: {x['samples_s']} samples/s x {x['epoch_s']} s is not the 256 training samples")
    if len(x.get("epoch_times_s") or []) != 1:
        bad.append(f"{name}: epoch times {x.get('epoch_times_s')}, not one epoch")
    want_ga = 2 if "-ga2-" in name else 1
    if x.get("ga") != want_ga or x.get("micro_batch") != 64 // want_ga:
        bad.append(f"{name}: ga {x.get('ga')} of micro-batch {x.get('micro_batch')}")
    if name.startswith("hntrain") and f"--accum {want_ga}" not in (x.get("command") or ""):
        bad.append(f"{name}: its command does not say --accum {want_ga}: {x.get('command')}")
for name, why in (("hntrain-ga1-amp", "CPU backend"), ("hntrain-ga2-amp", "CPU backend"),
                  ("hntrain-ga1-off-pinned", "GPU only"), ("pytorch-ga1-off-pinned", "GPU only")):
    x = rows.get(name)
    if not x or x.get("status") != "not available" or why not in (x.get("why") or ""):
        bad.append(f"{name}: expected 'not available' saying '{why}': {x}")
    elif x.get("epoch_s") is not None or x.get("samples_s") is not None:
        bad.append(f"{name}: a number where nothing was measured: {x}")
e = s.get("effects", {}).get("hntrain", {})
ga = e.get("ga") or {}
# the baseline is the mean of its two runs (first and last)
base = (rows["hntrain-ga1-off"]["epoch_s"] + rows["hntrain-ga1-off-repeat"]["epoch_s"]) / 2
if not num(e.get("baseline_epoch_s"), 1e-3, 3600) or abs(e["baseline_epoch_s"] - base) > 1e-9:
    bad.append(f"hntrain's baseline {e.get('baseline_epoch_s')} is not its two runs' mean {base}")
if not num(ga.get("time_ratio"), 1e-3, 1e3) or \
        abs(ga["time_ratio"] - rows["hntrain-ga2-off"]["epoch_s"] / base) > 1e-9:
    bad.append(f"hntrain GA on/off ratio {ga} is not the rows' epoch times over each other")
if not num(e.get("repeat_ratio"), 1e-3, 1e3):
    bad.append(f"hntrain's repeat ratio {e.get('repeat_ratio')}")
if torch and not num((s["effects"].get("pytorch", {}).get("amp") or {}).get("time_ratio"), 1e-3, 1e3):
    bad.append(f"PyTorch's AMP ratio {s['effects'].get('pytorch')}")
sup = s.get("supports") or []
if not any(l.startswith("* hntrain: GA ") and f"{ga.get('time_ratio', 0):.2f}x" in l for l in sup):
    bad.append(f"the support section does not give hntrain's GA ratio: {sup}")
if bad:
    print("FAIL: results.json: " + "; ".join(bad)); sys.exit(1)
print("results.json ok:", {n: round(rows[n]["samples_s"], 1) for n in measured})
PYEOF

# spritefs-bench accuracy --quick: one epoch of resnet-fm on 1,024 samples through a mount; the
# figure on stdout is the log's, held against 94% within 15 epochs
"$BENCH" accuracy --quick --no-gpu --out "$OUT/acc" >"$OUT/acc.stdout" 2>"$OUT/acc.stderr" &
BPID=$!
wait "$BPID"
rc=$?
tail -5 "$OUT/acc.stderr"
cat "$OUT/acc.stdout"
((rc == 0)) || fail "spritefs-bench accuracy exited with $rc"
left=$(leftovers)
[[ -z $left ]] || fail "spritefs-bench accuracy left mounts or folders behind: $left"
line=$(grep '^spritefs-bench accuracy: best test accuracy ' "$OUT/acc.stdout") || fail "no figure on stdout"
$PY - "$OUT/acc/results.json" "$OUT/acc/logs/accuracy.jsonl" "$line" <<'PYEOF' || exit 1
import json, sys
s = json.load(open(sys.argv[1]))["summary"]
log = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
ep = [l for l in log if "epoch" in l and not l.get("final")]
bad = []
if len(ep) != 1 or len(s["epochs"]) != 1:
    bad.append(f"{len(ep)} epoch lines in the log, {len(s['epochs'])} in the summary: expected 1")
elif s["best_test_acc"] != ep[0]["test_acc"] or not 0 < s["best_test_acc"] <= 1:
    bad.append(f"best {s['best_test_acc']} is not the log's {ep[0]['test_acc']}")
elif s["pass"] is not (s["best_test_acc"] >= 0.94) or s["target"] != 0.94 or s["target_epochs"] != 15:
    bad.append(f"pass {s['pass']} for {s['best_test_acc']} against {s['target']} in {s['target_epochs']}")
elif f"{100 * s['best_test_acc']:.2f}%" not in sys.argv[3] or ("pass" if s["pass"] else "miss") not in sys.argv[3]:
    bad.append(f"the printed figure does not say {s['best_test_acc']}: {sys.argv[3]}")
if "--limit 1024" not in (s.get("command") or "") or "--augment flip" not in s["command"]:
    bad.append(f"the run's command: {s.get('command')}")
if bad:
    print("FAIL: accuracy: " + "; ".join(bad)); sys.exit(1)
print("accuracy ok:", sys.argv[3])
PYEOF
echo PASS
