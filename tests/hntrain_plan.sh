#!/usr/bin/env bash
# hntrain_plan - --plan prints the memory a run needs and exits without
# training: data set bytes, weights, gradients, optimizer state, activations
# per batch, K1 = weights / (samples x features), and whether it fits in RAM.
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
echo "PASS"
