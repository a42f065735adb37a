"""review.py - `spritefs-bench review` (or --dataset review): the experiment of
the review "Accelerating Neural Network Training" on this machine.

The review times a residual network with and without three techniques:
gradient accumulation (GA), automatic mixed precision (AMP) and pinned host
memory (PM). Here the same residual preset (resnet18 in the CIFAR layout by
default; resnet-fm with --quick) is trained on the same data and epochs by
hntrain and by PyTorch (torch_review.py, torchvision's blocks), both fed by
one spritefs mount of Fashion-MNIST (the first --limit training and a
fixed number of test images, packed into a store of their own), each
technique off and on, alone and together:

  GA   hntrain --batch B/2 --accum 2; PyTorch two micro-batches of B/2 per
       step (the loss of each halved): the same global batch B
  AMP  GPU: hntrain --amp (fp16), PyTorch autocast fp16 + GradScaler;
       CPU: PyTorch autocast bf16; hntrain's CPU backend has none (said in
       its rows, not measured)
  PM   GPU only (host-to-device copies): PyTorch DataLoader pin_memory on
       and off; hntrain's GPU backend always stages through pinned buffers

B is 64 on the CPU and the review's 128 on a GPU (where hntrain --device gpu
starts). A framework's runs go together, its baseline first; after the matrix
each framework's baseline runs again, in reverse order (hntrain's baseline
runs first and last): the ratio of the two is the run-to-run noise against
which the effects are judged (this machine's cores are shared), and their
mean is the baseline the ratios are taken against. Each run gets a fresh mount whose view batch is its (micro-)batch,
so hntrain reads epoch views. Every run records time per epoch (the training
pass, data wait included), samples/s and test accuracy; review_report.py
makes the tables, results.json and the "what the measurements support"
section from them.
"""
import os
import subprocess

from . import core

MODELS = ("resnet18", "resnet50", "resnet-fm")
CPU_NA = "not available on the CPU backend (hntrain: --amp needs --device gpu)"
PIN_CPU = "GPU only: no host-to-device copies on the CPU"
PIN_HN = "not available: hntrain's GPU backend always stages through pinned buffers"


def steady(per):
    """Time per epoch and samples/s from [(wall_s, samples)] of the epochs: the median over
    the epochs after the first where there are two or more (the first pays the frameworks'
    warm-up: PyTorch's first steps take several times a later one), else the one; and
    every epoch's time."""
    import statistics
    later = per[1:] or per
    wall = statistics.median(w for w, _ in later)
    n = statistics.median(k for _, k in later)
    return {"epoch_s": wall, "samples_s": n / wall if wall else None,
            "epoch_times_s": [w for w, _ in per], "timed_epochs": len(later)}


def matrix(gpu):
    """The runs, a framework's together (its baseline first): (framework, ga, amp, memory,
    None to measure or why it is not)."""
    runs = []
    for fw in ("hntrain", "pytorch"):
        for ga in (1, 2):
            for on in (False, True):
                if gpu:
                    a = "fp16" if on else "off"
                    runs += [("hntrain", ga, a, "pinned", None), ("hntrain", ga, a, "pageable", PIN_HN)] \
                        if fw == "hntrain" else [("pytorch", ga, a, "pageable", None), ("pytorch", ga, a, "pinned", None)]
                elif fw == "hntrain":
                    runs.append(("hntrain", ga, "fp16/bf16" if on else "off", "-", CPU_NA if on else None))
                else:
                    runs.append(("pytorch", ga, "bf16" if on else "off", "-", None))
        if not gpu:
            runs.append((fw, 1, "off", "pinned", PIN_CPU))
    return runs


class Review:
    def __init__(self, b):
        self.b, c = b, b.cfg
        self.store = f"{b.ssd}/review.sprites"
        self.gpu = False
        self.batch = 64
        self.test = c.review_test
        here = os.path.normpath(os.path.join(b.p.here, "..", "mount"))
        self.env = dict(os.environ)
        if os.path.isfile(os.path.join(here, "spritefs", "__init__.py")):  # the source tree's reader
            self.env["PYTHONPATH"] = here + (":" + self.env["PYTHONPATH"] if self.env.get("PYTHONPATH") else "")

    def prepare(self):
        """Fashion-MNIST packed; with --limit, the first N training and the test images
        exported and packed into a store of their own, so that both frameworks read
        all of one mount."""
        b, c = self.b, self.b.cfg
        base = f"{b.ssd}/base.sprites"
        b.msg(f"1/4 preparing data: Fashion-MNIST from {c.fmnist}"
              + (f", the first {c.limit} training and {self.test} test images" if c.limit else ""))
        if not b.run_logged("pack-base", [b.p.pack, c.fmnist, base]):
            b.die(f"spritefs-pack failed (see {b.out}/logs/pack-base.log)")
        if not c.limit:
            os.rename(base, self.store)
        else:
            tree = f"{b.tmpfs}/tree"
            for split, n, more in (("train", c.limit, []), ("test", self.test, ["--force"])):
                if not b.run_logged(f"export-{split}", [b.p.pack, "--export", tree, "--format", "png", "--split",
                                                        split, "--limit", str(n)] + more + [base]):
                    b.die(f"exporting the {split} split failed (see {b.out}/logs/export-{split}.log)")
            if not b.run_logged("pack-review", [b.p.pack, tree, self.store]):
                b.die(f"packing the subset failed (see {b.out}/logs/pack-review.log)")
        count = {}
        with b.mounted(self.store, opts="batch=64") as m:
            if m is None:
                b.die("the store did not mount: the review needs the mount (see logs/spritefs.log)")
            from .rutil import load_json
            meta = load_json(os.path.join(b.mnt, "dataset.json"), {})
            count = {k: v.get("count") for k, v in meta.get("splits", {}).items()}
            tile = meta.get("tile", {})
        core.write_json(b.path("data.json"), {"source": c.fmnist, "splits": count,
                                               "tile": f"{tile.get('h')}x{tile.get('w')}x{tile.get('c')}",
                                               "store_bytes": os.path.getsize(self.store)})
        b.msg(f"      store {os.path.getsize(self.store) / 1e6:.1f} MB, splits {count}")

    def probe_gpu(self):
        b = self.b
        if not b.cfg.gpu:
            return
        with open(b.path("logs", "gpu-probe.out"), "w") as o:
            rc = subprocess.run([b.p.hntrain, "--data", self.store, "--model", "cnn", "--epochs", "1",
                                 "--limit", "256", "--test-split", "none", "--device", "gpu"],
                                stdout=o, stderr=subprocess.STDOUT).returncode
        if rc != 0:
            last = (core.read_text(b.path("logs", "gpu-probe.out")).strip().splitlines() or [""])[-1]
            b.note(f"no GPU: hntrain --device gpu did not start here ({last}); the CPU experiment runs")
            return
        self.gpu, self.batch = True, 128

    def name(self, fw, ga, amp, mem):
        return f"{fw}-ga{ga}-{'amp' if '/' in amp else amp}" + ("" if mem == "-" else f"-{mem}")

    def hntrain(self, name, ga, amp):
        b, c = self.b, self.b.cfg
        log = f"logs/{name}.jsonl"
        cmd = [b.p.hntrain, "--data", b.mnt, "--model", c.model, "--batch", str(self.batch // ga),
               "--accum", str(ga), "--epochs", str(c.epochs), "--seed", "1", "--log", b.path(log)]
        if self.gpu:
            cmd += ["--device", "gpu"] + (["--amp"] if amp == "fp16" else [])
        else:
            cmd += ["--threads", str(b.ncpu)]
        if os.path.exists(b.path(log)):
            os.remove(b.path(log))
        if not b.run_logged(name, cmd):
            b.fail(f"hntrain {name} (see logs/{name}.log)")
            return None, cmd
        from .rutil import summarize_train
        s = summarize_train(b.out, {"medium": "spritefs", "state": "warm", "log": log})
        if s.get("error") or not s.get("epoch_s"):
            b.fail(f"hntrain {name}: {s.get('error', 'no timing in its log')}")
            return None, cmd
        per = [(e.get("wall_s"), e.get("samples")) for e in s["epochs"]]
        if any(w is None or not n for w, n in per):
            b.fail(f"hntrain {name}: an epoch line without wall_s or samples in {log}")
            return None, cmd
        return dict(steady(per), test_acc=s["test_acc"], samples=s["samples"],
                    data_wait_share=s["data_wait_share"], weights_xxh3=s.get("weights_xxh3")), cmd

    def torch(self, name, ga, amp, mem):
        b, c = self.b, self.b.cfg
        cmd = [core.PY, b.p.torch_review, b.mnt, "--model", c.model, "--batch", str(self.batch),
               "--accum", str(ga), "--epochs", str(c.epochs), "--seed", "1"]
        cmd += [] if amp == "off" else ["--amp", amp]
        if self.gpu:
            cmd += ["--device", "cuda", "--workers", "2"] + (["--pin"] if mem == "pinned" else [])
        else:
            cmd += ["--threads", str(b.ncpu)]
        out = b.output(cmd, f"{name}.err")
        r = core.parse_json(out) if out else None
        per = [(e.get("wall_s"), e.get("samples")) for e in (r or {}).get("per_epoch") or []]
        if r is None or not per or any(not w or not n for w, n in per):
            b.fail(f"torch_review.py {name} (see logs/{name}.err)")
            return None, cmd
        return dict(steady(per), test_acc=r["test_acc"], samples=r["samples"], data_wait_share=None,
                    torch=r.get("torch")), cmd

    def run_one(self, fw, ga, amp, mem, why, repeat=False):
        b = self.b
        name = self.name(fw, ga, amp, mem) + ("-repeat" if repeat else "")
        row = {"name": name, "framework": fw, "device": "gpu" if self.gpu else "cpu", "batch": self.batch,
               "ga": ga, "micro_batch": self.batch // ga, "amp": amp, "memory": mem, "repeat": repeat}
        if why:
            b.rec("review-run", name, "n/a", 0, dict(row, status="not available", why=why), None)
            return
        if fw == "pytorch" and not self.torch_ok:
            b.rec("review-run", name, "n/a", 0, dict(row, status="not available", why=self.torch_why), None)
            return
        with b.mounted(self.store, opts=f"batch={self.batch // ga}") as m:
            if m is None:
                return
            res, cmd = self.hntrain(name, ga, amp) if fw == "hntrain" else self.torch(name, ga, amp, mem)
        row["command"] = " ".join(cmd).replace(b.mnt, "MNT")
        if res is None:
            b.rec("review-run", name, "failed", 0, dict(row, status="failed"), None)
            return
        b.rec("review-run", name, "warm", 0, dict(row, status="measured"), res)
        b.msg(f"      {name}: {res['epoch_s']:.1f} s/epoch, {res['samples_s']:.0f} samples/s, "
              f"test acc {100 * (res['test_acc'] or 0):.2f}%")


def run(b):
    from . import cli, report
    r = Review(b)
    r.prepare()
    b.msg("2/4 is there a GPU (hntrain --device gpu)?")
    r.probe_gpu()
    r.torch_ok, r.torch_why = True, ""
    if not b.cfg.torch:
        r.torch_ok, r.torch_why = False, "--no-torch"
    elif not b.p.torch_review or core.quiet([core.PY, "-c", "import torch, torchvision"]) != 0:
        r.torch_ok, r.torch_why = False, "python3-torch / python3-torchvision not installed"
    if not r.torch_ok:
        b.note(f"the PyTorch runs are skipped: {r.torch_why}")
    runs = matrix(r.gpu)
    b.msg(f"3/4 {b.cfg.model} on the {'GPU' if r.gpu else 'CPU'}, batch {r.batch}, {b.cfg.epochs} epoch(s): "
          f"{sum(1 for x in runs if x[4] is None)} runs and 2 repeats")
    load0 = os.getloadavg()
    for fw, ga, amp, mem, why in runs:
        r.run_one(fw, ga, amp, mem, why)
    b.msg("      each framework's baseline again, in reverse order: the run-to-run noise the effects are "
          "held against")
    for fw in ("pytorch", "hntrain") if r.torch_ok else ("hntrain",):
        fw, ga, amp, mem, why = next(x for x in runs if x[0] == fw and x[4] is None)
        r.run_one(fw, ga, amp, mem, why, repeat=True)
    b.rec("review-load", "machine", "-", 0, {"loadavg_before": load0, "loadavg_after": os.getloadavg()})
    b.msg("4/4 report: results.json, the tables, what the measurements support")
    rc = report.main(b.out)
    if rc not in (0, 3):
        b.die("report failed")
    return cli.finish(b, rc, "")
