#!/usr/bin/python3
"""torch_feed.py - one PyTorch training loop, fed two ways: the PyTorch side of
`spritefs-bench pytorch` (issue 30's target T13).

A torchvision resnet18 (its ImageNet layout, num_classes from the data) trains
on the CPU on 64x64x3 tiles (--tile), fed by a DataLoader with --workers
workers and batches of --batch, from one of:

  --mount MNT    the spritefs reader: spritefs.torch.EpochDataset over the
                 mount's training split (the mount's epoch order, --seed), the
                 tiles the packer cut with its crop fit, x / 255
  --folder DIR   torchvision.datasets.ImageFolder over DIR (the JPEG folder's
                 train/), PIL's loader, Resize(short side) + CenterCrop(tile)
                 (the packer's crop fit) + ToTensor, shuffled by a generator
                 seeded with --seed; --files LIST keeps the files LIST names
                 (those the store holds)

Everything else is the same: the model and its initial weights (--seed), SGD
(lr 0.05, momentum 0.9, weight decay 5e-4), softmax cross-entropy, the torch
threads of the training process (--threads; each worker runs one), and
persistent workers. Each batch carries the sample indices; every epoch the
loop checks that each sample of the split came exactly once (the multiset of
indices is 0..n-1) and counts the labels per class.

Prints one JSON line: per epoch the wall time, the time to the first batch and
the samples; samples_s, the steady rate (the samples after each epoch's first
step over the time after it: start-up, the first batch's wait and the first
step left out, which favours the slower feed), epoch_samples_s (all samples over the whole
epochs), exactly_once, the label counts, the final training loss. Run with
Debian's /usr/bin/python3 (python3-torch, python3-torchvision).
"""
import argparse
import json
import os
import sys
import time


def kept_folder(files, torchvision):
    """(keep, Folder, is_valid_file): the paths FILES lists (None without FILES), and an
    ImageFolder whose classes are the folders holding a kept file (ImageFolder refuses a
    class folder with no file: a subset export can leave one empty, and FILES a class with
    no file kept). torch_loader.py shares it."""
    keep = None
    if files:
        with open(files, encoding="utf-8", errors="surrogateescape") as f:
            keep = {os.path.normpath(line.rstrip("\n")) for line in f if line.strip()}

    class Folder(torchvision.datasets.ImageFolder):
        def find_classes(self, directory):
            if keep is not None:
                top = os.path.normpath(directory) + os.sep
                names = sorted({p[len(top):].split(os.sep)[0] for p in keep
                                if p.startswith(top) and os.sep in p[len(top):]})
            else:
                names = sorted(e.name for e in os.scandir(directory)
                               if e.is_dir() and any(os.scandir(e.path)))
            return names, {n: i for i, n in enumerate(names)}

    valid = (lambda p: os.path.normpath(p) in keep) if keep is not None else None
    return keep, Folder, valid


def folder_dataset(root, files, tile, torchvision):
    """ImageFolder over ROOT, items (x, y, index); with FILES only those files."""
    from torchvision import transforms
    _, Folder, valid = kept_folder(files, torchvision)

    class Indexed(Folder):
        def __getitem__(self, i):
            x, y = super().__getitem__(i)
            return x, y, i

    tf = transforms.Compose([transforms.Resize(min(tile)), transforms.CenterCrop(tile),
                             transforms.ToTensor()])
    return Indexed(root, transform=tf, is_valid_file=valid)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--mount", help="a spritefs mount of the store (its train split)")
    src.add_argument("--folder", help="an ImageFolder root (class folders inside)")
    ap.add_argument("--files", default="", help="with --folder: read only the files this list names")
    ap.add_argument("--tile", default="64x64", help="HxW of the tiles (the mount's own with --mount)")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2, help="torch threads of the training process")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--lr", type=float, default=0.05)
    a = ap.parse_args()
    if a.epochs < 1 or a.batch < 1 or a.workers < 0 or a.threads < 1:
        sys.exit("torch_feed.py: --epochs, --batch and --threads at least 1, --workers at least 0")
    import torch
    import torch.nn.functional as F
    import torchvision
    from torch.utils.data import DataLoader
    torch.set_num_threads(a.threads)
    kw = {"num_workers": a.workers, "persistent_workers": a.workers > 0}
    if a.mount:
        from spritefs import Mount
        from spritefs.torch import EpochDataset
        m = Mount(a.mount)
        h, w, c = m.tile
        classes = len(m.classes)
        ds = EpochDataset(a.mount, "train", seed=a.seed, batch=a.batch)
        n = m._split("train")["count"]
        dl = DataLoader(ds, batch_size=None, **kw)
    else:
        try:
            h, w = (int(v) for v in a.tile.split("x")[:2])
        except ValueError:
            sys.exit(f"torch_feed.py: --tile {a.tile}: expected HxW")
        ds = folder_dataset(a.folder, a.files, (h, w), torchvision)
        classes, n, c = len(ds.classes), len(ds), 3
        g = torch.Generator()
        g.manual_seed(a.seed)
        dl = DataLoader(ds, batch_size=a.batch, shuffle=True, generator=g, **kw)
    if n == 0:
        sys.exit("torch_feed.py: the training split is empty")
    torch.manual_seed(a.seed)
    model = torchvision.models.resnet18(num_classes=max(classes, 1))
    if c != 3:
        model.conv1 = torch.nn.Conv2d(c, 64, 7, 2, 3, bias=False)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9, weight_decay=5e-4)
    model.train()
    epochs, once, labels = [], True, [0] * max(classes, 1)
    for ep in range(a.epochs):
        if a.mount:
            ds.set_epoch(ep)
        seen = torch.zeros(n, dtype=torch.int64)
        count = [0] * max(classes, 1)
        loss_sum, k, first, t_first = 0.0, 0, 0, None
        t0 = time.perf_counter()
        for x, y, ids in dl:
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            loss_sum += float(loss) * y.shape[0]
            if t_first is None:  # the first step done: the steady rate starts here
                t_first, first = time.perf_counter(), int(y.shape[0])
            k += int(y.shape[0])
            seen.index_add_(0, ids.long(), torch.ones_like(ids, dtype=torch.int64))
            for v in y.tolist():
                count[v] += 1
        t1 = time.perf_counter()
        dup, miss = int((seen > 1).sum()), int((seen == 0).sum())
        once = once and dup == 0 and miss == 0 and k == n
        labels = [p + q for p, q in zip(labels, count)]
        epochs.append({"epoch": ep + 1, "wall_s": t1 - t0, "first_step_s": (t_first or t1) - t0,
                       "samples": k, "first_batch": first, "duplicates": dup, "missing": miss,
                       "label_counts": count, "train_loss": loss_sum / max(1, k)})
    steady_n = sum(e["samples"] - e["first_batch"] for e in epochs)
    steady_s = sum(e["wall_s"] - e["first_step_s"] for e in epochs)
    total_n, total_s = sum(e["samples"] for e in epochs), sum(e["wall_s"] for e in epochs)
    print(json.dumps({
        "peer": "torch_feed", "source": "spritefs-reader" if a.mount else "imagefolder",
        "torch": torch.__version__, "torchvision": torchvision.__version__, "model": "resnet18",
        "tile": [h, w, c], "classes": classes, "split_samples": n, "batch": a.batch,
        "workers": a.workers, "threads": a.threads, "epochs": a.epochs, "samples": total_n,
        "samples_s": steady_n / steady_s if steady_s > 0 else None,
        "epoch_samples_s": total_n / total_s if total_s > 0 else None,
        "train_s": total_s, "exactly_once": once, "label_counts": labels, "per_epoch": epochs}))


if __name__ == "__main__":
    main()
