"""spritefs.torch - PyTorch datasets over a spritefs mount.

    from torch.utils.data import DataLoader
    from spritefs.torch import EpochDataset, MapDataset

    ds = EpochDataset("/mnt/fmnist", "train", seed=0, batch=64)
    dl = DataLoader(ds, batch_size=None, num_workers=2, persistent_workers=True)
    for epoch in range(10):
        ds.set_epoch(epoch)
        for x, y, ids in dl:      # x float32 (B, C, H, W) in [0, 1], y int64, ids int64
            ...

EpochDataset (an IterableDataset) yields whole batches in the documented
order of the epoch (spritefs.Mount.epoch): every sample of the split once per
epoch, whatever num_workers, rank and world. Global batch g (batch*world
samples of the order) is this rank's shard of it; DataLoader worker w of W
reads the batches g with (g - start_batch) % W == w, and DataLoader, which
takes one batch from each worker in turn, hands them out in the epoch's order.
The epoch and start_batch live in shared memory, so set_epoch() before
iterating reaches persistent workers too. state_dict() and load_state_dict()
(torchdata's Stateful convention) save the place in the epoch, so that a job
stopped mid-epoch resumes in a new process at the same sample.

MapDataset is map-style (ds[i] = sample i of the split, from images.npy and
labels.npy through np.load(mmap_mode='r')), for samplers and batch_size > 1.
"""

import numpy as np
import torch
from torch.utils.data import Dataset, IterableDataset, get_worker_info

from . import Mount, shard_range

__all__ = ["EpochDataset", "MapDataset", "default_rank_world"]


def default_rank_world(rank=None, world=None):
    """rank and world, the missing ones from torch.distributed when it is
    initialised, else 0 and 1."""
    if rank is None or world is None:
        r, w = 0, 1
        dist = torch.distributed
        if dist.is_available() and dist.is_initialized():
            r, w = dist.get_rank(), dist.get_world_size()
        rank = r if rank is None else rank
        world = w if world is None else world
    rank, world = int(rank), int(world)
    if world < 1:
        raise ValueError(f"world {world}: at least 1 rank")
    shard_range(0, rank, world)  # rank in [0, world)
    return rank, world


def _tensors(tiles, labels, ids):
    x = torch.from_numpy(np.array(tiles)).permute(0, 3, 1, 2).float().div_(255.0)
    return (x, torch.from_numpy(labels.astype(np.int64)),
            torch.from_numpy(np.asarray(ids).astype(np.int64)))


class EpochDataset(IterableDataset):
    """A torch IterableDataset of one split: one epoch per iteration, batched.

    Yields (x, y, ids): x float32 (B, C, H, W) in [0, 1], y int64, ids int64.
    Use it with DataLoader(ds, batch_size=None) and any num_workers.
    set_epoch(e, start_batch=0) picks the epoch (start_batch resumes it at a
    global batch). rank and world shard as Mount.epoch does; left out, they
    come from torch.distributed when it is initialised. len() is the number
    of batches this rank gets in the epoch (all its workers together); a
    rank's share of a short last global batch is empty when fewer than world
    samples are left."""

    def __init__(self, path, split="train", seed=0, batch=64, epoch=0, rank=None, world=None,
                 start_batch=0, views=None):
        self.mount = Mount(path)
        self.mount._split(split)
        if batch < 1:
            raise ValueError(f"batch {batch}: at least 1")
        self.split, self.seed, self.batch, self.views = split, seed, batch, views
        self.rank, self.world = default_rank_world(rank, world)
        # [epoch, start_batch, read by workers], shared with the DataLoader's workers
        self._state = torch.zeros(3, dtype=torch.int64).share_memory_()
        self._taken = 0  # batches this process's own iteration handed out (no workers)
        self.set_epoch(epoch, start_batch)

    @property
    def epoch(self):
        return int(self._state[0])

    @property
    def start_batch(self):
        return int(self._state[1])

    def set_epoch(self, epoch, start_batch=0):
        nb = self.mount.nbatches(self.split, self.batch, self.world)
        if not 0 <= start_batch <= nb:
            raise ValueError(f"start_batch {start_batch}: the epoch has {nb} batches of "
                             f"{self.batch * self.world}")
        if epoch < 0:
            raise ValueError(f"epoch {epoch}: not below 0")
        self._state[0], self._state[1] = int(epoch), int(start_batch)
        self._state[2], self._taken = 0, 0

    def state_dict(self, batches=None):
        """The place in the epoch, for load_state_dict() in a new process: the
        epoch and the global batch to go on at, with what fixes the order
        (split, seed, global batch). batches: the batches the training loop
        has taken since the epoch's iteration began. Iterating in this process
        (num_workers=0) counts them itself; DataLoader workers read ahead of
        the loop (prefetch), so with workers pass it (ValueError if not)."""
        if batches is None:
            if int(self._state[2]):
                raise ValueError("EpochDataset.state_dict(): DataLoader workers read ahead of "
                                 "the loop; pass batches= (the batches it has taken this epoch)")
            batches = self._taken
        nb = self.mount.nbatches(self.split, self.batch, self.world)
        epoch, start = self.epoch, self.start_batch + int(batches)
        if not 0 <= start <= nb:
            raise ValueError(f"batches {batches}: from batch {self.start_batch} the epoch has "
                             f"{nb - self.start_batch} left")
        if start == nb:  # the epoch is done: the next one
            epoch, start = epoch + 1, 0
        return {"split": self.split, "seed": self.seed, "global_batch": self.batch * self.world,
                "epoch": epoch, "start_batch": start}

    def load_state_dict(self, state):
        """Go on where state_dict() was: the same split, seed and global batch
        (batch x world: another world whose batch keeps it is fine)."""
        for k, mine in (("split", self.split), ("seed", self.seed),
                        ("global_batch", self.batch * self.world)):
            if state.get(k) != mine:
                raise ValueError(f"EpochDataset.load_state_dict(): {k} {state.get(k)!r}, this "
                                 f"dataset has {mine!r}")
        self.set_epoch(int(state["epoch"]), int(state["start_batch"]))

    def __len__(self):
        return self.mount.nbatches(self.split, self.batch, self.world) - self.start_batch

    def __iter__(self):
        info = get_worker_info()
        w, nw = (info.id, info.num_workers) if info is not None else (0, 1)
        epoch, start = self.epoch, self.start_batch
        nb = self.mount.nbatches(self.split, self.batch, self.world)
        if info is None:
            self._taken = 0
        else:
            self._state[2] = 1  # counted by the loop: state_dict(batches=)
        for batch in self.mount.epoch_batches(self.split, epoch, range(start + w, nb, nw),
                                              self.seed, self.batch, self.rank, self.world,
                                              self.views):
            if info is None:
                self._taken += 1  # handed out: taken by the loop
            yield _tensors(*batch)


class MapDataset(Dataset):
    """A map-style torch Dataset of one split: ds[i] = (x, y) of sample i.

    x float32 (C, H, W) in [0, 1] (then transform(x) if given), y the label
    as an int (then target_transform(y)). From <split>/images.npy and
    labels.npy through np.load(mmap_mode='r'), opened in each process on
    first use. classes: the store's class names; targets: labels.npy."""

    def __init__(self, path, split="train", transform=None, target_transform=None):
        self.mount = Mount(path)
        self.n = self.mount._split(split)["count"]
        self.split, self.transform, self.target_transform = split, transform, target_transform
        self.classes = self.mount.classes
        self._arrays = None

    def __getstate__(self):
        d = self.__dict__.copy()
        d["_arrays"] = None  # a worker maps the files itself
        return d

    def _open(self):
        if self._arrays is None:
            self._arrays = self.mount._images(self.split)
        return self._arrays

    @property
    def targets(self):
        return np.asarray(self._open()[1]).astype(np.int64)

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        i = int(i)
        if i < 0:
            i += self.n
        if not 0 <= i < self.n:
            raise IndexError(f"sample {i}: the split {self.split!r} has {self.n}")
        im, lb = self._open()
        x = torch.from_numpy(np.array(im[i])).permute(2, 0, 1).float().div_(255.0)
        y = int(lb[i])
        if self.transform is not None:
            x = self.transform(x)
        if self.target_transform is not None:
            y = self.target_transform(y)
        return x, y
