#!/usr/bin/env bash
# hntrain_resume_mpi - elastic resume inside an epoch: 2 ranks x --batch 32
# stopped inside an epoch (a signal that reaches one rank only, and one that
# reaches both; inside an --accum group; with --augment) resume on 1 process
# x --batch 64, the same global batch, at the same sample, and end with the
# weights of the uninterrupted run on 1 process (the sums are aligned:
# HN_CPU_CHUNK pinned, as tests/hntrain_mpi.sh has it). Also 1 process
# stopped and resumed on 2 ranks. Both ranks stop at the same step and exit
# 75, also on a real SIGTERM that reaches each rank twice (as a scheduler and
# a launcher both send one). And the ranks' start-up agreement names the first setting that differs
# (weight decay, momentum, --augment, --normalize, warm-up, the model's
# dropout, --limit) and data of the same shape with other samples.
source "$(dirname "$0")/hntrain_common.sh"
source "$(dirname "$0")/mpi_lib.sh"

"$MKSTORE" "$TMP/d.sprites" --count-train 700 --count-test 90 --tile 28x28x1 --classes 5 \
	--sheet 128 >/dev/null || fail "mkstore"
# 700 samples: global batches of 64, the last of 60 (30 + 30 on 2 ranks, whole 2-sample chunks)
export HN_CPU_CHUNK=2
common=(--data "$TMP/d.sprites" --model c8k3-r-m2-d32-r --epochs 3 --lr 0.05 --seed 3
	--accum 2 --augment crop:2,flip)
ref=$(hash_of "${common[@]}" --batch 64 --threads 2)
echo "1 process x --batch 64, uninterrupted: $ref"

# WHO AT: 2 ranks, HNTRAIN_RAISE_AT_BATCH=AT on rank WHO (0, 1 or both), --checkpoint
stop_2ranks() {
	local who=$1 at=$2 rc=0
	rm -f "$TMP/c.ckpt"
	cat >"$TMP/rank.sh" <<EOF
#!/bin/sh
case "$who" in both|"\$OMPI_COMM_WORLD_RANK") export HNTRAIN_RAISE_AT_BATCH=$at ;; esac
exec "$HNTRAIN" "\$@"
EOF
	chmod +x "$TMP/rank.sh"
	timeout "$MPI_LIMIT" "${MPIRUN[@]}" -np 2 "$TMP/rank.sh" --quiet "${common[@]}" --batch 32 \
		--threads 1 --checkpoint "$TMP/c.ckpt" >"$TMP/out" 2>"$TMP/err" || rc=$?
	[[ $rc -ne 124 ]] || fail "2 ranks, signal on rank $who at batch $at: hung"
	[[ $rc -eq 75 ]] || { cat "$TMP/err" >&2; fail "2 ranks, signal on rank $who at batch $at: exit $rc"; }
	[[ $(grep -c "stopped" "$TMP/err") -eq 1 ]] || fail "expected one stop line (rank 0's): $(cat "$TMP/err")"
	grep -o "stopped .*(step [0-9]*)" "$TMP/err"
}

# Epoch 1 has 11 global batches: 13 is epoch 2's third, inside its second --accum group.
for case in "1 13" "0 5" "both 21"; do
	read -r who at <<<"$case"
	where=$(stop_2ranks "$who" "$at")
	out=$("$HNTRAIN" --data "$TMP/d.sprites" --resume "$TMP/c.ckpt" --threads 2 2>&1) ||
		fail "resume on 1 process: $out"
	grep -q "global batch of 64 is kept" <<<"$out" || fail "resume did not say it keeps the batch"
	grep -q "^continuing epoch" <<<"$out" || fail "resume did not say where it continues: $out"
	h=$(sed -n 's/^weights xxh3 //p' <<<"$out")
	echo "2 ranks, signal on rank $who before batch $at, $where; resumed on 1 process: $h"
	[[ $h == "$ref" ]] || fail "2 ranks stopped ($where), resumed on 1: $h; uninterrupted $ref"
done

# And the other way: 1 process stopped inside epoch 2, resumed on 2 ranks x 32.
rm -f "$TMP/c.ckpt"
rc=0
HNTRAIN_RAISE_AT_BATCH=16 "$HNTRAIN" --quiet "${common[@]}" --batch 64 --threads 2 \
	--checkpoint "$TMP/c.ckpt" >/dev/null 2>"$TMP/err" || rc=$?
[[ $rc -eq 75 ]] || fail "1 process stopped: exit $rc: $(cat "$TMP/err")"
h=$(mpi_hash 2 --data "$TMP/d.sprites" --resume "$TMP/c.ckpt" --threads 1)
echo "1 process stopped ($(grep -o "stopped .*(step [0-9]*)" "$TMP/err")), resumed on 2 ranks: $h"
[[ $h == "$ref" ]] || fail "resumed on 2 ranks: $h; uninterrupted $ref"

# A real SIGTERM to each rank, twice (as a scheduler signals every task of a job, and a
# launcher may pass its own copy on): the ranks stop at the same step after the checkpoint.
# 200 epochs (about 10 s with a checkpoint every step) so that the run is still going when
# the signals come, however fast the machine; they come as soon as the first checkpoint is on disk.
# (Open MPI's mpirun, signalled itself, sends SIGKILL 1 s after passing SIGTERM on: see
# docs/HNTRAIN.md.)
rm -f "$TMP/c.ckpt"
timeout "$MPI_LIMIT" "${MPIRUN[@]}" -np 2 "$HNTRAIN" --quiet "${common[@]}" --batch 32 --threads 1 \
	--epochs 200 --checkpoint "$TMP/c.ckpt" --checkpoint-every 1 >/dev/null 2>"$TMP/err" &
pid=$!
for _ in $(seq 200); do [[ -s $TMP/c.ckpt ]] && break; sleep 0.05; done
ranks=$(pgrep -f -- "^$HNTRAIN --quiet .*--checkpoint $TMP/c.ckpt --checkpoint-every 1")
[[ $(wc -w <<<"$ranks") -ge 2 ]] || fail "the 2 ranks' pids: '$ranks'"
for r in $ranks $ranks; do kill -TERM "$r" 2>/dev/null; done
rc=0
wait "$pid" || rc=$?
[[ $rc -ne 0 && $rc -ne 124 ]] || fail "SIGTERM to the ranks: exit $rc"
where=$(grep -o "stopped .*(step [0-9]*)" "$TMP/err") || fail "SIGTERM to the ranks: no stop line: $(cat "$TMP/err")"
ref200=$(hash_of "${common[@]}" --epochs 200 --batch 64 --threads 2)
h=$(hash_of --data "$TMP/d.sprites" --resume "$TMP/c.ckpt" --threads 2)
echo "SIGTERM twice to each rank: $where; resumed on 1 process: $h (uninterrupted $ref200)"
[[ $h == "$ref200" ]] || fail "SIGTERM to the ranks ($where), resumed: $h; uninterrupted $ref200"

# The start-up agreement covers every setting that changes the numbers and the data's
# content: a rank that differs is named with the first differing setting, and no rank trains.
"$MKSTORE" "$TMP/other.sprites" --count-train 700 --count-test 90 --tile 28x28x1 --classes 5 \
	--sheet 128 --seed 9 >/dev/null || fail "mkstore other"
cat >"$TMP/rank1.sh" <<EOF
#!/bin/sh
# rank 1 gets \$RANK1 appended (a later --data wins)
if [ "\$OMPI_COMM_WORLD_RANK" = 1 ]; then exec "$HNTRAIN" "\$@" \$RANK1; fi
exec "$HNTRAIN" "\$@"
EOF
chmod +x "$TMP/rank1.sh"
base=(--quiet --data "$TMP/d.sprites" --model c8k3-r-m2-d32-x0.2-r --epochs 1 --batch 32)
# (the message shows rank 0's value of the setting)
for case in "--wd 0.001|--wd 0.0005" "--momentum 0.8|--momentum 0.9" "--augment flip|--augment  " \
	"--normalize 0.5:0.25|--normalize 0" "--warmup 3|--schedule .* --warmup 0" \
	"--model c8k3-r-m2-d32-x0.3-r|--model c8k3-r-m2-d32-x0.2-r" \
	"--data $TMP/other.sprites|the data's content" "--limit 600|--limit 0"; do
	extra=${case%%|*} want=${case#*|}
	RANK1=$extra mpi_fail "rank 1 on .* has other settings or data than rank 0 on .*: rank 1 differs in $want" \
		-np 2 -x RANK1 "$TMP/rank1.sh" "${base[@]}"
done
echo "PASS"
