"""cli.py - spritefs-bench's command line: options, environment, subcommands.

Every option and environment variable is checked before anything is
prepared, so that a mistake costs only its one-line message (exit status 2).
Then the programs are found, the model is checked by hntrain --plan, the
output folder is made and the scenario runs; the workspace is cleaned up on
every way out (SIGTERM and SIGINT become SystemExit, so `finally` and the
`with mounted(...)` blocks run).
"""
import argparse
import os
import re
import shlex
import signal
import subprocess
import sys
import types

from . import core

USAGE = """\
usage: spritefs-bench [--quick] [--out DIR]
                      [--dataset fashion-mnist|large|larger|photos|accelerators|review|accuracy|pytorch]
                      [--data PATH [--tile HxW[xC]]] [--profile P] [--keep]
                      [--no-torch] [--no-gpu] [--runs N] [--model M] [--epochs E] [--limit N] [--amp P]
       spritefs-bench larger [OPTIONS]    the same as --dataset larger
       spritefs-bench accelerators [OPTIONS]  the same as --dataset accelerators
       spritefs-bench review [OPTIONS]    the same as --dataset review
       spritefs-bench accuracy [OPTIONS]  the same as --dataset accuracy
       spritefs-bench pytorch [OPTIONS]   the same as --dataset pytorch
       spritefs-bench demo                mount Fashion-MNIST, train through it, compare
       spritefs-bench report DIR          results.json, report.md and plots of a run again
  --quick      small subsets, one short epoch: a few minutes on 2 cores
  --out DIR    where results.json, the plots and the logs go (default ./spritefs-bench-<date>)
  --dataset    fashion-mnist (28x28 gray, 70k small TIFF files) or large (224x224 RGB LZW TIFF,
               Fashion-MNIST upscaled: the regime where decode and I/O dominate), or larger
               (Fashion-MNIST packed at 224x224x1, several times -o cache: read amplification,
               a cold epoch against the disk and decode bound, hntrain against --preload, and
               a sweep of the cache budget; model mlp and 1 epoch unless given), or photos
               (3,000 seeded photo-like JPEGs of 200-640 px, 600 with --quick, by
               bench/mkphotos.py, packed at 64x64x3 with the crop fit: the packing rate, and
               the PyTorch loader with Resize+CenterCrop as the peer), or accelerators (how
               many emulated accelerators each medium keeps at AU >= 90%: hntrain --emulate
               over spritefs cold and warm, the store on the disk and on tmpfs, and PyTorch
               decoding the JPEGs; 16,000 photos with ImageNet's shapes, 800 with --quick,
               packed at 224x224x3, the store at least 4x the spritefs budget), or review
               (the experiment of the review "Accelerating Neural Network Training": a residual
               preset trained by hntrain and by PyTorch from one spritefs mount of Fashion-MNIST,
               gradient accumulation, mixed precision and pinned memory each off and on, alone
               and together; time per epoch, samples/s, test accuracy and what they support;
               model resnet18 (resnet-fm with --quick), --limit 2048 training and 1,000 test
               images (quick: 256 and 256), batch 64 on the CPU, 128 on a GPU), or accuracy
               (the test accuracy hntrain reaches on Fashion-MNIST through a mount, with
               --augment flip, against 94% within 15 epochs; model resnet-fm, 15 epochs, all
               60,000 training images unless given; --quick: 1 epoch of 1,024, 1,000 tested), or
               pytorch (T13: torchvision resnet18 trained on the CPU at 64x64x3, fed by the
               spritefs reader, spritefs.torch.EpochDataset over a mount, and by ImageFolder
               with Resize+CenterCrop over the same JPEGs, 2 DataLoader workers each, the same
               batch, threads, model and optimizer: samples/s and their ratio against 5x, each
               sample once per epoch; 1,000 camera-sized JPEGs of 2-12 megapixels written by
               mkphotos.py --sizes camera, batch 64; --quick: 60 JPEGs, batch 16; model
               resnet18 only, 1 epoch unless given; on 2 cores the reader gave 7.5x
               ImageFolder's samples/s, 3.2x beside another PyTorch job: docs/RESULTS.md)
  --data PATH  your own data instead: an ImageFolder tree (train/<class>/..., test/) or a
               store file; copied to tmpfs and the disk, packed like the others, and the
               files the packer skips left out of the copies (DIR/logs/left-out.txt), so
               every medium reads the store's samples; with --dataset accelerators a photo
               folder (train/<class>/...), read in place; with --dataset pytorch the same
  --tile T     the tile --data is packed into (HxW or HxWxC, crop fit): needed when its
               images differ in size; photos use 64x64x3
  --profile P  the accelerator of --dataset accelerators: resnet50-h100 (default: batch 400,
               0.224 s per batch), resnet50-a100 (400, 0.435 s) or BATCH:SECONDS
  --keep       keep the prepared data (under /dev/shm and the disk folder) and print where
  --no-torch   skip the PyTorch peers
  --no-gpu     skip GPU runs even where hntrain finds a GPU
  --runs N     repeats of each cheap measurement, medians reported, 1-1000 (default 3, quick 1)
  --model M    model for the training runs: cnn, mlp, lenet5 or an hntrain spec such as
               c32k3-r-m2-d128-r (default cnn; checked with hntrain --plan before anything runs;
               the PyTorch training peer builds the first three only)
  --epochs E   epochs per training run, 1-1000 (default 2, quick 1)
  --limit N    samples per split, 0 = all (default: all; quick 3000, large 2000 / quick 400,
               larger all / quick 3000)
  --amp P      accuracy on a GPU: train in mixed precision, fp16 or bf16 (hntrain --amp=P);
               the CPU computes in fp32 whatever this says
Options take their value as the next argument or after '=' (--runs=5).

Needs root for mounting and for dropping the page cache (cold runs); without root the page cache
is not dropped, and spritefs is mounted through fusermount3 where this user may read and write
/dev/fuse, else skipped; what is skipped is said and the rest runs. CPU runs use the CPUs this
process may run on (taskset, cgroup cpuset); the cores sweep pins to the first N of them.
Data is prepared in /dev/shm/spritefs-bench.PID and DISK/spritefs-bench.PID, removed at exit;
such folders left by a bench that was killed (its PID gone) are unmounted and removed at start,
except those kept with --keep.

environment:
  SPRITEFS_BENCH_DISK=DIR         the disk folder (default /var/tmp; must be on a disk, not tmpfs)
  SPRITEFS_BENCH_CACHE=SIZE       spritefs cache budget for the runs (default 512M, at least 1M;
                                  larger --quick: 32M; accelerators: a quarter of the store)
  SPRITEFS_BENCH_SMALL_CACHE=SIZE the budget of the smaller-than-the-data run (default 16M)
  SPRITEFS_FMNIST=DIR             Fashion-MNIST IDX files (default /usr/share/datasets/fashion-mnist)
  SPRITEFS_BUILD=DIR              take the programs from this meson build folder
  SPRITEFS, SPRITEFS_PACK, HNTRAIN, SPRITEFS_READBENCH
                                  take that program from this path
  (programs not named so are found beside this script, then on PATH)
  demo: DEMO_EPOCHS=N (default 2), DEMO_SKIP_BENCH=1, DEMO_OUT=DIR (the bench's output)

exit status: 0 every measurement ran and every medium gave the same samples and weights;
1 a measurement failed, or a program or the data set is missing; 2 usage (a bad option or
environment variable); 3 the media disagreed (WEIGHTS MISMATCH, or different decoded samples),
which outweighs 1. The report and results.json are written in every case but 2.
Output: a Markdown table on stdout, DIR/results.json, DIR/report.md, DIR/*.png (gnuplot; left
out with a note where gnuplot is not installed). Progress lines go to stderr.
A target whose deciding run is too short to measure the medium (a spritefs-readbench run under
10 ms, a PyTorch or training run under 2 s; T7: data that fits the cache budget; T2: a store
of fewer than 36 sheets, four read-ahead windows) reads
"too small to measure", not pass or miss (spritefs-bench(1), "Targets too small to measure").
"""

# the plots each scenario may draw (review and accuracy draw none)
PLOTS = {"larger": ("larger.png",), "accelerators": ("accel_au.png", "accel_speed.png")}
PLOTS.update({d: ("throughput.png", "epoch_split.png") for d in ("fashion-mnist", "large", "photos", "data")})
DATASETS = ("fashion-mnist", "large", "larger", "photos", "accelerators", "review", "accuracy", "pytorch")
# the programs, and the variables that name them
PROGRAMS = (("spritefs", "spritefs", "SPRITEFS"), ("pack", "spritefs-pack", "SPRITEFS_PACK"),
            ("hntrain", "hntrain", "HNTRAIN"), ("readbench", "spritefs-readbench", "SPRITEFS_READBENCH"))


def usage_error(text):
    """One line naming the option, exit status 2."""
    print(f"spritefs-bench: {text} (see spritefs-bench --help)", file=sys.stderr)
    raise SystemExit(2)


class Parser(argparse.ArgumentParser):
    """argparse, with its complaints said the bench's way (one line, exit 2)."""

    def error(self, message):
        m = re.match(r"argument (\S+?)(?:/\S+)?: expected one argument", message)
        if m:
            usage_error(f"{m.group(1)} needs a value")
        m = re.match(r"argument (\S+?)(?:/\S+)?: ignored explicit argument", message)
        if m:
            usage_error(f"{m.group(1)} takes no value")
        m = re.match(r"unrecognized arguments: (\S+)", message)
        if m:
            usage_error(f"unknown argument '{m.group(1)}'")
        usage_error(message)


def parser():
    p = Parser(prog="spritefs-bench", add_help=False, allow_abbrev=False)
    for o in ("--out", "--dataset", "--data", "--tile", "--runs", "--model", "--epochs", "--limit", "--profile",
              "--amp"):
        p.add_argument(o)
    for o in ("--quick", "--keep", "--no-torch", "--no-gpu"):
        p.add_argument(o, action="store_true")
    p.add_argument("-h", "--help", action="store_true")
    return p


def whole(opt, v, lo, hi):
    """V must be a decimal number in LO..HI; leading zeros dropped."""
    if not re.fullmatch(r"[0-9]{1,9}", str(v)) or not lo <= int(v) <= hi:
        usage_error(f"{opt} {v}: expected a whole number from {lo} to {hi}")
    return int(v)


def size_ok(name, v):
    """A size spritefs takes (512M, 1.5G, 4096), at least 1 MiB."""
    m = re.fullmatch(r"([0-9]+(?:\.[0-9]+)?)([KMGTkmgt]?)", v)
    if not m:
        usage_error(f"{name}={v}: expected a size such as 512M or 2G")
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}.get(m.group(2).upper(), 1)
    if float(m.group(1)) * mult < 1 << 20:
        usage_error(f"{name}={v}: at least 1M")
    return v


def check_options(a):
    """The parsed options, checked and completed with their defaults."""
    for o in ("out", "dataset", "data", "tile", "runs", "model", "epochs", "limit", "profile", "amp"):
        if getattr(a, o) == "":
            usage_error(f"--{o} needs a value")
    c = types.SimpleNamespace(quick=a.quick, keep=a.keep, torch=not a.no_torch, gpu=not a.no_gpu,
                              out=a.out, data=a.data, tile=a.tile or "")
    c.dataset = a.dataset or "fashion-mnist"
    if c.dataset not in DATASETS:
        usage_error(f"--dataset {c.dataset}: expected fashion-mnist, large, larger, photos, accelerators, "
                    "review, accuracy or pytorch")
    check_accel(a, c)
    check_review(a, c)
    check_pytorch(a, c)
    c.amp = a.amp or ""
    if c.amp and c.amp not in ("fp16", "bf16"):
        usage_error(f"--amp {c.amp}: expected fp16 or bf16")
    if c.amp and c.dataset != "accuracy":
        usage_error("--amp goes with --dataset accuracy (the review scenario runs both precisions itself)")
    if c.data and c.dataset in ("accelerators", "pytorch"):
        pass
    elif c.data:
        if c.dataset != "fashion-mnist":
            usage_error(f"--data and --dataset {c.dataset}: give one of them")
        if not os.path.isdir(c.data) and not os.path.isfile(c.data):
            usage_error(f"--data {c.data}: no such folder or store file")
        if os.path.isdir(c.data) and not os.path.isdir(os.path.join(c.data, "train")):
            usage_error(f"--data {c.data}: an ImageFolder tree needs a train/ folder (train/<class>/<image>)")
        c.data = os.path.realpath(c.data)
        c.dataset = "data"
    if c.tile and not re.fullmatch(r"[1-9][0-9]{0,3}x[1-9][0-9]{0,3}(x[1-4])?", c.tile):
        usage_error(f"--tile {c.tile}: expected HxW or HxWxC, such as 64x64x3")
    if c.tile and c.dataset not in ("data", "photos"):
        usage_error("--tile goes with --data or --dataset photos")
    if c.dataset == "photos" and not c.tile:
        c.tile = "64x64x3"
    c.photos = 600 if c.quick else 3000
    # larger: 224x224 tiles of the whole data set, where one mlp epoch is already long
    larger = c.dataset == "larger"
    c.runs = whole("--runs", a.runs if a.runs is not None else (1 if c.quick else 3), 1, 1000)
    c.epochs = whole("--epochs", a.epochs if a.epochs is not None else
                     (1 if larger or c.quick else 2), 1, 1000)
    c.model = a.model if a.model is not None else ("mlp" if larger else "cnn")
    if a.limit is None:
        lim = (400 if c.quick else 2000) if c.dataset == "large" else (3000 if c.quick else 0)
    else:
        lim = a.limit
    c.limit = whole("--limit", lim, 0, 999999999)
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9-]*", c.model):
        usage_error(f"--model {c.model}: expected cnn, mlp, lenet5, cnn-bn or a spec such as c32k3-r-m2-d128-r")
    # Training on 224x224x3 tiles is slow on 2 cores: fewer samples there.
    c.train_limit = (128 if c.quick else 512) if c.dataset == "large" else 0
    return c


def check_review(a, c):
    """The model and sizes of --dataset review: a residual preset PyTorch builds too."""
    from .review import MODELS
    if c.dataset == "accuracy":
        if c.data:
            usage_error("--data and --dataset accuracy: the target is Fashion-MNIST's (SPRITEFS_FMNIST)")
        a.model = a.model if a.model is not None else "resnet-fm"
        a.epochs = a.epochs if a.epochs is not None else (1 if c.quick else 15)
        a.limit = a.limit if a.limit is not None else (1024 if c.quick else 0)
    if c.dataset != "review":
        return
    if c.data:
        usage_error("--data and --dataset review: the review trains on Fashion-MNIST (SPRITEFS_FMNIST)")
    if a.model is None:
        a.model = "resnet-fm" if c.quick else "resnet18"
    if a.model not in MODELS:
        usage_error(f"--model {a.model}: --dataset review takes a residual preset: {', '.join(MODELS)}")
    if a.limit is None:
        a.limit = 256 if c.quick else 2048
    c.review_test = 256 if c.quick else 1000


def check_pytorch(a, c):
    """--dataset pytorch: resnet18 only, the PyTorch runs are the scenario, --data a photo folder."""
    if c.dataset != "pytorch":
        return
    if a.model is not None and a.model != "resnet18":
        usage_error(f"--model {a.model}: --dataset pytorch trains torchvision's resnet18 only")
    if a.no_torch:
        usage_error("--no-torch and --dataset pytorch: the PyTorch runs are what it measures")
    if c.data and not os.path.isdir(os.path.join(c.data, "train")):
        usage_error(f"--data {c.data}: --dataset pytorch needs a photo folder with a train/ folder "
                    "(train/<class>/<image>)")
    if c.data:
        c.data = os.path.realpath(c.data)
    a.model, a.limit = "resnet18", 0
    a.epochs = a.epochs if a.epochs is not None else 1
    c.photos_feed = 60 if c.quick else 1000


def check_accel(a, c):
    """--profile and --data of --dataset accelerators; its sizes."""
    from .accel import parse_profile
    if a.profile is not None and c.dataset != "accelerators":
        usage_error("--profile goes with --dataset accelerators")
    c.profile = a.profile or "resnet50-h100"
    if c.dataset != "accelerators":
        return
    if parse_profile(c.profile) is None:
        usage_error(f"--profile {c.profile}: expected resnet50-h100, resnet50-a100 or BATCH:SECONDS "
                    "(a batch of 1 to 65536, seconds above 0 and at most 3600)")
    if c.data:
        if not os.path.isdir(os.path.join(c.data, "train")):
            usage_error(f"--data {c.data}: --dataset accelerators needs a photo folder with a train/ "
                        "folder (train/<class>/<image>)")
        c.data = os.path.realpath(c.data)
    c.photos_accel = 800 if c.quick else 16000
    c.max_accel = 4 if c.quick else 64


def check_environment(c):
    env = os.environ.get
    c.disk = env("SPRITEFS_BENCH_DISK") or "/var/tmp"
    if not os.path.isdir(c.disk) or not os.access(c.disk, os.W_OK):
        usage_error(f"SPRITEFS_BENCH_DISK={c.disk}: not a folder this user can write to")
    c.cache = env("SPRITEFS_BENCH_CACHE") or ("32M" if c.dataset == "larger" and c.quick else "512M")
    c.small_cache = env("SPRITEFS_BENCH_SMALL_CACHE") or "16M"
    size_ok("SPRITEFS_BENCH_CACHE", c.cache)
    size_ok("SPRITEFS_BENCH_SMALL_CACHE", c.small_cache)
    build = env("SPRITEFS_BUILD")
    if build and not os.path.isdir(build):
        usage_error(f"SPRITEFS_BUILD={build}: not a folder")
    for _, _, var in PROGRAMS:
        v = env(var)
        if v and not (os.path.isfile(v) and os.access(v, os.X_OK)):
            usage_error(f"{var}={v}: not an executable file")
    c.fmnist = env("SPRITEFS_FMNIST") or "/usr/share/datasets/fashion-mnist"
    c.accel_cache = env("SPRITEFS_BENCH_CACHE") if c.dataset == "accelerators" else None


def find_programs(here):
    p = types.SimpleNamespace(here=here)
    for attr, name, var in PROGRAMS:
        setattr(p, attr, core.find_bin(here, name, var))
    for attr, name in (("torch_loader", "torch_loader.py"), ("torch_train", "torch_train.py"),
                       ("mkphotos", "mkphotos.py"), ("torch_review", "torch_review.py"),
                       ("torch_feed", "torch_feed.py")):
        setattr(p, attr, core.find_share(here, name))
    return p


def check_model(c, p):
    """The model, checked by hntrain on Fashion-MNIST's shape at the cost of reading a few
    samples, so that a bad one stops the bench here rather than every training run at the end."""
    if not p.hntrain:
        return
    r = subprocess.run([p.hntrain, "--plan", "--data", c.fmnist, "--model", c.model,
                        "--limit", "64", "--test-limit", "64"], capture_output=True, text=True)
    if r.returncode != 0:
        why = next((l for l in (r.stdout + r.stderr).splitlines() if "--model" in l), "")
        if why:
            usage_error(why.removeprefix("hntrain: "))


def on_signal(signum, _frame):
    raise SystemExit(130 if signum == signal.SIGINT else 143)


def main(here, argv):
    if argv and argv[0] == "demo":
        from . import demo
        return demo.main(here, argv[1:])
    if argv and argv[0] == "report":
        if len(argv) != 2 or not os.path.isdir(argv[1]):
            usage_error("report needs the output folder of a run: spritefs-bench report DIR")
        from . import report
        return report.main(argv[1])
    command = " ".join(["spritefs-bench"] + [shlex.quote(x) for x in argv])
    if argv and argv[0] in ("larger", "accelerators", "review", "accuracy", "pytorch"):
        argv = ["--dataset", argv[0]] + argv[1:]
    a = parser().parse_args(argv)
    if a.help:
        sys.stdout.write(USAGE)
        return 0
    c = check_options(a)
    c.command = command
    check_environment(c)
    p = find_programs(here)
    for attr, name in (("pack", "spritefs-pack"), ("readbench", "spritefs-readbench")):
        if not getattr(p, attr):
            print(f"spritefs-bench: cannot find {name} (install the project, or set SPRITEFS_BUILD)",
                  file=sys.stderr)
            return 1
    if not os.access(core.PY, os.X_OK):
        print(f"spritefs-bench: needs Debian's {core.PY} for the PyTorch peers and data", file=sys.stderr)
        return 1
    if not os.path.isdir(c.fmnist):
        print(f"spritefs-bench: {c.fmnist} not found (Debian package dataset-fashion-mnist, "
              "or set SPRITEFS_FMNIST)", file=sys.stderr)
        return 1
    check_model(c, p)
    if not c.out:
        import time
        c.out = "./spritefs-bench-" + time.strftime("%Y%m%d-%H%M%S")
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    b = core.Bench(c, p)
    b.open_out()
    try:
        return run(b)
    finally:
        b.cleanup()


def run(b):
    """The output folder is made: from here on the run is recorded."""
    from . import accel, accuracy, larger, pytorch, review, standard
    if not b.root:
        b.note("not root: the page cache cannot be dropped, so 'cold' runs read whatever is cached "
               "(state 'nodrop'); mounting is tried with fusermount3")
    b.remove_stale()
    for d in (b.tmpfs, b.ssd, b.mnt):
        os.makedirs(d, exist_ok=True)
    if core.cmd_out(["stat", "-f", "-c", "%T", b.ssd]).strip() == "tmpfs":
        b.note(f"{b.ssd} is on tmpfs, not a disk: set SPRITEFS_BENCH_DISK to a folder on the disk")
    torchv = ""
    if b.cfg.torch:
        torchv = core.cmd_out([core.PY, "-c", "import torch; print(torch.__version__)"]).strip()
    core.write_json(b.path("machine.json"), core.machine_info(b, torchv))
    c = b.cfg
    each = f"profile {c.profile}" if c.dataset == "accelerators" else f"{c.runs} run(s) each"
    b.msg(f"spritefs-bench: {c.dataset}, {'quick' if c.quick else 'full'} mode, {each}, output in {b.out}")
    if not core.shutil.which("gnuplot") and c.dataset in PLOTS:
        b.note(f"gnuplot not installed: the plots ({', '.join(PLOTS[c.dataset])}) will be skipped; "
               "the tables and results.json are written (apt-get install gnuplot-nox)")
    check_fuse(b)
    if c.dataset == "larger":
        return larger.run(b)
    if c.dataset == "accelerators":
        return accel.run(b)
    if c.dataset == "review":
        return review.run(b)
    if c.dataset == "accuracy":
        return accuracy.run(b)
    if c.dataset == "pytorch":
        return pytorch.run(b)
    return standard.run(b)


def check_fuse(b):
    if not b.have_mount:
        b.note("spritefs not found: the spritefs medium is skipped")
    elif not os.path.exists("/dev/fuse"):
        b.have_mount = False
        b.note("no /dev/fuse: the spritefs medium is skipped")
    elif not os.access("/dev/fuse", os.R_OK | os.W_OK):
        # libfuse opens /dev/fuse itself before it asks fusermount3 to mount
        b.have_mount = False
        import pwd
        user = pwd.getpwuid(os.geteuid()).pw_name
        b.note(f"this user ({user}) may not read and write /dev/fuse: the spritefs medium is "
               "skipped (run as root, or give the user access to /dev/fuse)")


def written_pngs(b):
    """The plots this run drew: PNG files in the output folder written since it started (a
    scenario draws none, or only those with data; an older run's in the same folder are not
    this run's)."""
    names = []
    for f in sorted(os.listdir(b.out)):
        try:
            if f.endswith(".png") and os.path.getmtime(os.path.join(b.out, f)) >= b.started:
                names.append(f)
        except OSError:
            pass
    return names


def finish(b, rc_report, mismatch_text):
    """The exit status after the report: 3 a mismatch (outweighs 1), 1 a failure, else 0."""
    pngs = "".join(f", {b.out}/{f}" for f in written_pngs(b))
    b.msg(f"done in {int(__import__('time').monotonic() - b.t0)} s: {b.out}/results.json, "
          f"{b.out}/report.md{pngs}")
    if rc_report == 3:
        print("spritefs-bench: " + mismatch_text, file=sys.stderr)
        if b.failed:
            print(f"spritefs-bench: some measurements failed too (see the notes above and {b.out}/logs)",
                  file=sys.stderr)
        return 3
    if b.failed:
        print(f"spritefs-bench: some measurements failed (see the notes above and {b.out}/logs)",
              file=sys.stderr)
        return 1
    return 0
