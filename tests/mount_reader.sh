#!/usr/bin/env bash
# mount_reader.sh - mount/spritefs, the Python reader of a mount (the source), with
# Debian's /usr/bin/python3: over a real mount in the full and a windowed
# order, the ids it yields for an epoch (from the epoch views, and gathered
# from images.npy at another batch size) are the permutation of
# tests/perm_ref.py and the tiles and labels those of images.npy; the shards
# of 2 and 3 ranks, concatenated per global batch, are the 1-rank epoch;
# resuming at batch k yields the tail; the torch EpochDataset yields the same
# (when torch imports). hntrain's own order: epoch views that the reader
# writes into a copy of the mount train hntrain (which checks every view's
# ids against its permutation) to the weights of the store. Bad input: a
# missing mount, a bad dataset.json and a sheet giving EIO fail with the file
# named.
source "$(dirname "$0")/mount_lib.sh"
need_fuse
PY=/usr/bin/python3
: "${HNTRAIN:?HNTRAIN not set (run through meson test)}"
[[ -x $PY ]] && $PY -c "import numpy" 2>/dev/null || { echo "SKIP: no numpy for /usr/bin/python3"; exit 77; }
export PYTHONPATH="$SRCDIR/mount"
PERM_REF="$SRCDIR/tests/perm_ref.py"

"$MKSTORE" "$T/s.sprites" --count-train 1500 --count-test 300 --sheet 128 >"$T/mkstore.log" 2>&1 ||
	fail "mkstore"
sfs_mount "$T/spritefs-full.log" "$T/s.sprites" "$T/full" -o cache=32M
PID_FULL=$SFS_PID
sfs_mount "$T/spritefs-win.log" "$T/s.sprites" "$T/win" -o cache=32M,window=3
PID_WIN=$SFS_PID

check_reader() { # MOUNT KIND SHEET_TILES WINDOW
	$PY - "$@" "$PERM_REF" >"$T/py-$2.log" 2>&1 <<'PY' || fail "[$2] reader: $(tail -8 "$T/py-$2.log")"
import subprocess, sys
import numpy as np
import spritefs
mnt, kind, sheet, window, perm_ref = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
m = spritefs.Mount(mnt)
n = m.splits["train"]["count"]
assert m.splits["train"]["order"] == kind, m.splits["train"]
images = np.load(f"{mnt}/train/images.npy").reshape(n, *m.tile)
labels = np.load(f"{mnt}/train/labels.npy")

def ref(seed, epoch):
    mode = ["perm", str(seed), str(epoch), str(n)] if kind == "full" else \
        ["windowed", str(seed), str(epoch), str(n), str(sheet), str(window)]
    out = subprocess.run([sys.executable, perm_ref] + mode, check=True, capture_output=True, text=True)
    return np.array(out.stdout.split(), dtype=np.int64)

def collect(it):
    parts = list(it)
    return parts, np.concatenate([p[2] for p in parts]).astype(np.int64)

for seed, epoch in ((0, 0), (5, 3)):
    want = ref(seed, epoch)
    assert sorted(want) == list(range(n))
    for batch, views in ((64, True), (32, False), (64, False)):
        parts, ids = collect(m.epoch("train", epoch, seed=seed, batch=batch, views=views))
        assert np.array_equal(ids, want), f"seed {seed} epoch {epoch} batch {batch}: ids differ from perm_ref"
        assert [len(p[2]) for p in parts[:-1]] == [batch] * (len(parts) - 1), "batch sizes"
        for tiles, lab, i in parts:
            assert np.array_equal(tiles, images[i]), "tiles differ from images.npy"
            assert np.array_equal(lab, labels[i]), "labels differ from labels.npy"
    # shards: rank r of `world` takes [b*r/world, b*(r+1)/world) of each global batch
    # views: True reads view g (batch 32 x 2 = the mount's 64) or, as hntrain's ranks do,
    # view g*2+r (batch 64 per rank), gathering the short last global batch
    for world, batch, views in ((2, 32, True), (2, 64, True), (2, 64, False), (2, 50, False), (3, 7, False)):
        glob = list(m.epoch("train", epoch, seed=seed, batch=batch * world, views=False))
        ranks = [list(m.epoch("train", epoch, seed=seed, batch=batch, rank=r, world=world, views=views))
                 for r in range(world)]
        assert all(len(r) == len(glob) for r in ranks), "ranks see different batch counts"
        for g, whole in enumerate(glob):
            cat = np.concatenate([ranks[r][g][2] for r in range(world)])
            assert np.array_equal(cat, whole[2]), f"world {world}: global batch {g} is not its shards"
            for r in range(world):
                lo, hi = spritefs.shard_range(len(whole[2]), r, world)
                assert np.array_equal(ranks[r][g][0], whole[0][lo:hi]), "shard tiles"
        sizes = [len(ranks[r][0][2]) for r in range(world)]
        assert sizes == [batch] * world, sizes
    # resume at batch k: the tail of the epoch
    for k in (0, 1, 7, (n + 63) // 64 - 1, (n + 63) // 64):
        _, tail = collect(m.epoch("train", epoch, seed=seed, batch=64, start_batch=k)) if k < (n + 63) // 64 else (None, np.zeros(0, np.int64))
        assert np.array_equal(tail, want[k * 64:]), f"resume at {k}"
print(f"{kind}: ids = perm_ref, shards and resume agree over {n} samples")
try:
    import torch
except ImportError:
    print("torch missing: EpochDataset part skipped")
    sys.exit(0)
ds = spritefs.EpochDataset(mnt, "train", seed=5, batch=32, epoch=3, rank=1, world=2)
dl = torch.utils.data.DataLoader(ds, batch_size=None)
got = list(dl)
want = list(m.epoch("train", 3, seed=5, batch=32, rank=1, world=2))
assert len(got) == len(want) == len(ds)
for (x, y, i), (t, lab, ids) in zip(got, want):
    assert x.dtype == torch.float32 and tuple(x.shape) == (len(ids), m.tile[2], m.tile[0], m.tile[1])
    assert torch.equal((x * 255).round().to(torch.uint8).permute(0, 2, 3, 1), torch.from_numpy(t.copy()))
    assert np.array_equal(y.numpy(), lab) and np.array_equal(i.numpy(), ids)
ds.set_epoch(3, start_batch=4)
tail = torch.cat([i for _, _, i in ds])
assert np.array_equal(tail.numpy(), np.concatenate([w[2] for w in want[4:]]))
print(f"torch EpochDataset: {len(got)} batches of rank 1 of 2, resume at 4: agree")
PY
	cat "$T/py-$2.log"
}
check_reader "$T/full" full 128 0
# README.md's example, run as printed over the mount (its mount point replaced)
awk '/^From Python, the package `spritefs`/ { f = 1 } f && /^```python/ { p = 1; next }
	p && /^```/ { exit } p' "$SRCDIR/README.md" >"$T/readme.py"
grep -q "spritefs.EpochDataset" "$T/readme.py" || fail "no spritefs example in README.md"
sed -i "s|\"/mnt/sprites\"|\"$T/full\"|g" "$T/readme.py"
if $PY -c "import torch" 2>/dev/null; then
	$PY "$T/readme.py" >"$T/readme.log" 2>&1 || fail "README.md's example: $(tail -5 "$T/readme.log")"
	echo "README.md's example runs"
fi
check_reader "$T/win" windowed 128 3

# hntrain's own order: a copy of the mount whose epoch views the reader wrote
# (gathered from images.npy); hntrain checks each view's ids against its
# permutation, and must end with the weights of the store itself.
mkdir -p "$T/copy/train" "$T/copy/test"
cp "$T/win/dataset.json" "$T/copy/" &&
	cp "$T/win/train/images.npy" "$T/win/train/labels.npy" "$T/copy/train/" &&
	cp "$T/win/test/images.npy" "$T/win/test/labels.npy" "$T/copy/test/" || fail "copying the mount"
$PY - "$T/copy" >"$T/py-copy.log" 2>&1 <<'PY' || fail "writing views: $(tail -5 "$T/py-copy.log")"
import os, struct, sys
import numpy as np
import spritefs
root = sys.argv[1]
m = spritefs.Mount(root)
def r64(x): return (x + 63) // 64 * 64
def write(d, b, tiles, labels, ids):
        cnt, (h, w, c) = len(ids), m.tile
        io = r64(64 + 2 * cnt); to = r64(io + 4 * cnt); total = to + tiles.size
        buf = bytearray(total)
        struct.pack_into("<8s10IQ", buf, 0, b"SPRBATCH", 1, 64, cnt, h, w, c, 64, io, to, 0, total)
        buf[64:64 + 2 * cnt] = labels.astype("<u2").tobytes()
        buf[io:io + 4 * cnt] = ids.astype("<u4").tobytes()
        buf[to:] = tiles.tobytes()
        open(f"{d}/{b}.sprite", "wb").write(buf)
for epoch in (0, 1):
    d = f"{root}/train/epochs/9/{epoch}"
    os.makedirs(d)
    for b, batch in enumerate(m.epoch("train", epoch, seed=9, batch=64, views=False)):
        write(d, b, *batch)
    # the full global batches of 2 ranks of 64 again, from the ranks' shards: view g*2+r
    for r in (0, 1):
        for g, batch in enumerate(m.epoch("train", epoch, seed=9, batch=64, rank=r, world=2, views=False)):
            if len(batch[2]) == 64:
                write(d, g * 2 + r, *batch)
print("views written")
PY
common=(--model mlp --epochs 2 --batch 64 --seed 9 --window 3 --threads 1)
"$HNTRAIN" --data "$T/copy" "${common[@]}" >"$T/hn-copy.log" 2>&1 || fail "hntrain over the reader's views: $(tail -3 "$T/hn-copy.log")"
grep -q "epoch views" "$T/hn-copy.log" || fail "hntrain did not use the reader's views: $(head -3 "$T/hn-copy.log")"
grep -q "epoch views unusable" "$T/hn-copy.log" && fail "hntrain gathered instead of reading the views"
h_copy=$(awk '/weights xxh3/ { print $NF }' "$T/hn-copy.log")
h_store=$("$HNTRAIN" --data "$T/s.sprites" "${common[@]}" --quiet 2>"$T/hn-store.log" | awk '/weights xxh3/ { print $NF }')
[[ -n $h_copy && $h_copy == "$h_store" ]] || fail "weights over the reader's views $h_copy, over the store $h_store"
echo "hntrain over the reader's epoch views: weights $h_copy, as over the store"
# hntrain's MPI ranks read view g*2+r of the copy (the reader's rank shards) and check it
if command -v mpirun >/dev/null && "$HNTRAIN" -V | grep -q "^ranks: MPI"; then
	source "$(dirname "$0")/mpi_env.sh"
	mpi=("${MPIRUN[@]}" -np 2)
	timeout 150 "${mpi[@]}" "$HNTRAIN" --data "$T/copy" "${common[@]}" >"$T/mpi-copy.log" 2>&1 ||
		fail "2 ranks over the reader's views: $(tail -3 "$T/mpi-copy.log")"
	grep -q "epoch views" "$T/mpi-copy.log" || fail "the ranks did not read the views: $(head -3 "$T/mpi-copy.log")"
	grep -q "epoch views unusable" "$T/mpi-copy.log" && fail "the ranks gathered instead of reading the views"
	h_mc=$(awk '/weights xxh3/ { print $NF }' "$T/mpi-copy.log")
	h_ms=$(timeout 150 "${mpi[@]}" "$HNTRAIN" --data "$T/s.sprites" "${common[@]}" --quiet 2>"$T/mpi-store.log" |
		awk '/weights xxh3/ { print $NF }')
	[[ -n $h_mc && $h_mc == "$h_ms" ]] || fail "2 ranks: weights over the reader's views $h_mc, over the store $h_ms"
	echo "2 MPI ranks over the reader's rank shards: weights $h_mc, as over the store"
else
	echo "hntrain built without MPI: the ranks part skipped"
fi

# bad input names the file
expect_err() { # WHAT PATTERN PYTHON...
	local what=$1 pat=$2
	shift 2
	if $PY -c "$@" >"$T/err.log" 2>&1; then fail "$what: no error"; fi
	grep -q -- "$pat" "$T/err.log" || fail "$what: error does not name $pat: $(tail -2 "$T/err.log")"
	echo "$what: $(tail -1 "$T/err.log")"
}
expect_err "missing mount" "$T/nothere" "import spritefs; spritefs.Mount('$T/nothere')"
mkdir -p "$T/bad" && echo '{"tile": 3}' >"$T/bad/dataset.json"
expect_err "bad dataset.json" "$T/bad/dataset.json" "import spritefs; spritefs.Mount('$T/bad')"
expect_err "no such split" "no split 'val'" "import spritefs; list(spritefs.Mount('$T/full').epoch('val', 0))"
SFS_PID=$PID_WIN sfs_umount "$T/win"

# a sheet that fails its checksum: EIO, reported with the file's name
cp "$T/s.sprites" "$T/bad.sprites"
"$MOUNT_CHECK" --corrupt "$T/bad.sprites" 0 >/dev/null || fail "corrupting sheet 0"
sfs_mount "$T/spritefs-bad.log" "$T/bad.sprites" "$T/badmnt" -o cache=32M
expect_err "EIO on a sheet" "$T/badmnt/train/.*input/output error" \
	"import spritefs; list(spritefs.Mount('$T/badmnt').epoch('train', 0, views=True))"
# docs/FORMAT.md's numpy recipe for reading around it, run as printed: every
# sample but sheet 0's, each equal to the good store's
awk '/^#### Reading around a bad sheet/ { f = 1 } f && /^```python/ { p = 1; next }
	p && /^```/ { exit } p' "$SRCDIR/docs/FORMAT.md" >"$T/around.py"
grep -q "O_DIRECT" "$T/around.py" || fail "no recipe for reading around EIO in docs/FORMAT.md"
sed -i "s|\"/mnt/sprites\"|\"$T/badmnt\"|g" "$T/around.py"
cat >>"$T/around.py" <<PY
import json
T_ = json.load(open("$T/full/dataset.json"))["sheet_tiles"]
good = np.load("$T/full/train/images.npy")
good_lab = np.load("$T/full/train/labels.npy")
assert np.array_equal(ids, np.arange(T_, len(good))), (ids[:3], len(ids), len(good))
assert np.array_equal(tiles, good[ids]) and np.array_equal(labels, good_lab[ids])
print(f"around EIO: {len(ids)} of {len(good)} samples read, sheet 0's {T_} left out, all equal")
PY
$PY "$T/around.py" >"$T/around.log" 2>&1 || fail "docs/FORMAT.md's recipe: $(tail -5 "$T/around.log")"
grep -q "samples 0-$(($(/usr/bin/python3 -c "import json; print(json.load(open('$T/full/dataset.json'))['sheet_tiles'])") - 1)) are on a sheet that did not verify" \
	"$T/around.log" || fail "the recipe did not name sheet 0's samples: $(cat "$T/around.log")"
tail -1 "$T/around.log"
SFS_PID=$PID_FULL sfs_umount "$T/full"
sfs_umount "$T/badmnt"
echo "PASS"
