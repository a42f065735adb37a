#!/usr/bin/env bash
# hntrain_resume - a checkpoint continues a run exactly: 4 epochs in one go
# and 2 epochs + --resume for the other 2 end with bit-identical weights, for
# momentum and for adam (optimizer state), with a step and a cosine schedule,
# warm-up and gradient accumulation, and for batchnorm with --normalize auto
# (running statistics, mean and std). The resume names only the data and the
# checkpoint: lr, schedule and epochs come from the checkpoint. An --lr given
# at resume wins, with a note. A damaged checkpoint is refused by name.
source "$(dirname "$0")/hntrain_common.sh"

"$MKSTORE" "$TMP/d.sprites" --count-train 500 --count-test 100 --tile 12x12x1 --classes 4 \
	--sheet 64 >/dev/null || fail "mkstore"

declare -A sched=(
	[momentum]="--lr 0.03 --schedule step --step-epochs 1 --gamma 0.5 --warmup 5"
	[adam]="--lr 0.002 --schedule cosine --warmup 5"
)
for optim in momentum adam; do
	# shellcheck disable=SC2206
	args=(--data "$TMP/d.sprites" --model c8k3-r-m2-d32-r --optim "$optim" --epochs 4
	      --batch 32 --accum 2 ${sched[$optim]} --seed 11)
	full=$(hash_of "${args[@]}")
	half=$(hash_of "${args[@]}" --stop-after 2 --checkpoint "$TMP/$optim.ckpt")
	[[ -s $TMP/$optim.ckpt ]] || fail "no checkpoint written"
	ls "$TMP" | grep -q '\.tmp\.' && fail "a temporary checkpoint file was left behind"
	[[ $half != "$full" ]] || fail "$optim: 2 epochs give the same weights as 4"
	cp "$TMP/$optim.ckpt" "$TMP/$optim-2.ckpt"
	resumed=$(hash_of --data "$TMP/d.sprites" --resume "$TMP/$optim.ckpt" \
		--checkpoint "$TMP/$optim.ckpt")
	grep -q "note" "$TMP/stderr" && fail "$optim: a plain resume printed: $(cat "$TMP/stderr")"
	echo "$optim: 4 epochs $full, 2 epochs $half, 2 + resume 2: $resumed"
	[[ $resumed == "$full" ]] || fail "$optim: resumed run ends with $resumed, the full run with $full"
	# The checkpoint now holds epoch 4: resuming again trains nothing, same weights, and
	# evaluates it on the test split (the accuracy of the full run's last epoch).
	again=$(hash_of --data "$TMP/d.sprites" --epochs 4 --resume "$TMP/$optim.ckpt")
	[[ $again == "$full" ]] || fail "$optim: the epoch-4 checkpoint holds other weights"
	"$HNTRAIN" "${args[@]}" >"$TMP/full.out" 2>&1 || fail "$optim: full run"
	"$HNTRAIN" --data "$TMP/d.sprites" --resume "$TMP/$optim.ckpt" >"$TMP/eval.out" 2>&1 ||
		fail "$optim: resuming the finished checkpoint: $(cat "$TMP/eval.out")"
	grep -qx "nothing to train: $TMP/$optim.ckpt has 4 of 4 epochs; evaluating it on the test split" \
		"$TMP/eval.out" || fail "$optim: finished checkpoint: $(cat "$TMP/eval.out")"
	acc=$(sed -n 's/^epoch 4\/4 .*  test \([0-9.]*%\) .*/\1/p' "$TMP/full.out")
	grep -Eq "^epoch 4/4  test $acc  test loss [0-9.]+  \(100 samples evaluated in [0-9.]+ s\)$" \
		"$TMP/eval.out" || fail "$optim: the finished checkpoint is not evaluated to $acc: $(cat "$TMP/eval.out")"
	echo "$optim: finished checkpoint evaluated: test $acc"
	# Another --lr at resume is used, and said.
	other=$(hash_of --data "$TMP/d.sprites" --resume "$TMP/$optim-2.ckpt" --lr 0.0005)
	grep -q -- "--lr 0.0005 differs from the checkpoint's" "$TMP/stderr" ||
		fail "$optim: no note for --lr at resume: $(cat "$TMP/stderr")"
	[[ $other != "$full" ]] || fail "$optim: --lr 0.0005 at resume changed nothing"
	echo "$optim: resume with --lr 0.0005: $other ($(cat "$TMP/stderr"))"
done
# Batchnorm's running statistics and --normalize auto's mean and std travel in the
# checkpoint: 2 + 2 epochs end as 4 do, and another --normalize at resume is refused.
args=(--data "$TMP/d.sprites" --model c8k3p1-bn-r-m2-c8k3-bn-r-gap --epochs 4 --batch 32
      --normalize auto --seed 5)
full=$(hash_of "${args[@]}")
hash_of "${args[@]}" --stop-after 2 --checkpoint "$TMP/bn.ckpt" >/dev/null
resumed=$(hash_of --data "$TMP/d.sprites" --resume "$TMP/bn.ckpt")
echo "batchnorm + --normalize auto: 4 epochs $full, 2 + resume 2: $resumed"
[[ $resumed == "$full" ]] || fail "batchnorm: resumed run ends with $resumed, the full run with $full"
expect_fail "the checkpoint fixes the input normalisation" --data "$TMP/d.sprites" \
	--resume "$TMP/bn.ckpt" --normalize 0.5:0.2
expect_fail "stop-after 5 is beyond --epochs 4" --data "$TMP/d.sprites" \
	--resume "$TMP/adam-2.ckpt" --stop-after 5
# A run cannot end before the epochs the checkpoint (2 of 4) has trained: exit 2, said so.
expect_fail "^hntrain: --stop-after 1: $TMP/adam-2.ckpt has already trained 2 of 4 epochs \(give 2 or more" \
	--data "$TMP/d.sprites" --resume "$TMP/adam-2.ckpt" --stop-after 1
grep -q "^exit 2$" <("$HNTRAIN" --data "$TMP/d.sprites" --resume "$TMP/adam-2.ckpt" \
	--stop-after 1 >/dev/null 2>&1; echo "exit $?") || fail "--stop-after 1 at epoch 2: not exit 2"
expect_fail "^hntrain: --epochs 1 is fewer than the 2 epochs $TMP/adam-2.ckpt has trained" \
	--data "$TMP/d.sprites" --resume "$TMP/adam-2.ckpt" --epochs 1
grep -q "note" "$TMP/err" && fail "--epochs 1 at epoch 2: a note before the error: $(cat "$TMP/err")"
# Fewer --epochs than the checkpoint's 4 shorten the cosine schedule, more stretch it.
hash_of --data "$TMP/d.sprites" --resume "$TMP/adam-2.ckpt" --epochs 3 >/dev/null
grep -qx "hntrain: note: --epochs 3 differs from the checkpoint's 4 (the cosine schedule is shortened)" \
	"$TMP/stderr" || fail "--epochs 3 at resume: $(cat "$TMP/stderr")"
hash_of --data "$TMP/d.sprites" --resume "$TMP/adam-2.ckpt" --epochs 5 >/dev/null
grep -qx "hntrain: note: --epochs 5 differs from the checkpoint's 4 (the cosine schedule is stretched)" \
	"$TMP/stderr" || fail "--epochs 5 at resume: $(cat "$TMP/stderr")"
# --stop-after at the checkpoint's epoch: nothing to train, the checkpoint is evaluated.
"$HNTRAIN" --data "$TMP/d.sprites" --resume "$TMP/adam-2.ckpt" --stop-after 2 >"$TMP/out" 2>&1 ||
	fail "--stop-after 2 at epoch 2: $(cat "$TMP/out")"
grep -qx "nothing to train: $TMP/adam-2.ckpt has 2 of 4 epochs, where --stop-after 2 stops; evaluating it on the test split" \
	"$TMP/out" || fail "--stop-after 2 at epoch 2: $(cat "$TMP/out")"
grep -q "^epoch 2/4  test [0-9.]*%" "$TMP/out" || fail "--stop-after 2 at epoch 2: not evaluated"

# Mismatches and damage are refused with a message.
expect_fail "trains model" --data "$TMP/d.sprites" --model mlp --epochs 4 --resume "$TMP/adam.ckpt"
expect_fail "seed" --data "$TMP/d.sprites" --seed 12 --epochs 4 --resume "$TMP/adam.ckpt"
"$MKSTORE" "$TMP/e.sprites" --count-train 300 --count-test 50 --tile 12x12x1 --classes 4 >/dev/null
expect_fail "samples per epoch" --data "$TMP/e.sprites" --epochs 4 --resume "$TMP/adam.ckpt"
cp "$TMP/adam.ckpt" "$TMP/flip.ckpt"
printf '\x55' | dd of="$TMP/flip.ckpt" bs=1 seek=3000 conv=notrunc status=none
expect_fail "checksum" --data "$TMP/d.sprites" --epochs 4 --resume "$TMP/flip.ckpt"
head -c 1000 "$TMP/adam.ckpt" >"$TMP/short.ckpt"
expect_fail "truncated|too short" --data "$TMP/d.sprites" --epochs 4 --resume "$TMP/short.ckpt"
expect_fail "not an hntrain checkpoint" --data "$TMP/d.sprites" --epochs 4 --resume "$TMP/d.sprites"
expect_fail "No such file" --data "$TMP/d.sprites" --resume "$TMP/none.ckpt"
echo "PASS"
