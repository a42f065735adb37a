"""standard.py - the comparison scenario (fashion-mnist, large, photos, --data).

The same images prepared three ways - a TIFF (or JPEG, PNG) ImageFolder tree
on tmpfs and on the disk, the packed sprite store on tmpfs and on the disk,
and spritefs mounted over the store on the disk - then, side by side: the
ceilings (fio O_DIRECT, dd from tmpfs), raw reads and decoded samples/s
(spritefs-readbench), the PyTorch loader peer, hntrain on every medium (CPU,
and GPU where hntrain finds one), the sweeps, and the report. The medium x
state x run matrix of each step is a table (READS, SPRITEFS_READS, TRAIN)
walked by a short loop.
"""
import glob
import os
import re
import shutil
import subprocess
import time

from . import core

# Raw reads and decodes of the tree and the store: (kind, medium, state, where,
# drop the page cache first, readbench arguments). "cold" is "nodrop" without root.
READS = (
    ("read", "tiff-tmpfs", "warm", "tmpfs_tree", False, []),
    ("decode", "tiff-tmpfs", "warm", "tmpfs_tree", False, ["--decode", "image", "TILE"]),
    ("read", "tiff-ssd", "cold", "ssd_tree", True, []),
    ("read", "tiff-ssd", "warm", "ssd_tree", False, []),
    ("decode", "tiff-ssd", "cold", "ssd_tree", True, ["--decode", "image", "TILE"]),
    ("decode", "tiff-ssd", "warm", "ssd_tree", False, ["--decode", "image", "TILE"]),
    ("read", "store-tmpfs", "warm", "tmpfs_store", False, []),
    ("decode", "store-tmpfs", "warm", "tmpfs_store", False, ["--decode", "store"]),
    ("read", "store-ssd", "cold", "ssd_store", True, []),
    ("decode", "store-ssd", "cold", "ssd_store", True, ["--decode", "store"]),
    ("decode", "store-ssd", "warm", "ssd_store", False, ["--decode", "store"]),
)
# The mount's batch files, then the same bytes on tmpfs (the T1 reference):
# (a fresh cold mount first, kind, medium, state, where, readbench arguments).
# PASSES: a warm pass takes milliseconds, so it is read several times per run.
SPRITEFS_READS = (
    (True, "read", "spritefs", "cold", "batches", ["--match", ".sprite"]),
    (False, "read", "spritefs", "warm", "batches", ["PASSES", "--match", ".sprite"]),
    (False, "decode", "spritefs", "warm", "batches", ["PASSES", "--decode", "batch", "--match", ".sprite"]),
    (False, "decode", "spritefs-npy", "warm", "npys", ["--decode", "npy"]),
    (False, "read", "batches-tmpfs", "warm", "tmpfs_batches", ["PASSES", "--match", ".sprite"]),
    (False, "decode", "batches-tmpfs", "warm", "tmpfs_batches",
     ["PASSES", "--decode", "batch", "--match", ".sprite"]),
    (True, "decode", "spritefs", "cold", "batches", ["--decode", "batch", "--match", ".sprite"]),
    # T2 also with O_DIRECT reads, the mode fio reads the store in (and hntrain its
    # epoch views): one copy, no page cache filled
    (True, "read", "spritefs-direct", "cold", "batches", ["--direct", "--match", ".sprite"]),
)
# The same training job on every medium: (name, medium, state, where, extra arguments);
# "cold" drops the page cache first (and mounts afresh for spritefs).
TRAIN = (
    ("tiff-tmpfs", "tiff-tmpfs", "warm", "tmpfs_tree", ["TILE"]),
    ("tiff-ssd", "tiff-ssd", "cold", "ssd_tree", ["TILE"]),
    ("store-tmpfs", "store-tmpfs", "warm", "tmpfs_store", []),
    ("store-ssd", "store-ssd", "cold", "ssd_store", []),
    ("spritefs", "spritefs", "cold", "mount", []),
    ("preload", "preload", "warm", "tmpfs_store", ["--preload"]),
)


class Run:
    """One standard run: the Bench, the paths, and the per-run settings."""

    def __init__(self, b):
        self.b, c = b, b.cfg
        self.where = {"tmpfs_tree": f"{b.tmpfs}/tree", "ssd_tree": f"{b.ssd}/tree",
                      "tmpfs_store": f"{b.tmpfs}/store/data.sprites",
                      "ssd_store": f"{b.ssd}/store/data.sprites",
                      "tmpfs_batches": f"{b.tmpfs}/batches", "mount": b.mnt}
        self.tile_args = ["--tile", c.tile] if c.tile else []
        self.passes = 3 if c.quick else 10
        help_ = core.cmd_out([b.p.hntrain, "--help"]) if b.p.hntrain else ""
        self.hn_help = help_
        # hntrain's default lr (0.05) is tuned on 28x28 inputs; the cnn's dense layer
        # on 224x224x3 (25M weights) diverges at it, and trains at 0.01.
        self.lr = ["--lr", "0.01"] if c.dataset == "large" else []
        self.limit_train = (["--limit", str(c.train_limit), "--test-limit", str(c.train_limit)]
                            if c.train_limit else [])
        self.train_args = ["--model", c.model, "--epochs", str(c.epochs), "--batch", "64",
                           "--seed", "1"] + self.lr + self.limit_train
        self.torch_ok = False
        self.gpu_peer = False

    def has_opt(self, opt):
        return opt in self.hn_help

    def expand(self, args):
        out = []
        for a in args:
            if a == "TILE":
                out += ["--tile", self.b.cfg.tile] if self.b.cfg.tile else []
            elif a == "PASSES":
                out += ["--passes", str(self.passes)]
            else:
                out.append(a)
        return out

    def state(self, s):
        return self.b.cold if s == "cold" else s

    # ---- 1. data -----------------------------------------------------------------
    def prepare(self):
        b, c, pack = self.b, self.b.cfg, self.b.p.pack
        limit = ["--limit", str(c.limit)] if c.limit else []
        os.makedirs(f"{b.ssd}/store", exist_ok=True)
        os.makedirs(f"{b.tmpfs}/store", exist_ok=True)
        tree = f"{b.tmpfs}/tree"
        if c.dataset == "photos":
            if not b.p.mkphotos:
                b.die("mkphotos.py not found beside it")
            b.msg(f"1/7 preparing data: {c.photos} photo-like JPEGs of 200-640 px, seed 1 (mkphotos.py)")
            if not b.run_logged("mkphotos", [core.PY, b.p.mkphotos, "--count", str(c.photos),
                                             "--seed", "1", tree]):
                b.die(f"mkphotos.py failed (see {b.out}/logs/mkphotos.log)")
            fmt = "jpeg"
        elif c.dataset == "data" and os.path.isdir(c.data):
            b.msg(f"1/7 preparing data: copying {c.data} to tmpfs")
            if subprocess.run(["cp", "-a", c.data, tree]).returncode != 0:
                b.die(f"cannot copy {c.data} to {b.tmpfs} (too large for /dev/shm?)")
            fmt = None  # the commonest extension of what the packer keeps, below
        elif c.dataset == "data":
            b.msg(f"1/7 preparing data: exporting the store {c.data} as a PNG ImageFolder tree")
            if not b.run_logged("export-tree", [pack, "--export", tree, "--format", "png"] + limit + [c.data]):
                b.die(f"export failed (see {b.out}/logs/export-tree.log)")
            fmt = "png"
        else:
            fmt = self.export_fmnist(limit)
        # The bench store is packed from the tree itself, so every medium holds exactly
        # the same samples in the same order (and the same seed gives the same weights).
        b.msg("      packing the tree into the sprite store" + (f" at {c.tile} (crop)" if c.tile else ""))
        t0 = time.monotonic()
        if not b.run_logged("pack-tree", [pack] + self.tile_args + [tree, self.where["ssd_store"]]):
            b.die(f"packing the tree failed (see {b.out}/logs/pack-tree.log)")
        pack_s = round(time.monotonic() - t0, 3)
        found = sum(len(fs) for _, _, fs in os.walk(tree))
        info = self.keep_packed(tree, found)
        if fmt is None:
            fmt = common_ext(tree)
        shutil.copyfile(self.where["ssd_store"], self.where["tmpfs_store"])
        b.msg(f"      copying the tree to the disk ({b.ssd})")
        subprocess.run(["cp", "-a", tree, self.where["ssd_tree"]], check=True)
        os.sync()
        files = [os.path.join(r, f) for r, _, fs in os.walk(tree) for f in fs]
        tree_bytes = sum(os.path.getsize(f) for f in files)
        store_bytes = os.path.getsize(self.where["ssd_store"])
        ntrain = sum(len(fs) for _, _, fs in os.walk(f"{tree}/train"))
        core.write_json(b.path("data.json"), dict({
            "files": len(files), "found": found, "tree_bytes": tree_bytes, "store_bytes": store_bytes,
            "train_files": ntrain, "format": fmt, "tile": c.tile, "pack_s": pack_s}, **info))
        b.msg(f"      {len(files)} files ({tree_bytes} bytes as {fmt}), store {store_bytes} bytes, "
              f"packed in {pack_s} s ({found / (pack_s or 1):.0f} images/s)")
        b.run_logged("store-info", [pack, "--info", self.where["ssd_store"]])
        os.replace(b.path("logs", "store-info.log"), b.path("logs", "store-info.txt"))

    def keep_packed(self, tree, found):
        """The tree cut to what the packer kept, by the store's path table, so that every
        medium reads the store's samples and no reader meets a file the packer skipped
        (a truncated JPEG, a text file named x.jpg, an SVG). The store's sample counts and
        sheets for data.json; the files left out in logs/left-out.txt."""
        from . import storefile
        b, store = self.b, self.where["ssd_store"]
        try:
            h = storefile.header(store)
            kept = storefile.paths(store, h)
        except (OSError, storefile.StoreError) as e:
            b.die(f"cannot read the store the bench packed: {e}")
        th, tw, tc = h["tile"]
        info = {"samples": h["samples"], "splits": dict(h["splits"]), "sheets": h["nsheets"],
                "tile_bytes": th * tw * tc}
        if kept is None:
            b.note("the store has no path table: the tree is read as copied, and a file the packer "
                   "skipped may fail the tree's readers")
            return info
        gone = storefile.prune_tree(tree, kept)
        left = found - len(gone)
        if left != h["samples"]:
            b.note(f"the store holds {h['samples']} samples but its path table names {left} of the "
                   f"{found} files in the tree: the media may read different samples")
        if gone:
            with open(b.path("logs", "left-out.txt"), "w") as f:
                f.write("".join(p.encode("utf-8", "backslashreplace").decode() + "\n" for p in gone))
            b.note(f"{len(gone)} of the {found} files in the tree are not in the store (the packer "
                   f"skipped or ignored them: see logs/pack-tree.log; their names are in "
                   f"logs/left-out.txt): they are left out of the tree on tmpfs and on the disk too, "
                   f"so that every medium reads the store's {h['samples']} samples")
        info["left_out"] = len(gone)
        return info

    def export_fmnist(self, limit):
        b, c, pack = self.b, self.b.cfg, self.b.p.pack
        b.msg(f"1/7 preparing data: packing Fashion-MNIST from {c.fmnist}")
        if not b.run_logged("pack-base", [pack, c.fmnist, f"{b.ssd}/base.sprites"]):
            b.die(f"spritefs-pack failed (see {b.out}/logs/pack-base.log)")
        src, fmt = f"{b.ssd}/base.sprites", "tiff"
        if c.dataset == "large":
            b.msg(f"      large variant: {c.limit} samples per split upscaled to 224x224 RGB, LZW TIFF")
            if not b.run_logged("export-small", [pack, "--export", f"{b.ssd}/small", "--format", "png"]
                                + limit + [src]):
                b.die(f"export failed (see {b.out}/logs/export-small.log)")
            if not b.run_logged("pack-large", [pack, "--tile", "224x224x3", f"{b.ssd}/small",
                                               f"{b.ssd}/large.sprites"]):
                b.die(f"packing 224x224x3 failed (see {b.out}/logs/pack-large.log)")
            shutil.rmtree(f"{b.ssd}/small", ignore_errors=True)
            os.remove(src)
            src, fmt, limit = f"{b.ssd}/large.sprites", "tiff-lzw", []
        b.msg(f"      exporting the {fmt} ImageFolder tree to tmpfs")
        if not b.run_logged("export-tree", [pack, "--export", f"{b.tmpfs}/tree", "--format", fmt]
                            + limit + [src]):
            b.die(f"export failed (see {b.out}/logs/export-tree.log)")
        os.remove(src)
        return fmt

    # ---- 2. ceilings -------------------------------------------------------------
    def fio_read(self, name, path, run=None):
        """Time-based (loops over the file), or with RUN one pass. 1 MiB blocks, or the
        largest power of two the file holds (fio refuses a block larger than the file);
        O_DIRECT wants at least 4 KiB."""
        b = self.b
        how = [] if run else [f"--runtime={2 if b.cfg.quick else 5}", "--time_based"]
        log = f"fio-{name}-{run}" if run else f"fio-{name}"
        size, bs = os.path.getsize(path), core.MIB
        while bs > size and bs > 4096:
            bs //= 2
        if bs > size:
            if not run:
                b.note(f"fio skipped on {path}: {size} bytes, less than one 4 KiB block")
            return
        if bs < core.MIB and not run:
            b.note(f"fio reads {path} in {bs // 1024} KiB blocks: the file ({size} bytes) is smaller than 1 MiB")
        for engine in ("io_uring", "libaio"):
            with open(b.path("logs", log + ".json"), "w") as o, open(b.path("logs", log + ".err"), "w") as e:
                rc = subprocess.run(["fio", f"--name={name}", f"--filename={path}", "--rw=read",
                                     f"--bs={bs}", "--iodepth=16", f"--ioengine={engine}", "--direct=1",
                                     "--readonly"] + how + ["--output-format=json"],
                                    stdout=o, stderr=e).returncode
            if rc == 0:
                b.rec("ceiling", name, engine, run or 0, {"file": f"logs/{log}.json", "bs": bs})
                return
        b.fail(f"fio on {path} (see logs/{log}.err)")

    def ceilings(self):
        b, c = self.b, self.b.cfg
        b.msg("2/7 ceilings: fio O_DIRECT sequential reads on the disk, dd from tmpfs")
        if shutil.which("fio"):
            self.fio_read("fio-store", self.where["ssd_store"])
            # one pass over the store, the same work as a cold spritefs pass (ramp-up included)
            for r in range(1, c.runs + 1):
                self.fio_read("fio-store-pass", self.where["ssd_store"], r)
            mb = 256 if c.quick else 1024
            subprocess.run(["dd", "if=/dev/zero", f"of={b.ssd}/fio.dat", "bs=1M", f"count={mb}",
                            "conv=fsync", "status=none"], check=True)
            self.fio_read("fio-disk", f"{b.ssd}/fio.dat")
            os.remove(f"{b.ssd}/fio.dat")
        else:
            b.note("fio not installed: no disk ceiling (apt-get install fio)")
        mb = 256 if c.quick else 1024
        dd = f"{b.tmpfs}/dd.dat"
        subprocess.run(["dd", "if=/dev/zero", f"of={dd}", "bs=4M", f"count={mb // 4}", "status=none"],
                       check=True)
        for r in range(1, c.runs + 1):
            out = subprocess.run(["dd", f"if={dd}", "of=/dev/null", "bs=4M"], capture_output=True,
                                 text=True, env=dict(os.environ, LC_ALL="C")).stderr
            # "268435456 bytes (268 MB, 256 MiB) copied, 0.047 s, 5.7 GB/s"
            m = re.search(r"^(\d+) bytes.*copied, ([0-9.e+-]+) s", out, re.M)
            if m:
                b.rec("ceiling", "dd-tmpfs", "tmpfs", r, {},
                      {"bytes": int(m.group(1)), "wall_s": float(m.group(2))})
        os.remove(dd)

    # ---- 3. reads -----------------------------------------------------------------
    def readbench(self, kind, medium, state, run, args):
        b = self.b
        out = b.output([b.p.readbench, "--threads", str(b.ncpu)] + args, "readbench.err")
        res = core.parse_json(out) if out is not None else None
        if res is None:
            b.fail(f"spritefs-readbench {kind} on {medium} ({state}): see logs/readbench.err")
        else:
            b.rec(kind, medium, state, run, {}, res)

    def batch_dirs(self, root):
        return sorted(d for d in glob.glob(f"{root}/*/batches") if os.path.isdir(d))

    def reads(self):
        b, c = self.b, self.b.cfg
        b.msg(f"3/7 raw reads (MB/s, files/s) and decoded samples/s, {c.runs} run(s) each")
        for r in range(1, c.runs + 1):
            b.msg(f"      run {r}: TIFF tree and store file on tmpfs / on the disk")
            for kind, medium, state, where, drop, args in READS:
                if drop:
                    b.drop_caches()
                self.readbench(kind, medium, self.state(state), r, self.expand(args) + [self.where[where]])
            if b.have_mount:
                b.msg(f"      run {r}: spritefs over the disk store (cold mount, then warm)")
                self.spritefs_reads(r)

    def spritefs_reads(self, r):
        """SPRITEFS_READS: each entry that asks for a cold mount gets a fresh one."""
        b = self.b
        rows = list(SPRITEFS_READS)
        while rows and b.have_mount:
            block = [rows.pop(0)]
            while rows and not rows[0][0]:
                block.append(rows.pop(0))
            with b.mounted(self.where["ssd_store"], cold=True) as m:
                if m is None:
                    return
                bd = self.batch_dirs(b.mnt)
                if not bd:
                    b.fail("no <split>/batches folders in the spritefs mount")
                    continue
                paths = {"batches": bd, "npys": sorted(glob.glob(f"{b.mnt}/*/images.npy")),
                         "tmpfs_batches": [self.where["tmpfs_batches"]]}
                for _, kind, medium, state, where, args in block:
                    if where == "tmpfs_batches":
                        self.copy_batches(bd)
                    if paths[where]:
                        self.readbench(kind, medium, self.state(state), r, self.expand(args) + paths[where])
                if not rows:
                    rss, hwm = m.memory()
                    b.rec("memory", "spritefs", "after-reads", r, {},
                          {"rss_bytes": rss, "hwm_bytes": hwm, "budget": b.cfg.cache})

    def copy_batches(self, bd):
        """The mount's batch files copied to tmpfs once: the T1 reference."""
        dst = self.where["tmpfs_batches"]
        if os.path.isdir(dst):
            return
        for d in bd:
            split = os.path.basename(os.path.dirname(d))
            os.makedirs(f"{dst}/{split}", exist_ok=True)
            for f in glob.glob(f"{d}/*.sprite"):
                shutil.copyfile(f, f"{dst}/{split}/{os.path.basename(f)}")

    def t2_at_scale(self):
        """T2 at scale: a cold pass over Fashion-MNIST's 36 MB store lasts ~30 ms, much of it
        filling and draining the pipeline. The same tree packed at 56x56 (4x the bytes) shows
        the steady rate; fio reads that store too. Full mode only."""
        b, c = self.b, self.b.cfg
        if not b.have_mount or c.quick or c.dataset == "large" or not shutil.which("fio"):
            return
        b.msg("      T2 at scale: the tree packed at 56x56 (4x the bytes), cold passes vs fio")
        t2 = f"{b.ssd}/store/t2.sprites"
        if not b.run_logged("pack-t2", [b.p.pack, "--tile", "56x56", self.where["tmpfs_tree"], t2]):
            b.fail("packing the tree at 56x56 failed (see logs/pack-t2.log)")
            return
        os.sync()
        from .storefile import header
        b.rec("store", "t2-56x56", "-", 0, {"bytes": os.path.getsize(t2), "sheets": header(t2)["nsheets"]})
        self.fio_read("fio-t2store", t2)
        for r in range(1, c.runs + 1):
            self.fio_read("fio-t2store-pass", t2, r)
            for how in ("direct", "buffered"):
                with b.mounted(t2, cold=True) as m:
                    if m is None:
                        return
                    flags = ["--match", ".sprite"] + (["--direct"] if how == "direct" else [])
                    self.readbench("read", f"spritefs-t2-{how}", b.cold, r, flags + self.batch_dirs(b.mnt))
        os.remove(t2)

    def small_budget(self):
        """T7: resident memory under a cache budget smaller than the data set (eviction at work)."""
        b = self.b
        if not b.have_mount:
            return
        b.msg(f"      spritefs with cache={b.cfg.small_cache} (smaller than the data): two passes, resident memory")
        with b.mounted(self.where["ssd_store"], cache=b.cfg.small_cache) as m:
            if m is None:
                return
            bd = self.batch_dirs(b.mnt)
            self.readbench("read", "spritefs-small-cache", "first", 1, ["--match", ".sprite"] + bd)
            self.readbench("read", "spritefs-small-cache", "second", 1, ["--match", ".sprite"] + bd)
            rss, hwm = m.memory()
            b.rec("memory", "spritefs", "small-budget", 0, {},
                  {"rss_bytes": rss, "hwm_bytes": hwm, "budget": b.cfg.small_cache})

    # ---- 4. PyTorch loader peer ----------------------------------------------------
    def torch_loader(self):
        b, c = self.b, self.b.cfg
        if not c.torch:
            b.note("--no-torch: PyTorch peers skipped")
        elif b.p.torch_loader and core.quiet([core.PY, "-c", "import torch, torchvision"]) == 0:
            self.torch_ok = True
        else:
            b.note("python3-torch / python3-torchvision not installed: PyTorch peers skipped")
        if not self.torch_ok:
            b.msg("4/7 PyTorch input pipeline: skipped")
            return
        b.msg("4/7 PyTorch ImageFolder + DataLoader (2 workers, batch 64) over the TIFF tree")

        def tl(medium, state, run, root):
            cmd = [core.PY, b.p.torch_loader, "--workers", "2", "--batch", "64"] + \
                (["--resize", c.tile] if c.tile else []) + [root]
            res = core.parse_json(b.output(cmd, "torch_loader.err"))
            if res is None:
                b.fail(f"torch_loader.py on {medium} (see logs/torch_loader.err)")
            else:
                b.rec("decode", medium, state, run, {"peer": "torch"}, res)

        for r in range(1, c.runs + 1):
            tl("torch-tiff-tmpfs", "warm", r, f"{self.where['tmpfs_tree']}/train")
            b.drop_caches()
            tl("torch-tiff-ssd", b.cold, r, f"{self.where['ssd_tree']}/train")
            with b.mounted(self.where["ssd_store"]) as m:
                if m is not None and os.path.isdir(f"{b.mnt}/train/by-class"):
                    tl("torch-spritefs-byclass", "warm", r, f"{b.mnt}/train/by-class")

    def gpu(self):
        """GPU: only where hntrain finds one (a short probe run decides)."""
        b = self.b
        if not b.cfg.gpu:
            return
        with open(b.path("logs", "gpu-probe.out"), "w") as o:
            rc = subprocess.run([b.p.hntrain, "--data", self.where["tmpfs_store"], "--model", b.cfg.model,
                                 "--epochs", "1", "--limit", "256", "--device", "gpu"],
                                stdout=o, stderr=subprocess.STDOUT).returncode
        if rc != 0:
            last = (core.read_text(b.path("logs", "gpu-probe.out")).strip().splitlines() or [""])[-1]
            b.note(f"no GPU run: hntrain --device gpu did not start here ({last})")
            return
        b.msg("      GPU: the same job on tmpfs, disk, spritefs, and preloaded")
        self.train_all("gpu", [])
        if self.has_opt("--preload"):
            # T8b and T8c: preloaded, fp32 against --amp at batch 64 and 512
            b.msg("      GPU: fp32 and --amp at batch 64 and 512, preloaded")
            for bs in (64, 512):
                for prec in ("fp32", "amp"):
                    extra = ["--preload", "--batch", str(bs)] + (["--amp"] if prec == "amp" else [])
                    self.hntrain(f"gpux-b{bs}-{prec}", "preload", "warm", "gpu", self.where["tmpfs_store"], extra)
            self.gpu_peer = True

    # ---- 5. training -------------------------------------------------------------------
    def hntrain(self, name, medium, state, dev, data, extra, prefix=(), args=None):
        b = self.b
        log = f"logs/train-{name}.jsonl"
        if os.path.exists(b.path(log)):
            os.remove(b.path(log))
        cmd = list(prefix) + [b.p.hntrain, "--data", data] + (args or self.train_args) + \
            ["--device", dev, "--log", b.path(log)] + extra
        with open(b.path("logs", f"train-{name}.out"), "w") as o:
            rc = subprocess.run(cmd, stdout=o, stderr=subprocess.STDOUT).returncode
        if rc == 0:
            b.rec("train", medium, state, 0, {"name": name, "device": dev, "log": log,
                                              "args": " ".join(extra)})
        else:
            b.fail(f"hntrain {name} (see logs/train-{name}.out)")
        return rc == 0

    def train_all(self, dev, base):
        """TRAIN on device DEV: the same job on every medium."""
        b = self.b
        for name, medium, state, where, extra in TRAIN:
            extra = self.expand(extra)
            if "--preload" in extra and not self.has_opt("--preload"):
                continue
            if state == "cold":
                b.drop_caches()
            if where != "mount":
                self.hntrain(f"{dev}-{name}", medium, self.state(state), dev, self.where[where], base + extra)
                continue
            with b.mounted(self.where["ssd_store"], cold=True) as m:
                if m is None:
                    continue
                self.hntrain(f"{dev}-{name}", medium, b.cold, dev, b.mnt, base + extra)
                if dev == "cpu":
                    rss, hwm = m.memory()
                    b.rec("memory", "spritefs", "after-train", 0, {},
                          {"rss_bytes": rss, "hwm_bytes": hwm, "budget": b.cfg.cache})
                    try:
                        shutil.copyfile(f"{b.mnt}/.spritefs/stats.json", b.path("spritefs-stats.json"))
                    except OSError:
                        pass

    def training(self):
        b, c = self.b, self.b.cfg
        if not b.p.hntrain:
            b.note("hntrain not found: training runs skipped")
            return
        if c.train_limit:
            b.note(f"training uses the first {c.train_limit} samples of a store packed in class order: "
                   "read its times and weights hashes, not its accuracy")
        b.msg(f"5/7 hntrain {c.model}, {c.epochs} epoch(s), batch 64, seed 1, {b.ncpu} threads, "
              "on every medium (CPU)")
        self.train_all("cpu", ["--threads", str(b.ncpu)])
        self.gpu()
        from . import sweeps
        sweeps.run(self)


def common_ext(tree):
    """The commonest file extension in TREE, lower case ("" for none)."""
    exts = {}
    for _, _, files in os.walk(tree):
        for f in files:
            m = re.search(r"\.([A-Za-z0-9]*)$", f)
            if m:
                exts[m.group(1).lower()] = exts.get(m.group(1).lower(), 0) + 1
    return max(exts, key=exts.get) if exts else ""


def run(b):
    r = Run(b)
    r.prepare()
    r.ceilings()
    r.reads()
    r.t2_at_scale()
    r.small_budget()
    r.torch_loader()
    r.training()
    from . import report, cli
    b.msg("7/7 report: results.json, tables, plots")
    rc = report.main(b.out)
    if rc not in (0, 3):
        b.die("report failed")
    return cli.finish(b, rc, f"the media gave different results (see MISMATCH above and {b.out}/report.md)")
