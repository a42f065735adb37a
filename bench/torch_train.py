#!/usr/bin/python3
"""torch_train.py - the PyTorch CPU peer for hntrain's T4 (samples/s) comparison.

Trains the same models hntrain builds ("cnn", "mlp", "lenet5", "cnn-bn",
"resnet-fm", and "resnet18" with the CIFAR stem hntrain gives 28x28 tiles;
trainer/model.h)
on Fashion-MNIST read straight from the IDX .gz files into tensors in RAM, so
the timed loop is compute only: no DataLoader, no decoding, no I/O. Inputs are
normalised as hntrain's backends do (byte / 255), the loss is softmax cross-
entropy (mean over the batch), the optimizer SGD with momentum 0.9.

Prints one JSON object: model, samples_per_s (training samples / training
seconds, all epochs), per-epoch figures, test_acc of the last epoch.

Run with Debian's interpreter (/usr/bin/python3, python3-torch 1.13):
  /usr/bin/python3 bench/torch_train.py --model cnn --epochs 1 --threads 2

--device cuda is the GPU peer (hntrain --device gpu): the whole data set is
copied to the GPU first, each step is eager PyTorch with no host sync (the
loss is summed on the device and read once per epoch), and the timer waits
for the device. --amp fp16|bf16 adds autocast (and a GradScaler for fp16),
--benchmark sets cudnn.benchmark (the nondeterministic, timed algorithm
choice, like hntrain --fast).
"""
import argparse
import gzip
import json
import os
import struct
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

DATA = "/usr/share/datasets/fashion-mnist"


def load_idx(path):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise ValueError(f"{path}: too short for an IDX header")
    magic, n = struct.unpack(">II", raw[:8])
    if magic == 0x00000803:
        h, w = struct.unpack(">II", raw[8:16])
        if len(raw) != 16 + n * h * w:
            raise ValueError(f"{path}: size does not match {n}x{h}x{w}")
        t = torch.frombuffer(bytearray(raw[16:]), dtype=torch.uint8)
        return t.view(n, 1, h, w)
    if magic == 0x00000801:
        if len(raw) != 8 + n:
            raise ValueError(f"{path}: size does not match {n} labels")
        return torch.frombuffer(bytearray(raw[8:]), dtype=torch.uint8).long()
    raise ValueError(f"{path}: bad IDX magic {magic:#x}")


def build(name, nclasses=10):
    if name == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(),
                             nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, nclasses))
    if name == "cnn":
        return nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Conv2d(32, 64, 3), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Flatten(), nn.Linear(64 * 5 * 5, 128), nn.ReLU(),
                             nn.Linear(128, nclasses))
    if name == "lenet5":
        return nn.Sequential(nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Flatten(), nn.Linear(16 * 5 * 5, 120), nn.ReLU(),
                             nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, nclasses))
    if name == "cnn-bn":
        return nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
                             nn.MaxPool2d(2),
                             nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
                             nn.MaxPool2d(2),
                             nn.Flatten(), nn.Linear(64 * 7 * 7, 256), nn.BatchNorm1d(256),
                             nn.ReLU(), nn.Dropout(0.3), nn.Linear(256, nclasses))
    if name == "resnet-fm":  # c32k3p1nb-bn-r-m2-res32-res64s2p-res128s2p-gap
        from torchvision.models.resnet import BasicBlock

        def proj(i, o):
            return nn.Sequential(nn.Conv2d(i, o, 1, 2, bias=False), nn.BatchNorm2d(o))
        return nn.Sequential(nn.Conv2d(1, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32),
                             nn.ReLU(), nn.MaxPool2d(2), BasicBlock(32, 32),
                             BasicBlock(32, 64, 2, proj(32, 64)),
                             BasicBlock(64, 128, 2, proj(64, 128)),
                             nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, nclasses))
    if name == "resnet18":  # hntrain's resnet18 below 64x64 tiles: the CIFAR stem
        import torchvision
        m = torchvision.models.resnet18(num_classes=nclasses)
        m.conv1 = nn.Conv2d(1, 64, 3, 1, 1, bias=False)
        m.maxpool = nn.Identity()
        return m
    raise SystemExit(f"torch_train.py: unknown model '{name}' "
                     "(cnn, mlp, lenet5, cnn-bn, resnet-fm, resnet18)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="cnn")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--limit", type=int, default=0, help="first N training samples (0 = all)")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--data", default=DATA)
    ap.add_argument("--no-test", action="store_true", help="skip the per-epoch evaluation")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--amp", default="", choices=["", "fp16", "bf16"], help="cuda only")
    ap.add_argument("--benchmark", action="store_true", help="cudnn.benchmark (cuda only)")
    a = ap.parse_args()
    if a.device == "cpu" and (a.amp or a.benchmark):
        sys.exit("torch_train.py: --amp and --benchmark need --device cuda")
    if a.device == "cuda" and not torch.cuda.is_available():
        sys.exit("torch_train.py: --device cuda: no CUDA device")
    dev = torch.device(a.device)
    torch.backends.cudnn.benchmark = a.benchmark
    amp_dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(a.amp)
    scaler = torch.amp.GradScaler("cuda") if a.amp == "fp16" else None

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize()

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    try:
        xtr = load_idx(os.path.join(a.data, "train-images-idx3-ubyte.gz"))
        ytr = load_idx(os.path.join(a.data, "train-labels-idx1-ubyte.gz"))
        xte = load_idx(os.path.join(a.data, "t10k-images-idx3-ubyte.gz"))
        yte = load_idx(os.path.join(a.data, "t10k-labels-idx1-ubyte.gz"))
    except (OSError, ValueError) as e:
        sys.exit(f"torch_train.py: {e}")
    if a.limit > 0:
        xtr, ytr = xtr[:a.limit], ytr[:a.limit]
    xtr = xtr.to(dev).float().div_(255.0)
    xte = xte.to(dev).float().div_(255.0)
    ytr, yte = ytr.to(dev), yte.to(dev)

    model = build(a.model).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9)
    n = xtr.shape[0]
    nb = n // a.batch  # full batches only, as timed
    epochs = []
    train_s = 0.0
    for ep in range(a.epochs):
        perm = torch.randperm(n).to(dev)
        xs, ys = xtr[perm], ytr[perm]
        model.train()
        loss_sum = torch.zeros((), device=dev)
        sync()
        t0 = time.perf_counter()
        for b in range(nb):
            x = xs[b * a.batch:(b + 1) * a.batch]
            y = ys[b * a.batch:(b + 1) * a.batch]
            opt.zero_grad(set_to_none=True)
            with torch.autocast(dev.type, dtype=amp_dtype, enabled=amp_dtype is not None):
                loss = F.cross_entropy(model(x), y)
            if scaler:
                scaler.scale(loss).backward()
                scaler.step(opt)
                scaler.update()
            else:
                loss.backward()
                opt.step()
            loss_sum += loss.detach().float() * a.batch
        sync()
        dt = time.perf_counter() - t0
        train_s += dt
        acc = None
        if not a.no_test:
            model.eval()
            correct = 0
            with torch.no_grad():
                for b in range(0, xte.shape[0], 1000):
                    correct += (model(xte[b:b + 1000]).argmax(1) == yte[b:b + 1000]).sum().item()
            acc = correct / xte.shape[0]
        epochs.append({"epoch": ep + 1, "samples_per_s": nb * a.batch / dt,
                       "train_loss": loss_sum.item() / (nb * a.batch), "test_acc": acc})
    print(json.dumps({
        "peer": "pytorch", "torch": torch.__version__, "model": a.model,
        "device": torch.cuda.get_device_name() if dev.type == "cuda" else "cpu",
        "amp": a.amp or None, "cudnn_benchmark": a.benchmark,
        "threads": a.threads, "batch": a.batch, "epochs": a.epochs,
        "samples": nb * a.batch * a.epochs,
        "samples_per_s": nb * a.batch * a.epochs / train_s if train_s > 0 else 0.0,
        "train_s": train_s, "test_acc": epochs[-1]["test_acc"] if epochs else None,
        "per_epoch": epochs,
    }))


if __name__ == "__main__":
    main()
