#!/usr/bin/env bash
# hntrain_mpi_bad - data-parallel runs that cannot go on stop, every rank,
# with one clear message, and none hangs: ranks that disagree on the
# settings, --data missing on one rank (named with its host), a rank that
# stops answering (named, after HNTRAIN_DIST_TIMEOUT) and a rank killed
# mid-run. Each mpirun is bounded by `timeout`: reaching it fails the test.
source "$(dirname "$0")/hntrain_common.sh"
source "$(dirname "$0")/mpi_lib.sh"
MPI_LIMIT=90

"$MKSTORE" "$TMP/syn.sprites" --count-train 768 --count-test 150 --tile 28x28x1 --classes 5 \
	--sheet 128 >/dev/null || fail "mkstore"
"$MKSTORE" "$TMP/other.sprites" --count-train 640 --count-test 150 --tile 28x28x1 --classes 5 \
	--sheet 128 >/dev/null || fail "mkstore"
host=$(hostname)
run=(--quiet --batch 32 --threads 1 --model mlp --epochs 1)

mpi_fail "rank 1 on .* has other settings or data than rank 0" \
	-np 1 "$HNTRAIN" --data "$TMP/syn.sprites" --seed 1 "${run[@]}" : \
	-np 1 "$HNTRAIN" --data "$TMP/syn.sprites" --seed 2 "${run[@]}"
[[ $(grep -c "has other settings" "$TMP/err") -eq 1 ]] || fail "the mismatch said more than once"
mpi_fail "rank 1 on .* has other settings or data" \
	-np 1 "$HNTRAIN" --data "$TMP/syn.sprites" "${run[@]}" : \
	-np 1 "$HNTRAIN" --data "$TMP/other.sprites" "${run[@]}"
mpi_fail "rank 1 on $host: --data: $TMP/missing" \
	-np 1 "$HNTRAIN" --data "$TMP/syn.sprites" "${run[@]}" : \
	-np 1 "$HNTRAIN" --data "$TMP/missing" "${run[@]}"
grep -q "rank 1 on $host could not start" "$TMP/err" || fail "rank 0 did not say why it stops"

# --device gpu on 2 ranks where no rank can use a GPU (none here, or no plugin):
# each says why, none hangs. (With GPUs the gradients are summed with NCCL.)
if ! nvidia-smi -L >/dev/null 2>&1; then
	mpi_fail "rank [01] on $host: --device gpu: (no CUDA device found|hntrain was built without)" \
		-np 2 "$HNTRAIN" --data "$TMP/syn.sprites" --device gpu "${run[@]}"
fi
# A checkpoint's global batch that the ranks cannot share: said, with its figures.
"$HNTRAIN" --data "$TMP/syn.sprites" --quiet --batch 33 --model mlp --epochs 2 --stop-after 1 \
	--checkpoint "$TMP/ck" >/dev/null || fail "checkpoint of one process"
mpi_fail "global batch of 33 \(1 rank x --batch 33\), which 2 ranks cannot share evenly" \
	-np 2 "$HNTRAIN" --data "$TMP/syn.sprites" --quiet --resume "$TMP/ck"
mpi_fail "the checkpoint uses --batch 33 on 1 rank \(global batch 33\)" \
	-np 3 "$HNTRAIN" --data "$TMP/syn.sprites" --quiet --resume "$TMP/ck" --batch 32

# A rank that stops answering (SIGSTOP after its first second): the others
# give up after HNTRAIN_DIST_TIMEOUT and name it.
long=(--quiet --batch 32 --threads 1 --model cnn --epochs 200 --data "$TMP/syn.sprites")
# rank 1 is hntrain itself (exec), signalled by a subshell after 2 seconds
signalled() { # SIGNAL: an mpirun program that runs "$HNTRAIN" "$@" and signals it
	echo "(sleep 2; kill -$1 \$\$) & exec \"\$HNTRAIN\" \"\$@\""
}
export HNTRAIN HNTRAIN_DIST_TIMEOUT=3
mpi_fail "rank 0 on $host: .*no answer from rank 1 in 3 s" \
	-np 1 "$HNTRAIN" "${long[@]}" : -np 1 bash -c "$(signalled STOP)" _ "${long[@]}"
# A rank killed mid-run: mpirun stops the others and names it.
mpi_fail "rank 1 with PID [0-9]+ on node .* exited on signal 9" \
	-np 1 "$HNTRAIN" "${long[@]}" : -np 1 bash -c "$(signalled KILL)" _ "${long[@]}"
echo "ok"
