"""sweeps.py - step 6 of the standard scenario: hntrain swept over cores (pinned),
batch size, loader threads and --augment, the data-parallel runs (1 process x
1 and 2 threads against 2 MPI ranks), the SGEMM peak (T4b's bound) and the
PyTorch training peers (CPU; eager on the GPU where a torch sees one).
Fed by a spritefs mount of the disk store, or by the tmpfs store without one.
"""
import os
import re
import shutil
import subprocess

from . import core

MPI_ROOT_ENV = ["env", "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"]
MPIRUN = ["mpirun", "--oversubscribe", "--bind-to", "none", "--mca", "btl", "self,vader"]


def run(r):
    b = r.b
    b.msg("6/7 sweeps: cores / affinity, batch size, loader threads")
    with b.mounted(r.where["ssd_store"]) as m:
        if m is not None:
            data, medium = b.mnt, "spritefs"
        else:
            data, medium = r.where["tmpfs_store"], "store-tmpfs"
        sweeps(r, data, medium)
    gemm_peak(r)
    torch_train(r)
    torch_gpu(r)


def sweep_plan(r):
    """(name, extra arguments, command prefix) of every sweep run, in order."""
    b, quick = r.b, r.b.cfg.quick
    n = b.ncpu
    plan = []
    cores = [1]
    c = 2
    while c < n:
        cores.append(c)
        c *= 2
    if n > 1:
        cores.append(n)
    for c in cores:
        # pinned to the first c of the CPUs we may use, so one thread does not wander
        aff = ["--affinity", b.cpu_list(c)] if r.has_opt("--affinity") else []
        plan.append((f"sweep-cores{c}", ["--batch", "64", "--threads", str(c)] + aff,
                     ["taskset", "-c", b.cpu_list(c)]))
    for bs in ((32, 256) if quick else (32, 64, 128, 256)):
        plan.append((f"sweep-batch{bs}", ["--batch", str(bs), "--threads", str(n)], []))
    if r.has_opt("--loaders"):
        for l in ((1, 2) if quick else (1, 2, 4)):
            plan.append((f"sweep-loaders{l}", ["--batch", "64", "--threads", str(n), "--loaders", str(l)], []))
    # --augment, the CIFAR recipe, against the same epoch without it: its CPU time on
    # the loaders (augment share), apart from data wait and compute
    if r.has_opt("--augment"):
        plan.append(("sweep-augment-none", ["--batch", "64", "--threads", str(n)], []))
        plan.append(("sweep-augment-crop4-flip", ["--batch", "64", "--threads", str(n),
                                                  "--augment", "crop:4,flip"], []))
    return plan


def sweeps(r, data, medium):
    b, c = r.b, r.b.cfg
    if not b.p.hntrain:
        return
    # One whole epoch: the store is packed from the tree in class order, so a
    # --limit subset would hold only the first classes.
    args = ["--model", c.model, "--epochs", "1", "--seed", "1"] + r.lr + r.limit_train
    for name, extra, prefix in sweep_plan(r):
        r.hntrain(name, medium, "warm", "cpu", data, extra, prefix, args)
    # Data-parallel, the same global batch of 64: 1 process x 1 and x 2 threads
    # against 2 MPI ranks x 1 thread, with and without --affinity (per local rank).
    if b.ncpu < 2:
        b.note("data-parallel runs skipped: one CPU")
    elif not shutil.which("mpirun"):
        b.note("data-parallel runs skipped: no mpirun (openmpi-bin)")
    elif not re.search(r"^ranks: MPI", core.cmd_out([b.p.hntrain, "--version"]), re.M):
        b.note("data-parallel runs skipped: hntrain was built without MPI (libopenmpi-dev)")
    else:
        b.msg("      data-parallel: 1 x 1, 1 x 2 threads, 2 MPI ranks x 1 thread")
        aff = ["--affinity", b.cpu_list(2)]
        mpi = MPI_ROOT_ENV + MPIRUN[:1] + ["-np", "2"] + MPIRUN[1:]
        for name, extra, prefix in (
                ("dp-1x1", ["--batch", "64", "--threads", "1"], []),
                ("dp-1x2", ["--batch", "64", "--threads", "2"], []),
                ("dp-1x2-affinity", ["--batch", "64", "--threads", "2"] + aff, []),
                ("dp-2x1", ["--batch", "32", "--threads", "1"], mpi),
                ("dp-2x1-affinity", ["--batch", "32", "--threads", "1"] + aff, mpi)):
            r.hntrain(name, medium, "warm", "cpu", data, extra, prefix, args)


def gemm_peak(r):
    """The cores' SGEMM rate, the bound of hntrain's training GFLOP/s (T4b)."""
    b = r.b
    if not b.p.hntrain:
        return
    b.msg(f"      SGEMM peak of {b.ncpu} threads (hntrain --gemm-peak)")
    out = b.output([b.p.hntrain, "--gemm-peak", "--threads", str(b.ncpu)], "gemm-peak.err")
    m = re.search(r"^sgemm peak: ([0-9.]+) GFLOP/s", out or "", re.M)
    if m:
        b.rec("gemm", "cpu", "warm", 0, {"threads": b.ncpu}, {"gflops": float(m.group(1))})
    else:
        b.fail("hntrain --gemm-peak (see logs/gemm-peak.err)")


def fmnist_args(c):
    """--limit and --data of the PyTorch training peer."""
    a = ["--limit", str(c.limit)] if c.limit else []
    if any("idx" in f for f in os.listdir(c.fmnist)):
        a += ["--data", c.fmnist]
    return a


def torch_train(r):
    """PyTorch training loop: the same model, batch and threads."""
    b, c = r.b, r.b.cfg
    if not r.torch_ok:
        return
    if not b.p.torch_train:
        b.note("bench/torch_train.py not found: PyTorch training peer skipped")
        return
    b.msg(f"      PyTorch training loop ({c.model}, batch 64, {b.ncpu} threads)")
    if c.dataset in ("large", "data", "photos"):
        b.note("PyTorch training peer is run on Fashion-MNIST 28x28 only")
        return
    if c.model not in ("cnn", "mlp", "lenet5"):
        b.note(f"PyTorch training peer builds cnn, mlp and lenet5 only: skipped for --model {c.model}")
        return
    cmd = [core.PY, b.p.torch_train, "--model", c.model, "--epochs", str(c.epochs), "--batch", "64",
           "--threads", str(b.ncpu)] + fmnist_args(c)
    out = b.output(cmd, "torch_train.err")
    last = (out or "").strip().splitlines()[-1:] or [""]
    res = core.parse_json(last[0]) if last[0].startswith("{") else None
    if res is None:
        b.fail("torch_train.py (see logs/torch_train.err)")
    else:
        b.rec("train", "torch-train", "warm", 0, {"peer": "torch", "device": "cpu"}, res)


def torch_gpu_python(b):
    """The first of Debian's python3 and the PATH's whose torch sees a GPU."""
    for p in (core.PY, shutil.which("python3")):
        if p and core.quiet([p, "-c", "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)"]) == 0:
            return p
    return None


def torch_gpu(r):
    """The PyTorch eager peer on the GPU (T8b): batch 512, the data on the device."""
    b, c = r.b, r.b.cfg
    if not (r.gpu_peer and b.p.torch_train and c.model in ("cnn", "mlp", "lenet5")
            and c.dataset == "fashion-mnist"):
        return
    gpy = torch_gpu_python(b)
    if not gpy:
        b.note("no python3 here has a torch that sees the GPU: the PyTorch GPU peer (T8b) skipped")
        return
    b.msg(f"      PyTorch eager on the GPU ({c.model}, batch 512, {gpy})")
    cmd = [gpy, b.p.torch_train, "--device", "cuda", "--model", c.model, "--epochs", str(c.epochs),
           "--batch", "512", "--no-test"] + fmnist_args(c)
    with open(b.path("logs", "torch_train_gpu.err"), "w") as err:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=err, text=True)
    last = (p.stdout or "").strip().splitlines()[-1:] or [""]
    res = core.parse_json(last[0]) if p.returncode == 0 and last[0].startswith("{") else None
    if res is None:
        b.fail("torch_train.py --device cuda (see logs/torch_train_gpu.err)")
    else:
        b.rec("train", "torch-gpu", "warm", 0,
              {"peer": "torch-gpu", "device": "gpu", "name": "torch-gpu-b512"}, res)
