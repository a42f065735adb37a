#!/usr/bin/python3
"""torch_review.py - the PyTorch side of `spritefs-bench review`: the review's
experiment (gradient accumulation, mixed precision, pinned host memory) on a
residual network trained from a spritefs mount.

The model is hntrain's residual preset in torchvision's blocks: resnet18 or
resnet50 with the CIFAR stem (3x3 stride-1 conv, no max-pool) for tiles below
64x64, the ImageNet stem above, and resnet-fm (trainer/model.h), all with the
mount's channel and class counts. The data is spritefs.torch.EpochDataset
over the mount (the mount's documented epoch order, seed 1) in a DataLoader,
as a PyTorch user of the mount would write it; x / 255 as hntrain feeds it.
Optimizer as hntrain's defaults: SGD, momentum 0.9, lr 0.05, weight decay
5e-4, cosine over the run's optimizer steps.

  --accum K     K micro-batches of --batch/K samples per optimizer step (the
                loss of each scaled by 1/K): the same global batch
  --amp fp16|bf16  autocast (cuda: fp16 with a GradScaler; cpu: bf16 only)
  --pin         DataLoader(pin_memory=True) and non_blocking copies (cuda)

Prints one JSON line: per-epoch training seconds (data wait included: the
loop's wall time), samples/s over the epochs, and the test accuracy after
the last epoch. Run with Debian's /usr/bin/python3.
"""
import argparse
import json
import math
import sys
import time


def build(name, channels, classes, tile):
    import torch.nn as nn
    import torchvision
    from torchvision.models.resnet import BasicBlock
    if name == "resnet-fm":
        def proj(i, o):
            return nn.Sequential(nn.Conv2d(i, o, 1, 2, bias=False), nn.BatchNorm2d(o))
        return nn.Sequential(nn.Conv2d(channels, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32),
                             nn.ReLU(), nn.MaxPool2d(2), BasicBlock(32, 32),
                             BasicBlock(32, 64, 2, proj(32, 64)),
                             BasicBlock(64, 128, 2, proj(64, 128)),
                             nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, classes))
    if name not in ("resnet18", "resnet50"):
        sys.exit(f"torch_review.py: unknown model '{name}' (resnet18, resnet50, resnet-fm)")
    m = getattr(torchvision.models, name)(num_classes=classes)
    if min(tile) < 64:  # hntrain's presets: the CIFAR stem below 64x64
        m.conv1 = nn.Conv2d(channels, 64, 3, 1, 1, bias=False)
        m.maxpool = nn.Identity()
    elif channels != 3:
        m.conv1 = nn.Conv2d(channels, 64, 7, 2, 3, bias=False)
    return m


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mount", help="a spritefs mount (train and test splits)")
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch", type=int, default=64, help="global batch (per optimizer step)")
    ap.add_argument("--accum", type=int, default=1)
    ap.add_argument("--amp", default="", choices=["", "fp16", "bf16"])
    ap.add_argument("--pin", action="store_true")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--workers", type=int, default=0, help="DataLoader workers")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--lr", type=float, default=0.05)
    a = ap.parse_args()
    if a.accum < 1 or a.batch % a.accum:
        sys.exit(f"torch_review.py: --batch {a.batch} is not a multiple of --accum {a.accum}")
    if a.device == "cpu" and a.amp == "fp16":
        sys.exit("torch_review.py: --amp fp16 needs --device cuda (CPU autocast is bf16)")
    if a.device == "cpu" and a.pin:
        sys.exit("torch_review.py: --pin needs --device cuda (pinned memory is for host-to-GPU copies)")
    import torch
    import torch.nn.functional as F
    from torch.utils.data import DataLoader
    from spritefs import Mount
    from spritefs.torch import EpochDataset
    if a.device == "cuda" and not torch.cuda.is_available():
        sys.exit("torch_review.py: --device cuda: no CUDA device")
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    dev = torch.device(a.device)
    mnt = Mount(a.mount)
    h, w, c = mnt.tile
    classes = max(len(mnt.classes), 1)
    micro = a.batch // a.accum
    train = EpochDataset(a.mount, "train", seed=a.seed, batch=micro)
    test = EpochDataset(a.mount, "test", seed=a.seed, batch=500)
    kw = {"batch_size": None, "num_workers": a.workers, "pin_memory": a.pin}
    if a.workers:
        kw["persistent_workers"] = True
    dl, tl = DataLoader(train, **kw), DataLoader(test, **kw)
    model = build(a.model, c, classes, (h, w)).to(dev)
    if a.device == "cuda":
        model = model.to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9, weight_decay=5e-4)
    steps = a.epochs * math.ceil(len(train) / a.accum)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, max(1, steps))
    amp_dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(a.amp)
    scaler = torch.cuda.amp.GradScaler() if a.amp == "fp16" else None

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize()

    def step():
        if scaler:
            scaler.step(opt)
            scaler.update()
        else:
            opt.step()
        opt.zero_grad(set_to_none=True)
        sched.step()

    epochs, train_s, samples = [], 0.0, 0
    for ep in range(a.epochs):
        train.set_epoch(ep)
        model.train()
        loss_sum, n, k = torch.zeros((), device=dev), 0, 0
        opt.zero_grad(set_to_none=True)
        sync()
        t0 = time.perf_counter()
        for x, y, _ in dl:
            x, y = x.to(dev, non_blocking=a.pin), y.to(dev, non_blocking=a.pin)
            with torch.autocast(dev.type, dtype=amp_dtype, enabled=amp_dtype is not None):
                loss = F.cross_entropy(model(x), y)
            part = loss / a.accum
            (scaler.scale(part) if scaler else part).backward()
            k += 1
            if k % a.accum == 0:
                step()
            loss_sum += loss.detach().float() * y.shape[0]
            n += y.shape[0]
        if k % a.accum:  # a group never spans two epochs (as hntrain's)
            step()
        sync()
        dt = time.perf_counter() - t0
        train_s += dt
        samples += n
        epochs.append({"epoch": ep + 1, "wall_s": dt, "samples": n, "samples_per_s": n / dt if dt else 0.0,
                       "train_loss": loss_sum.item() / max(1, n)})
    model.eval()
    correct = total = 0
    t0 = time.perf_counter()
    with torch.no_grad():
        for x, y, _ in tl:
            x, y = x.to(dev), y.to(dev)
            with torch.autocast(dev.type, dtype=amp_dtype, enabled=amp_dtype is not None):
                correct += (model(x).argmax(1) == y).sum().item()
            total += y.shape[0]
    print(json.dumps({
        "peer": "torch", "torch": torch.__version__, "model": a.model,
        "device": torch.cuda.get_device_name() if dev.type == "cuda" else "cpu",
        "tile": [h, w, c], "classes": classes, "batch": a.batch, "accum": a.accum, "micro_batch": micro,
        "amp": a.amp or None, "pin_memory": a.pin, "threads": a.threads, "workers": a.workers,
        "epochs": a.epochs, "samples": samples, "train_s": train_s,
        "epoch_s": train_s / a.epochs if a.epochs else None,
        "samples_per_s": samples / train_s if train_s > 0 else 0.0,
        "eval_s": time.perf_counter() - t0,
        "test_acc": correct / total if total else None, "test_samples": total, "per_epoch": epochs}))


if __name__ == "__main__":
    main()
