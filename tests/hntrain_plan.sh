#!/usr/bin/env bash
# hntrain_plan - --plan prints the memory a run needs and exits without
# training: data set bytes, weights, gradients, optimizer state, activations
# per batch, K1 = weights / (samples x features), what the cpu backend
# allocates (checked against a real run's peak resident size), and whether it
# fits in RAM.
source "$(dirname "$0")/hntrain_common.sh"

"$MKSTORE" "$TMP/d.sprites" --count-train 1000 --count-test 200 --tile 28x28x1 --classes 10 \
	>/dev/null || fail "mkstore"
"$HNTRAIN" --data "$TMP/d.sprites" --model mlp --optim adam --plan --log "$TMP/log" >"$TMP/plan" \
	|| fail "--plan exited $?"
cat "$TMP/plan"
[[ ! -s $TMP/log ]] || fail "--plan trained (the log has lines)"
grep -q "weights xxh3" "$TMP/plan" && fail "--plan trained (printed a weights hash)"
for k in "data set" "weights" "gradients" "optimizer state" "activations per batch" "K1" "RAM:"; do
	grep -q "$k" "$TMP/plan" || fail "--plan does not print '$k'"
done
# mlp on 28x28x1 with 10 classes: 784*256+256 + 256*128+128 + 128*10+10 = 235146 parameters
grep -q "(235146 parameters)" "$TMP/plan" || fail "wrong parameter count"
grep -q "1000 train + 200 test samples x 784 bytes" "$TMP/plan" || fail "wrong data set size"
grep -q "(adam: m, v)" "$TMP/plan" || fail "adam state not named"
k1=$(awk '$1 == "K1" {print $2}' "$TMP/plan")
/usr/bin/python3 -c "import sys; v=float(sys.argv[1]); e=235146/(1000*784); assert abs(v-e) < 1e-3*e, (v, e)" \
	"$k1" || fail "K1 $k1 is not 235146 / (1000 x 784)"
grep -Eq "RAM: .* fit" "$TMP/plan" || fail "no RAM verdict"

# On the cpu the plan counts what the backend allocates (what backward keeps: im2col or
# Winograd matrices; each thread's scratch), so that a run's resident size does not exceed
# it by surprise: a residual net's real run holds at least that much (the backend zeroes
# all it allocates).
"$HNTRAIN" --data "$TMP/d.sprites" --model resnet-fm --batch 64 --threads 2 --plan >"$TMP/plan.r" ||
	fail "--plan resnet-fm exited $?"
grep -E "model total|allocates" "$TMP/plan.r"
/usr/bin/python3 - "$TMP/plan.r" "$HNTRAIN" "$TMP/d.sprites" <<'PY' || fail "the plan's cpu backend bytes"
import re, resource, subprocess, sys
units = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
def size(key):
    m = re.search(key + r"\s+([0-9.]+) (B|KiB|MiB|GiB)", open(sys.argv[1]).read())
    assert m, f"the plan has no '{key}' line"
    return float(m.group(1)) * units[m.group(2)]
alloc, model = size("cpu backend allocates"), size("model total")
subprocess.run([sys.argv[2], "--data", sys.argv[3], "--model", "resnet-fm", "--batch", "64",
                "--threads", "2", "--limit", "128", "--test-split", "none", "--quiet"],
               check=True, stdout=subprocess.DEVNULL)
rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
print(f"resnet-fm batch 64: the plan's cpu backend {alloc / 2**20:.1f} MiB, model total "
      f"{model / 2**20:.1f} MiB; a run's peak resident size {rss / 2**20:.1f} MiB")
assert rss >= 0.95 * alloc, "the run holds less than the plan says the backend allocates"
PY
echo "PASS"
