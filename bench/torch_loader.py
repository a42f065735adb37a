#!/usr/bin/python3
"""torch_loader.py - the PyTorch input-pipeline peer of spritefs-bench.

torchvision.datasets.ImageFolder + DataLoader over an image tree (the TIFF
ImageFolder tree on tmpfs or on the disk, or a spritefs mount's by-class
view), as a PyTorch user would write it: default PIL loader, (with
--resize, Resize + CenterCrop for photos of every size), ToTensor,
shuffle off (order does not change the bytes read), N workers, batch B.
It only iterates: no model. Prints one JSON line with samples/s, so the
bench can set it against spritefs-readbench's decoded samples/s (target T3).
Run with Debian's /usr/bin/python3 (python3-torch, python3-torchvision).
"""
import argparse
import json
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
    class Folder(torchvision.datasets.ImageFolder):
        # A subset export can leave a class folder empty; ImageFolder refuses
        # those, so classes are the folders that hold files.
        def find_classes(self, directory):
            import os
            names = sorted(e.name for e in os.scandir(directory)
                           if e.is_dir() and any(os.scandir(e.path)))
            return names, {n: i for i, n in enumerate(names)}

    steps = []
    if a.resize:
        try:
            h, w = (int(v) for v in a.resize.split("x")[:2])
        except ValueError:
            print(f"torch_loader: --resize {a.resize}: expected HxW", file=sys.stderr)
            return 2
        steps = [transforms.Resize(min(h, w)), transforms.CenterCrop((h, w))]
    ds = Folder(a.root, transform=transforms.Compose(steps + [transforms.ToTensor()]))
    if a.limit and a.limit < len(ds):
        ds = torch.utils.data.Subset(ds, range(a.limit))
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


if __name__ == "__main__":
    sys.exit(main())
