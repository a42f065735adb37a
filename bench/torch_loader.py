#!/usr/bin/python3
"""torch_loader.py - the PyTorch input-pipeline peer of spritefs-bench.

torchvision.datasets.ImageFolder + DataLoader over an image tree (the TIFF
ImageFolder tree on tmpfs or on the disk, or a spritefs mount's by-class
view), as a PyTorch user would write it: default PIL loader, (with
--resize, Resize + CenterCrop for photos of every size), ToTensor,
shuffle off (order does not change the bytes read), N workers, batch B.
It only iterates: no model. Prints one JSON line with samples/s, so the
bench can set it against spritefs-readbench's decoded samples/s (target T3).

With --emulate BATCH:SECONDS it is the PyTorch peer of hntrain --emulate
(spritefs-bench --dataset accelerators): one emulated accelerator that takes
its share (--rank R of --world N) of every global batch of N x BATCH samples
and sleeps SECONDS per batch, to absolute deadlines, in place of the maths;
its JSON line adds AU (compute over wall time, the first step of each epoch
left out of both, as MLPerf Storage and hntrain count it). --resize-short S
with --crop C is torchvision's Resize(S) + CenterCrop(C), ImageNet's recipe.
With --files LIST it reads only the files LIST names (a folder read in place
holds files the packer skipped; spritefs-bench passes the store's path table).
Run with Debian's /usr/bin/python3 (python3-torch, python3-torchvision).
"""
import argparse
import json
import os
import sys
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("root", help="ImageFolder root (class folders inside)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--limit", type=int, default=0, help="at most N samples (0: all)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads in the main process")
    ap.add_argument("--label", default="")
    ap.add_argument("--resize", default="", metavar="HxW",
                    help="Resize(shorter side) + CenterCrop to HxW first, as for photos of "
                         "every size (spritefs-pack's crop fit)")
    ap.add_argument("--emulate", default="", metavar="BATCH:SECONDS",
                    help="an emulated accelerator: BATCH samples per step, SECONDS of sleep each")
    ap.add_argument("--rank", type=int, default=0, help="this accelerator (with --emulate)")
    ap.add_argument("--world", type=int, default=1, help="accelerators in all (with --emulate)")
    ap.add_argument("--epochs", type=int, default=1, help="epochs (with --emulate)")
    ap.add_argument("--resize-short", type=int, default=0, metavar="S",
                    help="Resize(S) (the shorter side) then CenterCrop(--crop)")
    ap.add_argument("--crop", type=int, default=224, metavar="C")
    ap.add_argument("--files", default="", metavar="LIST",
                    help="read only the files LIST names, one path a line as under ROOT: those a "
                         "store kept (a folder read in place holds files the packer skipped)")
    a = ap.parse_args()
    try:
        import torch
        import torchvision
        from torchvision import transforms
    except ImportError as e:
        print(f"torch_loader: PyTorch is not installed here ({e})", file=sys.stderr)
        return 77
    torch.set_num_threads(a.threads)
    t_setup = time.perf_counter()
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from torch_feed import kept_folder
    _, Folder, valid = kept_folder(a.files, torchvision)

    steps = []
    if a.resize:
        try:
            h, w = (int(v) for v in a.resize.split("x")[:2])
        except ValueError:
            print(f"torch_loader: --resize {a.resize}: expected HxW", file=sys.stderr)
            return 2
        steps = [transforms.Resize(min(h, w)), transforms.CenterCrop((h, w))]
    if a.resize_short:
        steps = [transforms.Resize(a.resize_short), transforms.CenterCrop(a.crop)]
    ds = Folder(a.root, transform=transforms.Compose(steps + [transforms.ToTensor()]), is_valid_file=valid)
    if a.limit and a.limit < len(ds):
        ds = torch.utils.data.Subset(ds, range(a.limit))
    if a.emulate:
        return emulate(a, ds, torch)
    # Batches of large images (224x224x3 floats: 38 MB for 64) now and then
    # fail to pass between processes by descriptor ("unable to resize file",
    # EBADF in DupFd); named files in /dev/shm carry them reliably, if more
    # slowly. Small images keep PyTorch's default.
    if len(ds) and ds[0][0].numel() > 64 * 64 * 3:
        torch.multiprocessing.set_sharing_strategy("file_system")
    dl = torch.utils.data.DataLoader(ds, batch_size=a.batch, shuffle=False,
                                     num_workers=a.workers)
    t0 = time.perf_counter()
    n = 0
    checksum = 0.0
    for x, y in dl:
        n += x.shape[0]
        checksum += float(y.sum())
    wall = time.perf_counter() - t0
    print(json.dumps({
        "label": a.label, "peer": "torch-imagefolder", "workers": a.workers,
        "batch": a.batch, "samples": n, "wall_s": round(wall, 6),
        "setup_s": round(t0 - t_setup, 6), "samples_s": round(n / wall, 1),
        "label_sum": int(checksum), "torch": torch.__version__,
    }))
    return 0


def emulate(a, ds, torch):
    """One emulated accelerator over its share of every global batch: the JSON line."""
    try:
        batch, secs = a.emulate.split(":")
        batch, secs = int(batch), float(secs)
        if batch < 1 or secs <= 0 or not 0 <= a.rank < a.world:
            raise ValueError
    except ValueError:
        print(f"torch_loader: --emulate {a.emulate}: expected BATCH:SECONDS (batch >= 1, "
              "seconds > 0), with 0 <= --rank < --world", file=sys.stderr)
        return 2
    n, gb = len(ds), batch * a.world
    share = [i for g in range(0, n - gb + 1, gb) for i in range(g + a.rank * batch, g + (a.rank + 1) * batch)]
    if not share:
        print(f"torch_loader: a global batch of {gb} does not fit the {n} samples", file=sys.stderr)
        return 1
    if ds[0][0].numel() > 64 * 64 * 3:
        torch.multiprocessing.set_sharing_strategy("file_system")
    dl = torch.utils.data.DataLoader(torch.utils.data.Subset(ds, share), batch_size=batch, shuffle=False,
                                     num_workers=a.workers, persistent_workers=a.workers > 0)
    total = {"samples": 0, "wall_s": 0.0, "compute_s": 0.0, "wait_s": 0.0, "first_step_s": 0.0}
    aus = []
    for _ in range(a.epochs):
        t0 = time.perf_counter()
        deadline = t0  # the accelerator's own time line: waits and compute move it
        steps = first = comp = wait = 0.0
        for x, _y in dl:
            now = time.perf_counter()
            w = max(0.0, now - deadline)
            c = secs * x.shape[0] / batch
            deadline = max(deadline, now) + c
            time.sleep(max(0.0, deadline - time.perf_counter()))
            steps += 1
            total["samples"] += x.shape[0]
            if steps == 1:
                first = w + c
            else:
                comp, wait = comp + c, wait + w
        wall = time.perf_counter() - t0
        aus.append(comp / (wall - first) if steps > 1 and wall > first else (1.0 if steps else 0.0))
        total["wall_s"] += wall
        total["compute_s"] += comp
        total["wait_s"] += wait
        total["first_step_s"] += first
    print(json.dumps({
        "peer": "torch-imagefolder", "emulate": a.emulate, "rank": a.rank, "world": a.world,
        "workers": a.workers, "epochs": a.epochs, "au": sum(aus) / len(aus), "au_epochs": aus,
        "samples": total["samples"], "wall_s": round(total["wall_s"], 6),
        "compute_s": round(total["compute_s"], 6), "data_wait_s": round(total["wait_s"], 6),
        "first_step_s": round(total["first_step_s"], 6),
        "samples_s": round(total["samples"] / total["wall_s"], 1) if total["wall_s"] else 0,
        "torch": torch.__version__}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
