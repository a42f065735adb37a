#!/usr/bin/env bash
# mount_torch.sh - spritefs.torch over a real mount, with Debian's
# /usr/bin/python3 and torch (the installed reader when this tree is
# installed, else the source; tests/py_lib.sh). EpochDataset through
# DataLoader with 0, 1, 2 and 3 workers: the ids of the batches, in the
# order DataLoader gives them, are the mount's order of the epoch
# (Mount.order), so each sample comes exactly once; its tiles and labels are
# images.npy's and labels.npy's. The same from the epoch views and gathered
# at another batch size; persistent workers with pin_memory and
# prefetch_factor over three epochs (set_epoch reaches the workers), and
# start_batch; 2 ranks (explicit, and from an initialised torch.distributed
# gloo group of 2 processes): their shards of each global batch, in rank
# order, are the 1-rank batch. MapDataset: ds[i] is sample i, and a shuffled
# DataLoader with workers and a DistributedSampler cover the split once.
# Skips without torch for /usr/bin/python3.
source "$(dirname "$0")/mount_lib.sh"
source "$(dirname "$0")/py_lib.sh"
need_fuse
[[ -x $PY ]] && $PY -c "import numpy, torch" 2>/dev/null || { echo "SKIP: no numpy/torch for /usr/bin/python3"; exit 77; }
echo "reader: $PY_READER"

"$MKSTORE" "$T/s.sprites" --count-train 1000 --count-test 150 --sheet 64 --classes 7 \
	>"$T/mkstore.log" 2>&1 || fail "mkstore"
sfs_mount "$T/spritefs.log" "$T/s.sprites" "$T/m" -o cache=32M
cat >"$T/check.py" <<'PY'
import multiprocessing as mp
import os, sys
import numpy as np
import torch
from torch.utils.data import DataLoader, DistributedSampler
import spritefs
from spritefs.torch import EpochDataset, MapDataset

mnt, tmp = sys.argv[1], sys.argv[2]
m = spritefs.Mount(mnt)
data = {s: (np.load(f"{mnt}/{s}/images.npy").reshape(-1, *m.tile), np.load(f"{mnt}/{s}/labels.npy"))
        for s in ("train", "test")}


def run(ds, workers, **kw):
    """The (x, y, ids) batches of one pass of a DataLoader over ds."""
    dl = DataLoader(ds, batch_size=None, num_workers=workers, **kw)
    return list(dl)


def check(batches, split, want, sizes, what):
    ids = np.concatenate([b[2].numpy() for b in batches]) if batches else np.zeros(0, np.int64)
    assert ids.tolist() == want.tolist(), \
        f"{what}: ids {ids[:8]}... ({len(ids)}), the mount's order {want[:8]}... ({len(want)})"
    assert [len(b[2]) for b in batches] == sizes, f"{what}: batch sizes {[len(b[2]) for b in batches]}"
    images, labels = data[split]
    for x, y, i in batches:
        i = i.numpy()
        assert x.dtype == torch.float32 and tuple(x.shape[1:]) == (m.tile[2], m.tile[0], m.tile[1])
        assert torch.equal((x * 255).round().to(torch.uint8).permute(0, 2, 3, 1),
                           torch.from_numpy(images[i])), f"{what}: tiles"
        assert np.array_equal(y.numpy(), labels[i]), f"{what}: labels"


def sizes_of(n, g):
    return [min(g, n - k) for k in range(0, n, g)]


# 0-3 workers, the views (batch 64, the mount's) and gathered (batch 50)
for split in ("train", "test"):
    n = m.splits[split]["count"]
    for batch in (64, 50):
        for workers in (0, 1, 2, 3):
            ds = EpochDataset(mnt, split, seed=3, batch=batch, epoch=1)
            got = run(ds, workers)
            assert len(got) == len(ds), (len(got), len(ds))
            check(got, split, m.order(split, 1, seed=3), sizes_of(n, batch),
                  f"{split} batch {batch}, {workers} workers")
    print(f"{split}: 0-3 workers, batches of 64 (views) and 50: the mount's order, each sample once")

# persistent workers, pinned memory, prefetch: set_epoch reaches the workers
n = m.splits["train"]["count"]
ds = EpochDataset(mnt, "train", seed=3, batch=64)
dl = DataLoader(ds, batch_size=None, num_workers=2, persistent_workers=True, pin_memory=True,
                prefetch_factor=3)
for epoch in (0, 1, 2):
    ds.set_epoch(epoch)
    check(list(dl), "train", m.order("train", epoch, seed=3), sizes_of(n, 64),
          f"persistent workers, epoch {epoch}")
ds.set_epoch(2, start_batch=5)
assert len(ds) == len(sizes_of(n, 64)) - 5
check(list(dl), "train", m.order("train", 2, seed=3)[5 * 64:], sizes_of(n, 64)[5:],
      "persistent workers, epoch 2 from batch 5")
print("persistent workers (pin_memory, prefetch_factor 3): epochs 0-2 and a resume at batch 5")
del dl

# 2 ranks: rank r's batch g is its shard of global batch g
for batch in (32, 25):
    glob = list(m.epoch("train", 4, seed=1, batch=2 * batch, views=False))
    for workers in (0, 3):
        ranks = [run(EpochDataset(mnt, "train", seed=1, batch=batch, epoch=4, rank=r, world=2), workers)
                 for r in (0, 1)]
        assert [len(r) for r in ranks] == [len(glob)] * 2, [len(r) for r in ranks]
        for g, whole in enumerate(glob):
            cat = np.concatenate([ranks[r][g][2].numpy() for r in (0, 1)])
            assert cat.tolist() == whole[2].tolist(), f"batch {batch}, {workers} workers: global batch {g}"
        allids = np.concatenate([b[2].numpy() for r in ranks for b in r])
        assert sorted(allids.tolist()) == list(range(n))
print("2 ranks x 0 and 3 workers: the shards of each global batch are the 1-rank batch")


def dist_rank(rank, out):
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method=f"file://{tmp}/pg", rank=rank, world_size=2)
    ds = EpochDataset(mnt, "train", seed=1, batch=32, epoch=4)
    assert (ds.rank, ds.world) == (rank, 2), (ds.rank, ds.world)
    ids = [b[2].numpy() for b in run(ds, 2)]
    np.save(out, np.concatenate(ids))
    dist.barrier()
    dist.destroy_process_group()


ctx = mp.get_context("fork")
procs = [ctx.Process(target=dist_rank, args=(r, f"{tmp}/rank{r}.npy")) for r in (0, 1)]
for p in procs:
    p.start()
for p in procs:
    p.join(120)
    assert p.exitcode == 0, f"a torch.distributed rank exited with {p.exitcode}"
per_rank = [list(run(EpochDataset(mnt, "train", seed=1, batch=32, epoch=4, rank=r, world=2), 0))
            for r in (0, 1)]
for r in (0, 1):
    want = np.concatenate([b[2].numpy() for b in per_rank[r]])
    assert np.load(f"{tmp}/rank{r}.npy").tolist() == want.tolist(), f"torch.distributed rank {r}"
print("torch.distributed (gloo, 2 processes): rank and world taken from the group")

# MapDataset
ds = MapDataset(mnt, "train")
images, labels = data["train"]
assert len(ds) == n and ds.targets.tolist() == labels.tolist() and ds.classes == m.classes
for i in (0, 1, 517, n - 1, -1):
    x, y = ds[i]
    assert x.dtype == torch.float32 and tuple(x.shape) == (m.tile[2], m.tile[0], m.tile[1])
    assert torch.equal((x * 255).round().to(torch.uint8).permute(1, 2, 0), torch.from_numpy(images[i]))
    assert y == int(labels[i])
try:
    ds[n]
    raise AssertionError("ds[n] did not raise IndexError")
except IndexError:
    pass
torch.manual_seed(0)
seen = []
for x, y in DataLoader(ds, batch_size=37, shuffle=True, num_workers=2):
    seen.append(y.numpy())
    assert x.shape[1:] == (m.tile[2], m.tile[0], m.tile[1])
seen = np.concatenate(seen)
assert sorted(seen.tolist()) == sorted(labels.tolist()) and len(seen) == n
ids = []
for r in (0, 1):
    sampler = DistributedSampler(ds, num_replicas=2, rank=r, shuffle=True, seed=2)
    ids += list(sampler)
    got = [int(v) for _, y in DataLoader(ds, batch_size=64, sampler=sampler, num_workers=2)
           for v in y]
    assert got == [int(labels[i]) for i in sampler], "DistributedSampler: labels"
assert sorted(ids) == list(range(n)), "DistributedSampler: the ranks' samples"
print(f"MapDataset: {n} samples, shuffled with 2 workers and a DistributedSampler of 2, each once")
PY
$PY "$T/check.py" "$T/m" "$T" >"$T/py.log" 2>&1 || fail "spritefs.torch: $(tail -8 "$T/py.log")"
cat "$T/py.log"
sfs_umount "$T/m"
echo "PASS"
