#!/usr/bin/env bash
# hntrain_mpi_emulate - hntrain --emulate on 2 ranks, each an emulated
# accelerator: per global batch the ranks read disjoint shares of the
# profile's batch each, and each epoch's shares together are the epoch's
# samples, each once (HNTRAIN_DUMP_IDS lists what each rank read), over a
# store and over a spritefs mount (its epoch view files). The log has both
# ranks' AU and the run's (their mean). A batch that does not split over
# the ranks (fewer samples than one global batch) stops both ranks with
# the message saying what would work.
source "$(dirname "$0")/hntrain_common.sh"
source "$(dirname "$0")/mpi_lib.sh"

"$MKSTORE" "$TMP/s.sprites" --count-train 2000 --count-test 100 --tile 28x28x1 --classes 4 \
	--sheet 100 >/dev/null || fail "mkstore"

# ids_check PREFIX: each epoch's global batch k is rank 0's share then rank 1's, 100 each,
# disjoint, and the epoch's shares together are the 2000 samples, each once.
ids_check() {
	/usr/bin/python3 - "$1" <<'PY' || fail "the ranks' shares ($1)"
import sys
from collections import defaultdict
per = defaultdict(dict)  # (epoch, batch) -> rank -> ids
for r in (0, 1):
    for line in open(f"{sys.argv[1]}.{r}"):
        e, b, *ids = map(int, line.split())
        per[(e, b)][r] = ids
epochs = sorted({e for e, _ in per})
assert epochs == [0, 1], epochs
for e in epochs:
    seen = []
    for b in range(10):
        s0, s1 = per[(e, b)][0], per[(e, b)][1]
        assert len(s0) == len(s1) == 100, (e, b, len(s0), len(s1))
        assert not set(s0) & set(s1), f"epoch {e} batch {b}: the ranks share samples"
        seen += s0 + s1
    assert sorted(seen) == list(range(2000)), f"epoch {e}: the union is not the epoch"
    print(f"epoch {e}: 10 global batches of 2 x 100, disjoint, union = the 2000 samples")
# the two epochs are in different orders (the permutation of each epoch)
assert per[(0, 0)][0] != per[(1, 0)][0]
PY
}

run_emulate() { # DATA TAG [ARGS...]
	local data=$1 tag=$2 rc=0
	shift 2
	HNTRAIN_DUMP_IDS="$TMP/ids-$tag" timeout "$MPI_LIMIT" "${MPIRUN[@]}" -np 2 -x HNTRAIN_DUMP_IDS \
		"$HNTRAIN" --data "$data" --emulate 100:0.02 --epochs 2 --seed 5 \
		--log "$TMP/$tag.jsonl" "$@" >"$TMP/$tag.out" 2>&1 || rc=$?
	[[ $rc -eq 0 ]] || { cat "$TMP/$tag.out"; fail "mpirun -np 2 hntrain --emulate ($tag) exited $rc"; }
	grep -q "^emulated 2 x 100:0.02: AU" "$TMP/$tag.out" || { cat "$TMP/$tag.out"; fail "no summary ($tag)"; }
	ids_check "$TMP/ids-$tag"
	/usr/bin/python3 - "$TMP/$tag.jsonl" <<'PY' || fail "the log of 2 ranks ($tag)"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
assert len(recs) == 3 and recs[-1]["final"], recs
for e in recs[:2]:
    assert e["accelerators"] == 2 and e["samples"] == 2000 and len(e["ranks"]) == 2, e
    aus = [r["au"] for r in e["ranks"]]
    assert [r["rank"] for r in e["ranks"]] == [0, 1] and all(r["samples"] == 1000 for r in e["ranks"]), e
    assert abs(e["au"] - sum(aus) / 2) < 1e-6, e
    assert all(0 < a <= 1 for a in aus), e
    print(f"epoch {e['epoch']}: AU ranks {aus[0]:.3f} {aus[1]:.3f}, run {e['au']:.3f}, "
          f"{e['samples_per_s']:.0f} samples/s")
f = recs[-1]
assert f["accelerators"] == 2 and f["samples"] == 4000, f
assert abs(f["au"] - (recs[0]["au"] + recs[1]["au"]) / 2) < 1e-6, f
PY
}

run_emulate "$TMP/s.sprites" store
if [[ -n ${SPRITEFS:-} && -c /dev/fuse ]] && command -v fusermount3 >/dev/null; then
	mount_store "$TMP/s.sprites" "$TMP/mnt" -o seed=5,batch=100
	run_emulate "$TMP/mnt" mount
	grep -q "epoch views" "$TMP/mount.out" || { cat "$TMP/mount.out"; fail "the mount's views were not read"; }
else
	echo "SKIP (mount part): no spritefs or /dev/fuse"
fi

mpi_fail "--emulate 100:0.02 with 2 accelerators: a global batch of 200 samples \(2 x 100\) does not split over the ranks: the training split has 150.*mpirun -np 1" \
	-np 2 "$HNTRAIN" --data "$TMP/s.sprites" --emulate 100:0.02 --limit 150
echo "PASS"
