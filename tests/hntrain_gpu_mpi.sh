#!/usr/bin/env bash
# hntrain_gpu_mpi - data-parallel training on GPUs: 2 ranks, one GPU each,
# gradients summed on the devices with NCCL (cuda/nccl.c).
#
# Two identical runs give the same weights (the sum adds the ranks' slices
# in rank order, whatever NCCL's algorithm), every epoch line has a
# communication share, and 2 ranks x --batch 32 reach the accuracy of one
# GPU with the global batch of 64 within 3 points. Needs two GPUs, the
# plugin built with nccl.h, NCCL at run time and mpirun: skips (77) on a
# machine without them, which is every machine without two GPUs.
source "$(dirname "$0")/hntrain_common.sh"
[[ ${HNTRAIN_CUDA_BUILT:-0} == 1 ]] || { echo "SKIP: built without the CUDA plugin"; exit 77; }
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
[[ $ngpu -ge 2 ]] || { echo "SKIP: $ngpu GPU(s); 2 ranks need 2"; exit 77; }
source "$(dirname "$0")/mpi_lib.sh"

"$MKSTORE" "$TMP/syn.sprites" --count-train 2048 --count-test 512 --tile 28x28x1 --classes 5 \
	--sheet 128 >/dev/null || fail "mkstore"
common=(--data "$TMP/syn.sprites" --device gpu --model cnn --epochs 3 --lr 0.05 --seed 11)
a=$(mpi_hash 2 "${common[@]}" --batch 32)
b=$(mpi_hash 2 "${common[@]}" --batch 32)
echo "2 ranks: $a, again: $b"
[[ $a == "$b" ]] || fail "two identical 2-rank GPU runs gave $a and $b"

timeout "$MPI_LIMIT" "${MPIRUN[@]}" -np 2 "$HNTRAIN" "${common[@]}" --batch 32 \
	--log "$TMP/two.jsonl" >"$TMP/out" 2>&1 || { cat "$TMP/out"; fail "2-rank run with --log"; }
grep -q "NCCL" "$TMP/out" || fail "the device line does not name NCCL"
"$HNTRAIN" "${common[@]}" --batch 64 --log "$TMP/one.jsonl" >/dev/null || fail "1 GPU run"
python3 - "$TMP/two.jsonl" "$TMP/one.jsonl" <<'PY' || fail "log check"
import json, sys
two = [json.loads(l) for l in open(sys.argv[1])]
one = [json.loads(l) for l in open(sys.argv[2])]
epochs = [r for r in two if not r.get("final")]
assert epochs and all(r["comm_s"] > 0 for r in epochs), "no communication time per epoch"
a2, a1 = two[-1]["test_acc"], one[-1]["test_acc"]
print(f"test accuracy: 2 ranks x 32 {a2:.4f}, 1 GPU x 64 {a1:.4f}")
assert abs(a2 - a1) <= 0.03, (a2, a1)
PY
echo "ok"
