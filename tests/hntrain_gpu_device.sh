#!/usr/bin/env bash
# hntrain_gpu_device - --device gpu either trains (a GPU and the plugin are
# there) or stops with exit 1 and a message saying which is missing; never a
# crash. --plan --device gpu reports the GPU or why there is none.
source "$(dirname "$0")/hntrain_common.sh"

"$MKSTORE" "$TMP/d.sprites" --count-train 300 --count-test 50 --tile 28x28x1 --classes 4 \
	>/dev/null || fail "mkstore"
rc=0
"$HNTRAIN" --quiet --data "$TMP/d.sprites" --model mlp --device gpu >"$TMP/out" 2>"$TMP/err" || rc=$?
cat "$TMP/out" "$TMP/err"
have_gpu=0
nvidia-smi -L >/dev/null 2>&1 && have_gpu=1
if [[ $rc -eq 0 ]]; then
	[[ $have_gpu -eq 1 ]] || fail "--device gpu succeeded on a machine without a GPU"
	grep -q "^weights xxh3 " "$TMP/out" || fail "no weights hash from the gpu run"
else
	[[ $rc -eq 1 ]] || fail "--device gpu exited $rc (expected 1, or 0 with a GPU)"
	grep -Eq "built without the CUDA backend|no CUDA device found|CUDA driver|cannot load the CUDA backend" \
		"$TMP/err" || fail "--device gpu failed without saying why"
	if [[ $have_gpu -eq 1 && ${HNTRAIN_CUDA_BUILT:-0} == 1 ]]; then
		fail "a GPU and the plugin are here, yet --device gpu failed"
	fi
fi
"$HNTRAIN" --data "$TMP/d.sprites" --model mlp --device gpu --plan >"$TMP/plan" 2>&1 \
	|| fail "--plan --device gpu exited $?"
grep -q "GPU:" "$TMP/plan" || fail "--plan --device gpu says nothing about the GPU"
grep "GPU:" "$TMP/plan"
echo "PASS"
