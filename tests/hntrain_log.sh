#!/usr/bin/env bash
# hntrain_log - --log writes one JSON object per epoch with the documented
# fields and sane values, then a final object whose weights hash is the one
# printed on stdout.
source "$(dirname "$0")/hntrain_common.sh"

"$MKSTORE" "$TMP/d.sprites" --count-train 400 --count-test 90 --tile 16x16x1 --classes 3 \
	--sheet 64 >/dev/null || fail "mkstore"
h=$(hash_of --data "$TMP/d.sprites" --model mlp --epochs 3 --batch 50 --lr 0.05 --log "$TMP/log.jsonl")
/usr/bin/python3 - "$TMP/log.jsonl" "$h" <<'PY' || fail "log check"
import json, math, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
assert len(lines) == 4, f"{len(lines)} lines, expected 3 epochs + final"
need = ["epoch", "samples", "wall_s", "compute_s", "data_wait_s", "samples_per_s",
        "train_loss", "test_acc"]
for i, e in enumerate(lines[:3]):
    for k in need:
        assert k in e and e[k] is not None, f"epoch line {i}: no {k}"
    assert e["epoch"] == i + 1, e
    assert e["samples"] == 400, e
    assert e["steps"] == 8 * (i + 1), e
    assert e["wall_s"] > 0 and e["compute_s"] > 0 and e["data_wait_s"] >= 0, e
    assert e["compute_s"] + e["data_wait_s"] <= e["wall_s"] * 1.05 + 0.01, e
    assert abs(e["samples_per_s"] - 400 / e["wall_s"]) <= 0.01 * e["samples_per_s"] + 1, e
    assert 0 <= e["test_acc"] <= 1 and 0 <= e["train_acc"] <= 1, e
    assert math.isfinite(e["train_loss"]) and e["train_loss"] > 0, e
# learning shows in the log: the loss falls
assert lines[2]["train_loss"] < lines[0]["train_loss"], "loss did not fall"
f = lines[3]
assert f.get("final") is True, f
assert f["weights_xxh3"] == sys.argv[2], (f["weights_xxh3"], sys.argv[2])
assert f["epochs"] == 3 and f["samples"] == 1200 and f["source"] == "store", f
assert f["steps"] == 24 and f["run_epochs"] == 3 and f["run_steps"] == 24, f
assert f["test_acc"] == lines[2]["test_acc"], f
# mlp on 16x16x1, 3 classes: 256->256->128->3; FLOPs of the products, forward + backward
# (the first layer's input gradient is never made)
fl = 2 * 256 * 256 * 2 + 2 * 256 * 128 * 3 + 2 * 128 * 3 * 3
assert f["flops_per_sample"] == fl, (f["flops_per_sample"], fl)
assert abs(f["compute_gflops"] - fl * 1200 / f["compute_s"] / 1e9) <= 1e-3 * f["compute_gflops"], f
print("log ok:", lines[2])
PY

# A resumed run: the final line counts this process's epochs, steps and samples, and the
# whole run's under run_epochs and run_steps. Resuming the finished checkpoint trains
# nothing: its final line has epochs 0, the checkpoint's test accuracy, and null ratios.
r=(--data "$TMP/d.sprites" --model mlp --epochs 3 --batch 50 --lr 0.05)
"$HNTRAIN" --quiet "${r[@]}" --stop-after 1 --checkpoint "$TMP/c.ckpt" >/dev/null || fail "--stop-after 1"
hr=$(hash_of --data "$TMP/d.sprites" --resume "$TMP/c.ckpt" --checkpoint "$TMP/c.ckpt" \
	--log "$TMP/r.jsonl")
[[ $hr == "$h" ]] || fail "1 epoch + resume 2 gives $hr, 3 epochs $h"
he=$(hash_of --data "$TMP/d.sprites" --resume "$TMP/c.ckpt" --log "$TMP/e.jsonl")
[[ $he == "$h" ]] || fail "evaluating the finished checkpoint changed the weights"
/usr/bin/python3 - "$TMP/r.jsonl" "$TMP/e.jsonl" "$TMP/log.jsonl" <<'PY' || fail "resumed log check"
import json, sys
r, e, full = ([json.loads(l) for l in open(p)] for p in sys.argv[1:])
assert [x.get("epoch") for x in r] == [2, 3, None], r
assert [x["steps"] for x in r[:2]] == [16, 24], r
f = r[2]
assert f["final"] and f["epochs"] == 2 and f["steps"] == 16 and f["samples"] == 800, f
assert f["run_epochs"] == 3 and f["run_steps"] == 24, f
assert f["test_acc"] == full[2]["test_acc"], (f, full[2])
assert len(e) == 1, f"evaluating a finished checkpoint wrote {len(e)} lines"
f = e[0]
assert f["final"] and f["epochs"] == 0 and f["steps"] == 0 and f["samples"] == 0, f
assert f["run_epochs"] == 3 and f["run_steps"] == 24, f
assert f["test_acc"] == full[2]["test_acc"], (f, full[2])
assert f["data_wait_share"] is None and f["samples_per_s"] is None, f
assert f["wall_s"] == 0, f
print("resumed log ok:", r[2], e[0])
PY

# Without a test split the accuracy is null, not a made-up number.
"$HNTRAIN" --quiet --data "$TMP/d.sprites" --model mlp --test-split none --log "$TMP/n.jsonl" \
	>/dev/null || fail "--test-split none"
/usr/bin/python3 -c '
import json, sys
l = [json.loads(x) for x in open(sys.argv[1])]
assert l[0]["test_acc"] is None and l[1]["final"], l
' "$TMP/n.jsonl" || fail "test_acc should be null without a test split"
echo "PASS"
