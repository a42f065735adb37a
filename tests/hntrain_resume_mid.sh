#!/usr/bin/env bash
# hntrain_resume_mid - a checkpoint written inside an epoch continues the run
# exactly: interrupted at many points and resumed, every run ends with the
# weights of the uninterrupted one (CPU). The points: the first batch of an
# epoch, its last (a partial global batch: 500 samples in batches of 32),
# inside a group of --accum, the last partial group, a stop during the
# evaluation, a SIGKILL after a --checkpoint-every checkpoint, a real SIGTERM
# from outside at whatever moment it lands, SIGUSR1 (checkpoint and go on),
# a resume on other --threads, and across media (stopped on the store,
# resumed from a spritefs mount of it, and back). With dropout and --augment, for adam and
# momentum. A stop exits 75 and says where; a mid-epoch checkpoint is
# refused where the run would end inside it, and on other data of the same
# shape.
source "$(dirname "$0")/hntrain_common.sh"

"$MKSTORE" "$TMP/d.sprites" --count-train 500 --count-test 100 --tile 12x12x1 --classes 4 \
	--sheet 64 >/dev/null || fail "mkstore"
D=(--data "$TMP/d.sprites")

# stop_at N ARGS...: HNTRAIN_RAISE_AT_BATCH=N (TERM unless N:SIG) on ARGS --checkpoint
# $TMP/c.ckpt: must exit 75 and write the checkpoint; prints the stop line.
stop_at() {
	local at=$1 rc=0
	shift
	rm -f "$TMP/c.ckpt"
	HNTRAIN_RAISE_AT_BATCH=$at "$HNTRAIN" --quiet "$@" --checkpoint "$TMP/c.ckpt" \
		>"$TMP/out" 2>"$TMP/err" || rc=$?
	[[ $rc -eq 75 ]] || fail "signal at batch $at: exit $rc, expected 75: $(cat "$TMP/err")"
	grep -q "weights xxh3" "$TMP/out" && fail "signal at batch $at: a final hash was printed"
	[[ -s $TMP/c.ckpt ]] || fail "signal at batch $at: no checkpoint"
	grep -o "stopped .*(step [0-9]*)" "$TMP/err"
}

# killed ENV... CMD...: run it, its output and the shell's "Killed" line dropped; its status
killed() {
	bash -c '"$@"; exit $?' _ env "$@" >/dev/null 2>&1
}

# resumed_hash: the weights after --resume $TMP/c.ckpt to the end (and the checkpoint kept)
resumed_hash() {
	hash_of "${D[@]}" --resume "$TMP/c.ckpt" --checkpoint "$TMP/c.ckpt" "$@"
}

check_points() { # NAME "POINTS" ARGS...
	local name=$1 points=$2 full at where got
	shift 2
	full=$(hash_of "$@")
	for at in $points; do
		where=$(stop_at "$at" "$@")
		got=$(resumed_hash)
		echo "$name: signal before batch $at, $where, resumed: $got"
		[[ $got == "$full" ]] || fail "$name: stopped at batch $at ($where), resumed: $got; uninterrupted: $full"
	done
	echo "$name: uninterrupted $full"
}

# 500 samples / 32 = 16 batches per epoch (the last of 20 samples); epochs start at 16, 32.
# accum 1: the first batch of epoch 2 (16), one inside (21), its last, partial batch (31:
# stopped after it, before the evaluation), the run's first batch (0).
check_points "momentum, accum 1" "16 21 31 0" "${D[@]}" --model c8k3-r-m2-d32-x0.3-r --optim momentum \
	--lr 0.03 --epochs 3 --batch 32 --seed 11 --schedule step --step-epochs 1 --gamma 0.5 --warmup 5
# accum 3 (groups of batches 0-2, 3-5, ..., 15 alone: the partial last group): signals inside
# a group (20, 22) stop at its end; 31 and 30 stop after the last, partial group; 3 after a
# group boundary. With dropout and --augment, whose draws follow the sample's place.
check_points "adam, accum 3, augment" "20 22 30 31 3" "${D[@]}" --model c8k3-r-m2-d32-x0.3-r --optim adam \
	--lr 0.002 --epochs 3 --batch 32 --accum 3 --seed 5 --augment crop:2,flip --schedule cosine --warmup 4

args=("${D[@]}" --model c8k3-r-m2-d32-r --optim adam --lr 0.002 --epochs 3 --batch 32 --accum 2 --seed 7)
full=$(hash_of "${args[@]}")

# The stop line names the place; the checkpoint inside an accumulation group is at its end.
where=$(stop_at 20 "${args[@]}")
[[ $where == "stopped inside epoch 2, after batch 6 of 16 (step 11)" ]] ||
	fail "signal before batch 20 with --accum 2: '$where'"
# SIGINT stops as SIGTERM does.
where=$(stop_at 20:INT "${args[@]}")
grep -q "^hntrain: SIGINT: stopped" "$TMP/err" || fail "SIGINT: $(cat "$TMP/err")"
# A resume on 1 thread of a checkpoint written on 2 continues the same (threads do not
# change the sums, docs/HNTRAIN.md).
got=$(resumed_hash --threads 1)
[[ $got == "$full" ]] || fail "resumed on 1 thread: $got, uninterrupted $full"
echo "resumed on --threads 1 after SIGINT: $got"

# The run cannot end inside the epoch the checkpoint stopped in.
stop_at 20 "${args[@]}" >/dev/null
cp "$TMP/c.ckpt" "$TMP/mid.ckpt"
expect_fail "stopped inside epoch 2 \(give 2 or more" "${D[@]}" --resume "$TMP/mid.ckpt" --stop-after 1
expect_fail "stopped inside epoch 2 \(give 2 or more" "${D[@]}" --resume "$TMP/mid.ckpt" --epochs 1
"$HNTRAIN" "${D[@]}" --resume "$TMP/mid.ckpt" --stop-after 2 >"$TMP/out" 2>&1 ||
	fail "resume to the end of the epoch: $(cat "$TMP/out")"
grep -qx "continuing epoch 2 at global batch 6 of 16 (sample 192 of its order)" "$TMP/out" ||
	fail "resume does not say where it continues: $(cat "$TMP/out")"
grep -q "^epoch 2/3 " "$TMP/out" || fail "no line for epoch 2 after the resume"

# SIGUSR1: a checkpoint at the next step boundary, and the run goes on to the same end.
rm -f "$TMP/c.ckpt"
got=$(HNTRAIN_RAISE_AT_BATCH=20:USR1 hash_of "${args[@]}" --checkpoint "$TMP/c.ckpt")
[[ $got == "$full" ]] || fail "SIGUSR1 changed the run: $got, uninterrupted $full"
echo "SIGUSR1 at batch 20: the run goes on, $got"

# --checkpoint-every 4 (steps), then a crash (SIGKILL) before batch 21: the checkpoint of
# step 8 (epoch 1 has 8 steps) resumes to the same end. Checkpoints change nothing either.
rm -f "$TMP/c.ckpt"
rc=0
killed HNTRAIN_RAISE_AT_BATCH=21:KILL "$HNTRAIN" --quiet "${args[@]}" --checkpoint "$TMP/c.ckpt" \
	--checkpoint-every 4 || rc=$?
[[ $rc -eq 137 ]] || fail "SIGKILL: exit $rc"
ls "$TMP" | grep -q '\.tmp\.' && fail "a temporary checkpoint file was left behind"
got=$(resumed_hash)
[[ $got == "$full" ]] || fail "--checkpoint-every 4 then SIGKILL, resumed: $got; uninterrupted $full"
echo "--checkpoint-every 4, SIGKILL before batch 21, resumed: $got"
# --checkpoint-every 0.01m (0.6 s), then a crash near the end: the last checkpoint, inside an
# epoch where the machine is slow enough for one there, resumes to the same end.
"$MKSTORE" "$TMP/t.sprites" --count-train 4000 --count-test 100 --tile 16x16x1 --classes 4 \
	--sheet 256 >/dev/null || fail "mkstore t"
targs=(--data "$TMP/t.sprites" --model c32k3-r-c32k3-r-m2-d64-r --epochs 2 --batch 16 --seed 3 --threads 1)
tfull=$(hash_of "${targs[@]}")
rm -f "$TMP/c.ckpt"
killed HNTRAIN_RAISE_AT_BATCH=499:KILL "$HNTRAIN" --quiet "${targs[@]}" --checkpoint "$TMP/c.ckpt" \
	--checkpoint-every 0.01m
[[ -s $TMP/c.ckpt ]] || fail "--checkpoint-every 0.01m: no checkpoint"
pos=$(od -An -tu8 -j512 -N8 "$TMP/c.ckpt" | tr -d ' ')
got=$(hash_of --data "$TMP/t.sprites" --resume "$TMP/c.ckpt" --threads 1)
echo "--checkpoint-every 0.01m, SIGKILL before the last batch: the checkpoint at batch $pos of its epoch resumes to $got"
[[ $got == "$tfull" ]] || fail "--checkpoint-every 0.01m then SIGKILL, resumed: $got; uninterrupted $tfull"
got=$(hash_of "${args[@]}" --checkpoint "$TMP/e.ckpt" --checkpoint-every 1)
[[ $got == "$full" ]] || fail "--checkpoint-every 1 changed the weights: $got"
expect_fail "checkpoint-every needs --checkpoint" "${args[@]}" --checkpoint-every 5
expect_fail "checkpoint-every: expected" "${args[@]}" --checkpoint "$TMP/e.ckpt" --checkpoint-every 0
expect_fail "checkpoint-every: expected" "${args[@]}" --checkpoint "$TMP/e.ckpt" --checkpoint-every xm

# A real SIGTERM from outside, at whatever step it lands: once the first checkpoint of
# --checkpoint-every 1 exists the run is training; it stops within a step, exit 75.
"$MKSTORE" "$TMP/big.sprites" --count-train 4000 --count-test 200 --tile 16x16x1 --classes 4 \
	--sheet 256 >/dev/null || fail "mkstore big"
big=(--data "$TMP/big.sprites" --model c16k3-r-m2-d64-r --optim momentum --lr 0.02 --epochs 3
     --batch 16 --accum 2 --seed 3)
full=$(hash_of "${big[@]}")
for delay in 0 0.3; do
	rm -f "$TMP/c.ckpt"
	"$HNTRAIN" --quiet "${big[@]}" --checkpoint "$TMP/c.ckpt" --checkpoint-every 1 \
		>"$TMP/out" 2>"$TMP/err" &
	pid=$!
	HN_PIDS+=("$pid")
	for _ in $(seq 200); do [[ -s $TMP/c.ckpt ]] && break; sleep 0.05; done
	sleep "$delay"
	t0=$(date +%s.%N)
	kill -TERM "$pid"
	rc=0
	wait "$pid" || rc=$?
	t1=$(date +%s.%N)
	[[ $rc -eq 75 ]] || fail "SIGTERM from outside: exit $rc: $(cat "$TMP/err")"
	where=$(grep -o "stopped .*(step [0-9]*)" "$TMP/err")
	got=$(hash_of --data "$TMP/big.sprites" --resume "$TMP/c.ckpt")
	printf 'SIGTERM after %ss: %s, in %.2f s; resumed: %s\n' "$delay" "$where" \
		"$(echo "$t1 - $t0" | bc)" "$got"
	[[ $got == "$full" ]] || fail "SIGTERM ($where), resumed: $got; uninterrupted: $full"
done
echo "uninterrupted: $full"
cp "$TMP/c.ckpt" "$TMP/big.ckpt"

# Across media: stopped reading the store, resumed from a spritefs mount of it (its epoch
# views, starting at the checkpoint's batch), and the other way; the same weights.
if [[ -n ${SPRITEFS:-} && -x ${SPRITEFS:-} && -e /dev/fuse ]]; then
	mount_store "$TMP/d.sprites" "$TMP/mnt"
	margs=(--model c8k3-r-m2-d32-r --optim adam --lr 0.002 --epochs 3 --batch 32 --accum 2 --seed 7)
	full=$(hash_of "${D[@]}" "${margs[@]}")
	stop_at 20 "${D[@]}" "${margs[@]}" >/dev/null
	got=$(hash_of --data "$TMP/mnt" --resume "$TMP/c.ckpt")
	[[ $got == "$full" ]] || fail "stopped on the store, resumed on the mount: $got; uninterrupted $full"
	stop_at 37 --data "$TMP/mnt" "${margs[@]}" >/dev/null
	got=$(hash_of "${D[@]}" --resume "$TMP/c.ckpt")
	[[ $got == "$full" ]] || fail "stopped on the mount, resumed on the store: $got; uninterrupted $full"
	echo "store -> mount and mount -> store, stopped inside an epoch: $got"
else
	echo "(no spritefs or /dev/fuse: the mount case is left out)"
fi

# A checkpoint keeps the data's fingerprint: other data of the same shape and count is refused.
"$MKSTORE" "$TMP/other.sprites" --count-train 4000 --count-test 200 --tile 16x16x1 --classes 4 \
	--sheet 256 --seed 9 >/dev/null || fail "mkstore other"
expect_fail "the checkpoint was trained on other data than $TMP/other.sprites" \
	--data "$TMP/other.sprites" --resume "$TMP/big.ckpt"
echo "PASS"
