"""spritefs - read a spritefs mount from Python (numpy; PyTorch in spritefs.torch).

    import spritefs
    m = spritefs.Mount("/mnt/fmnist")
    for x, y, ids in m.epoch("train", epoch=0, seed=0, batch=64):
        ...                       # x: uint8 (B, H, W, C), y: uint16 (B,), ids: uint32 (B,)

    from spritefs.torch import EpochDataset, MapDataset   # (also spritefs.EpochDataset)

The sample order is the documented one (docs/FORMAT.md, "The sample order"):
splitmix64, a full Fisher-Yates shuffle or the windowed one, as the split's
`order` in dataset.json says. Batches come from the mount's epoch views
(`<split>/epochs/<seed>/<epoch>/<n>.sprite`) when they hold the global batch
or, as hntrain's MPI ranks read them, each rank's share; otherwise they are
gathered from `<split>/images.npy` in the same order. Either way the sample ids are checked
against the permutation, so a reader never trains on another order silently.

Data-parallel sharding: with `world` ranks, global batch g holds the epoch
order's samples [g*B*world, min((g+1)*B*world, n)); of its b samples rank r
takes [b*r//world, b*(r+1)//world). The ranks' shards of a global batch,
concatenated in rank order, are the global batch. `start_batch` resumes an
epoch at a (global) batch index.

torchvision's ImageFolder over `<split>/by-class` numbers the classes that
by-class lists (those with samples in the split) in name order;
`Mount.by_class_labels(split)[target]` is the store label (labels.npy) of
ImageFolder's target.

Errors are OSError/ValueError subclasses whose message names the file and
what is wrong (SpritefsError).
"""

import errno
import json
import os
import struct

import numpy as np

# (EpochDataset and MapDataset, spritefs.torch's, are reachable as spritefs.X too)
__all__ = ["Mount", "SpritefsError", "perm", "perm_windowed", "epoch_order",
           "read_batch", "shard_range"]

M64 = (1 << 64) - 1


class SpritefsError(ValueError):
    """A mount, dataset.json or batch file that cannot be read as documented."""


# --- the documented permutation (docs/FORMAT.md; tests/perm_ref.py uses this) ---

class Rng:
    def __init__(self, seed, epoch):
        self.s = (seed ^ (epoch * 0xD1B54A32D192ED03)) & M64

    def next(self):
        self.s = (self.s + 0x9E3779B97F4A7C15) & M64
        z = self.s
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
        return z ^ (z >> 31)

    def below(self, k):
        return (self.next() * k) >> 64


def shuffle(rng, a):
    for i in range(len(a) - 1, 0, -1):
        j = rng.below(i + 1)
        a[i], a[j] = a[j], a[i]


def perm(seed, epoch, n):
    rng = Rng(seed, epoch)
    p = list(range(n))
    shuffle(rng, p)
    return p


def perm_windowed(seed, epoch, n, sheet_tiles, window):
    if n == 0:
        return []
    if sheet_tiles == 0 or sheet_tiles > n:
        sheet_tiles = n
    window = max(window, 1)
    nsheets = (n + sheet_tiles - 1) // sheet_tiles
    if window >= nsheets:
        return perm(seed, epoch, n)
    nwin = (nsheets + window - 1) // window
    rng = Rng(seed, epoch)
    worder = list(range(nwin))
    shuffle(rng, worder)
    strata = []
    for first in range(0, nsheets, nwin):
        members = list(range(first, min(first + nwin, nsheets)))
        shuffle(rng, members)
        strata.append(members)
    out = []
    for w in worder:
        samples = []
        for members in strata:
            if w < len(members):
                s = members[w]
                samples.extend(range(s * sheet_tiles, min((s + 1) * sheet_tiles, n)))
        shuffle(rng, samples)
        out.extend(samples)
    return out


def order_window(sheet_tiles, tile_bytes):
    return min(max((128 << 20) // (sheet_tiles * tile_bytes), 2), 65536)


def epoch_order(seed, epoch, n, sheet_tiles=0, window=0):
    """The epoch's order as a uint32 array: windowed when 0 < window, else full."""
    if window:
        p = perm_windowed(seed, epoch, n, sheet_tiles, window)
    else:
        p = perm(seed, epoch, n)
    return np.asarray(p, dtype=np.uint32)


def shard_range(b, rank, world):
    """The slice [lo, hi) of a global batch of b samples that rank takes."""
    if not 0 <= rank < world:
        raise ValueError(f"rank {rank} is not in [0, {world})")
    return b * rank // world, b * (rank + 1) // world


# --- files ------------------------------------------------------------------

def _read_file(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        if e.errno == errno.EIO:
            raise OSError(e.errno, f"{path}: input/output error (a sheet of the store "
                          "failed verification; the mount's log names it)") from None
        raise OSError(e.errno, f"{path}: {e.strerror}") from None


def read_batch(path):
    """A batch file (docs/FORMAT.md, "The batch file"): (tiles, labels, ids).

    tiles: uint8 (count, h, w, c); labels: uint16; ids: uint32; views of one
    buffer read from the file."""
    buf = _read_file(path)
    if len(buf) < 64 or buf[:8] != b"SPRBATCH":
        raise SpritefsError(f"{path}: not a sprite batch file")
    (version, hsize, count, h, w, c, lo, io, to, split, total) = struct.unpack_from("<10IQ", buf, 8)
    if version != 1 or hsize != 64:
        raise SpritefsError(f"{path}: unsupported batch file version {version}")
    if total != len(buf):
        raise SpritefsError(f"{path}: {len(buf)} bytes, the header says {total}")
    tb = count * h * w * c
    if lo + 2 * count > total or io + 4 * count > total or to + tb != total:
        raise SpritefsError(f"{path}: section offsets out of the file")
    a = np.frombuffer(buf, np.uint8)
    labels = a[lo:lo + 2 * count].view("<u2")
    ids = a[io:io + 4 * count].view("<u4")
    tiles = a[to:total].reshape(count, h, w, c)
    return tiles, labels, ids


class Mount:
    """A spritefs mount (or a copy of its files): dataset.json and the splits."""

    def __init__(self, path):
        self.path = os.fspath(path)
        js = os.path.join(self.path, "dataset.json")
        if not os.path.isdir(self.path):
            raise FileNotFoundError(errno.ENOENT, f"{self.path}: no such folder (is the data set mounted?)")
        try:
            with open(js, "rb") as f:
                raw = f.read()
        except OSError as e:
            raise OSError(e.errno, f"{js}: {e.strerror} (is {self.path} a spritefs mount?)") from None
        try:
            meta = json.loads(raw)
            t = meta["tile"]
            self.tile = (int(t["h"]), int(t["w"]), int(t["c"]))
            self.sheet_tiles = int(meta["sheet_tiles"])
            self.splits = {}
            for name, s in meta["splits"].items():
                self.splits[name] = {"count": int(s["count"]), "order": s["order"],
                                     "window": int(s["window"])}
                if s["order"] not in ("full", "windowed"):
                    raise ValueError(f"split {name}: order {s['order']!r}")
            ep = meta["epochs"]
            self.view_seed, self.view_count = int(ep["seed"]), int(ep["count"])
            self.view_batch = int(ep["batch"])
            self.classes = list(meta.get("classes", []))
            self.class_dirs = list(meta.get("class_dirs", self.classes))
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise SpritefsError(f"{js}: not a spritefs dataset.json ({type(e).__name__}: {e})") from None
        self.meta = meta

    def _split(self, split):
        if split not in self.splits:
            raise SpritefsError(f"{self.path}/dataset.json: no split {split!r} "
                                f"(it has {', '.join(sorted(self.splits))})")
        return self.splits[split]

    def __len__(self):
        return sum(s["count"] for s in self.splits.values())

    def order(self, split, epoch, seed=0):
        """The epoch's sample order of split, as the mount serves its views."""
        s = self._split(split)
        win = s["window"] if s["order"] == "windowed" else 0
        return epoch_order(seed, epoch, s["count"], self.sheet_tiles, win)

    def _images(self, split):
        p = os.path.join(self.path, split, "images.npy")
        try:
            im = np.load(p, mmap_mode="r")
            lb = np.load(os.path.join(self.path, split, "labels.npy"), mmap_mode="r")
        except OSError as e:
            raise OSError(e.errno, f"{e.filename or p}: {e.strerror}") from None
        except ValueError as e:
            raise SpritefsError(f"{p}: {e}") from None
        return im.reshape(im.shape[0], *self.tile), lb

    def batches(self, split):
        """The split's batches/ files in store order: (tiles, labels, ids)."""
        d = os.path.join(self.path, split, "batches")
        self._split(split)
        try:
            names = sorted(os.listdir(d))
        except OSError as e:
            raise OSError(e.errno, f"{d}: {e.strerror}") from None
        for name in names:
            yield read_batch(os.path.join(d, name))

    def nbatches(self, split, batch=64, world=1):
        """The number of (global) batches of an epoch of split: ceil(count / (batch*world))."""
        n = self._split(split)["count"]
        return (n + batch * world - 1) // (batch * world)

    def epoch(self, split, epoch, seed=0, batch=64, rank=0, world=1, start_batch=0,
              views=None):
        """Yield (tiles, labels, ids) of each batch of the epoch, this rank's share.

        Global batch g is batch*world samples of the order; rank takes its
        shard_range. Read from the epoch views when they hold the global
        batches (view g, sliced) or, as hntrain's ranks read them, the ranks'
        shares (view g*world + rank, for every full global batch); otherwise,
        and for a short last global batch whose shares are not views,
        gathered from images.npy. views: True to require the views, False to
        gather, None to use them where they serve."""
        nb = self.nbatches(split, batch, world)
        if not 0 <= start_batch <= nb:
            raise ValueError(f"start_batch {start_batch}: the epoch has {nb} batches of {batch * world}")
        return self.epoch_batches(split, epoch, range(start_batch, nb), seed, batch, rank, world,
                                  views)

    def epoch_batches(self, split, epoch, which, seed=0, batch=64, rank=0, world=1, views=None):
        """As epoch(), for the global batch numbers in which (ascending), e.g.
        range(w, nb, workers) for DataLoader worker w."""
        n = self._split(split)["count"]
        order = self.order(split, epoch, seed)
        shard_range(batch, rank, world)
        g = batch * world
        mode = "gather"
        if views is not False and 0 <= epoch < 2047:
            if g == self.view_batch:
                mode = "global"
            elif batch == self.view_batch:
                mode = "rank"
        if views and mode == "gather":
            want = f"{g}" if world == 1 else f"neither {g} nor {batch}"
            raise SpritefsError(f"{self.path}/dataset.json: the epoch views hold batches of "
                                f"{self.view_batch}, not {want} (mount with -o batch={batch})")
        edir = os.path.join(self.path, split, "epochs", str(seed), str(epoch))
        im = lb = None
        for b in which:
            want = order[b * g:min((b + 1) * g, n)]
            lo, hi = shard_range(len(want), rank, world)
            if mode == "global" or (mode == "rank" and len(want) == g):
                v = b if mode == "global" else b * world + rank
                p = os.path.join(edir, f"{v}.sprite")
                tiles, labels, ids = read_batch(p)
                if mode == "global":
                    tiles, labels, ids = tiles[lo:hi], labels[lo:hi], ids[lo:hi]
                if not np.array_equal(ids, want[lo:hi]):
                    raise SpritefsError(f"{p}: sample ids are not those of the documented "
                                        f"order (seed {seed}, epoch {epoch}); "
                                        "the mount serves another order")
                yield tiles, labels, ids
            else:
                if im is None:
                    im, lb = self._images(split)
                ids = want[lo:hi]
                try:
                    yield im[ids], np.asarray(lb[ids], np.uint16), ids
                except OSError as e:
                    raise OSError(e.errno, f"{self.path}/{split}/images.npy: {e.strerror}") from None

    def by_class_labels(self, split):
        """The store label of each class index that torchvision's ImageFolder
        gives over <split>/by-class: a list, [target] is the label (labels.npy).

        by-class lists the classes with samples in the split; ImageFolder
        numbers them in name order. From dataset.json's by_class_labels, or,
        for a store without a label table (null there), from the listing."""
        self._split(split)
        lab = self.meta["splits"][split].get("by_class_labels")
        if lab is None:
            d = os.path.join(self.path, split, "by-class")
            try:
                names = sorted(e.name for e in os.scandir(d) if e.is_dir())
            except OSError as e:
                raise OSError(e.errno, f"{d}: {e.strerror}") from None
            index = {name: k for k, name in enumerate(self.class_dirs)}
            unknown = [name for name in names if name not in index]
            if unknown:
                raise SpritefsError(f"{d}: {unknown[0]!r} is not in dataset.json's class_dirs")
            lab = [index[name] for name in names]
        return [int(k) for k in lab]


def __getattr__(name):
    # spritefs.EpochDataset and spritefs.MapDataset: spritefs.torch's, imported (with
    # torch) on first use, so that the numpy reader does not pay for torch
    if name in ("EpochDataset", "MapDataset"):
        try:
            from . import torch as _torch
        except ImportError as e:
            raise ImportError(f"spritefs.{name} needs PyTorch: {e}") from None
        return getattr(_torch, name)
    raise AttributeError(f"module 'spritefs' has no attribute {name!r}")
