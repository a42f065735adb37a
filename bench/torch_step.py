#!/usr/bin/python3
"""torch_step.py - PyTorch's training step on a GPU, timed alone: the peer of
hntrain --device gpu for issue 31's step-speed targets and the GPU run of
the review's experiment (bench/gpu_check.sh).

The model is hntrain's residual preset in torchvision's blocks (the build of
bench/torch_review.py: the CIFAR stem below 64x64 tiles, the ImageNet stem
from 64x64), SGD with momentum 0.9 and weight decay 5e-4, softmax cross
entropy, x / 255 as hntrain feeds it. The data is seeded random bytes in
host memory, a few batches rotated, so no decoding or I/O enters the time:
each step copies its batch to the GPU from --memory pinned (non_blocking) or
pageable host memory, or reads it from device memory (--memory device).

  --accum K        K micro-batches of --batch/K per optimizer step
  --amp fp16|bf16  autocast (fp16 with a GradScaler)
  --benchmark      cudnn.benchmark (timed, nondeterministic algorithm choice)
  --channels-last  channels_last memory format (PyTorch's fast layout for
                   convolutions on tensor cores)
  --no-tf32        strict fp32 (cudnn.allow_tf32 and matmul TF32 off): PyTorch
                   lets cuDNN use TF32 tensor cores for fp32 convolutions by
                   default; hntrain's fp32 is strict unless --tf32

Runs --warmup optimizer steps, then times --steps with the device
synchronised at both ends, and prints one JSON line: samples_per_s, step_ms.
--matrix FILE runs each line of FILE (these options, as on the command line)
in turn in this one process, a JSON line each, the run's name first.
"""
import argparse
import json
import os
import shlex
import sys
import time


def parser():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--matrix", help="a file of runs, one line of these options each")
    ap.add_argument("--name", default="", help="the run's name in its JSON line")
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--tile", default="224x224x3", help="HxWxC")
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--batch", type=int, default=256, help="global batch (per optimizer step)")
    ap.add_argument("--accum", type=int, default=1)
    ap.add_argument("--amp", default="", choices=["", "fp16", "bf16"])
    ap.add_argument("--memory", default="pinned", choices=["pinned", "pageable", "device"])
    ap.add_argument("--benchmark", action="store_true")
    ap.add_argument("--channels-last", action="store_true")
    ap.add_argument("--no-tf32", action="store_true")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1)
    return ap


def main():
    ap = parser()
    a = ap.parse_args()
    if not a.matrix:
        run(a)
        return
    try:
        with open(a.matrix) as f:
            lines = [ln for ln in (x.strip() for x in f) if ln and not ln.startswith("#")]
    except OSError as e:
        sys.exit(f"torch_step.py: --matrix {a.matrix}: {e.strerror}")
    for ln in lines:
        run(ap.parse_args(shlex.split(ln)))
        sys.stdout.flush()


def run(a):
    try:
        h, w, c = (int(v) for v in a.tile.split("x"))
    except ValueError:
        sys.exit(f"torch_step.py: --tile {a.tile!r}: expected HxWxC, such as 224x224x3")
    if a.accum < 1 or a.batch % a.accum:
        sys.exit(f"torch_step.py: --batch {a.batch} is not a multiple of --accum {a.accum}")
    if a.steps < 1 or a.warmup < 0:
        sys.exit("torch_step.py: --steps must be at least 1 and --warmup at least 0")
    import torch
    import torch.nn.functional as F
    if not torch.cuda.is_available():
        sys.exit("torch_step.py: no CUDA device")
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from torch_review import build

    torch.manual_seed(a.seed)
    torch.backends.cudnn.benchmark = a.benchmark
    torch.backends.cudnn.allow_tf32 = not a.no_tf32
    torch.backends.cuda.matmul.allow_tf32 = not a.no_tf32
    dev = torch.device("cuda")
    fmt = torch.channels_last if a.channels_last else torch.contiguous_format
    model = build(a.model, c, a.classes, (h, w)).to(dev).to(memory_format=fmt)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
    amp_dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(a.amp)
    scaler = torch.amp.GradScaler("cuda") if a.amp == "fp16" else None
    micro = a.batch // a.accum
    g = torch.Generator().manual_seed(a.seed)
    nbuf = 4
    xs = [torch.randint(0, 256, (micro, c, h, w), dtype=torch.uint8, generator=g) for _ in range(nbuf)]
    ys = [torch.randint(0, a.classes, (micro,), generator=g) for _ in range(nbuf)]
    if a.memory == "pinned":
        xs, ys = [x.pin_memory() for x in xs], [y.pin_memory() for y in ys]
    elif a.memory == "device":
        xs, ys = [x.to(dev) for x in xs], [y.to(dev) for y in ys]
    nb = a.memory == "pinned"
    k = 0

    def step():
        nonlocal k
        for _ in range(a.accum):
            x = xs[k % nbuf].to(dev, non_blocking=nb)
            y = ys[k % nbuf].to(dev, non_blocking=nb)
            k += 1
            x = x.float().div_(255).contiguous(memory_format=fmt)
            with torch.autocast("cuda", dtype=amp_dtype, enabled=amp_dtype is not None):
                loss = F.cross_entropy(model(x), y) / a.accum
            (scaler.scale(loss) if scaler else loss).backward()
        if scaler:
            scaler.step(opt)
            scaler.update()
        else:
            opt.step()
        opt.zero_grad(set_to_none=True)

    model.train()
    for _ in range(a.warmup):
        step()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        step()
    torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    print(json.dumps({
        "name": a.name, "peer": "torch", "torch": torch.__version__, "cudnn": torch.backends.cudnn.version(),
        "device": torch.cuda.get_device_name(), "model": a.model, "tile": [h, w, c],
        "batch": a.batch, "accum": a.accum, "amp": a.amp or None, "memory": a.memory,
        "cudnn_benchmark": a.benchmark, "channels_last": a.channels_last,
        "tf32": not a.no_tf32 and not a.amp,
        "steps": a.steps, "seconds": dt, "step_ms": 1000 * dt / a.steps,
        "samples_per_s": a.steps * a.batch / dt}))


if __name__ == "__main__":
    main()
