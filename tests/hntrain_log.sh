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
assert f["test_acc"] == lines[2]["test_acc"], f
print("log ok:", lines[2])
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
