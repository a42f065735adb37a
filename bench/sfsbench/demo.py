"""demo.py - `spritefs-bench demo`, what `./run demo` shows once the project
is built and installed:

  1. spritefs mounts the default data set (Fashion-MNIST from Debian's
     dataset-fashion-mnist, packed into a cache store on first use);
  2. a look at the mount: dataset.json, the files a trainer sees;
  3. hntrain trains the CNN through the mount, reporting compute time and
     data-wait time apart;
  4. spritefs-bench --quick runs the same job over tmpfs, the disk and
     spritefs and prints the comparison table.

The mount is undone on every way out (the `with` block). Environment:
DEMO_EPOCHS=N (default 2), DEMO_SKIP_BENCH=1, DEMO_OUT=DIR (the bench's output).
"""
import contextlib
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from . import core


def pick(here, name):
    """$SPRITEFS_BUILD's program (a test's build), else the installed one, else
    the source tree's build/."""
    p = core.find_bin(here, name, "DEMO_" + name.upper()) if os.environ.get("SPRITEFS_BUILD") else ""
    p = p or shutil.which(name)
    if not p:
        root = os.path.dirname(here)
        p = next((x for x in sorted(glob.glob(f"{root}/build/*/{name}") + glob.glob(f"{root}/build/{name}"))
                  if os.access(x, os.X_OK)), None)
    if not p:
        print(f"demo: {name} not found (run ./run build first)", file=sys.stderr)
        raise SystemExit(1)
    return p


def say(text):
    print(f"\n\033[1m== {text}\033[0m", flush=True)


def show(cmd):
    print("$ " + cmd, flush=True)


@contextlib.contextmanager
def mounted(spritefs, mnt):
    """The default data set mounted on MNT (the first mount packs it: up to 60 s);
    unmounted on every way out."""
    proc = subprocess.Popen([spritefs, "-f", "-o", "cache=512M", mnt])
    m = core.Mount(proc, mnt)
    try:
        for _ in range(600):
            if os.path.ismount(mnt) and os.access(os.path.join(mnt, "dataset.json"), os.R_OK):
                break
            if proc.poll() is not None:
                print("demo: spritefs exited", file=sys.stderr)
                raise SystemExit(1)
            time.sleep(0.1)
        else:
            print("demo: spritefs did not mount within 60 s", file=sys.stderr)
            raise SystemExit(1)
        yield m
    finally:
        m.unmount()


def epoch_table(log):
    rows = []
    with open(log) as f:
        rows = [json.loads(l) for l in f if l.strip()]
    print("\nepoch | samples/s | compute s | data wait s | wait share | test acc")
    for r in rows:
        if r.get("final"):
            print("final weights xxh3:", r.get("weights_xxh3"))
            continue
        share = r["data_wait_s"] / r["wall_s"] if r.get("wall_s") else 0
        print(f"{r['epoch']:>5} | {r['samples_per_s']:>9.0f} | {r['compute_s']:>9.2f} | "
              f"{r['data_wait_s']:>11.3f} | {100 * share:>9.2f}% | {100 * r['test_acc']:.2f}%")


def look(mnt):
    show(f"cat {mnt}/dataset.json")
    with open(f"{mnt}/dataset.json") as f:
        print(f.read(), flush=True)
    show(f"ls {mnt} {mnt}/train")
    subprocess.run(["ls", mnt, f"{mnt}/train"])
    show(f"ls {mnt}/train/batches | head -3; ls {mnt}/train/by-class")
    print("\n".join(sorted(os.listdir(f"{mnt}/train/batches"))[:3]), flush=True)
    subprocess.run(["ls", f"{mnt}/train/by-class"])
    if core.quiet([core.PY, "-c", "import numpy"]) == 0:
        show(f"python3 -c \"np.load('{mnt}/train/images.npy', mmap_mode='r')\"")
        subprocess.run([core.PY, "-c", "import numpy as np, sys; m = sys.argv[1]; "
                        "a = np.load(m + '/train/images.npy', mmap_mode='r'); l = np.load(m + '/train/labels.npy'); "
                        "print('images', a.shape, a.dtype, 'labels', l.shape, 'mean pixel', float(a[:1000].mean()))",
                        mnt])


def main(here, argv):
    if argv:
        print("usage: spritefs-bench demo   (DEMO_EPOCHS=N, DEMO_SKIP_BENCH=1, DEMO_OUT=DIR)", file=sys.stderr)
        return 2
    spritefs, hntrain = pick(here, "spritefs"), pick(here, "hntrain")
    bench = shutil.which("spritefs-bench") or os.path.join(here, "spritefs-bench")
    epochs = os.environ.get("DEMO_EPOCHS") or "2"
    ncpu = min(len(core.cpus_allowed()), 64)  # hntrain's CPU backend runs at most 64 threads
    if not os.path.exists("/dev/fuse"):
        print("demo: /dev/fuse is missing: FUSE cannot mount here", file=sys.stderr)
        return 1
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    mnt = tempfile.mkdtemp(prefix="spritefs-demo.", dir="/tmp")
    fd, log = tempfile.mkstemp(prefix="spritefs-demo-log.", dir="/tmp")
    os.close(fd)
    try:
        say(f"1. spritefs: mounting the default data set (Fashion-MNIST) on {mnt}")
        show(f"spritefs -f -o cache=512M {mnt} &")
        with mounted(spritefs, mnt):
            say("2. what a trainer sees")
            look(mnt)
            say(f"3. hntrain: the CNN, {epochs} epoch(s), batch 64, {ncpu} threads, fed by spritefs")
            show(f"hntrain --data {mnt} --model cnn --epochs {epochs} --batch 64 --threads {ncpu} --log LOG")
            r = subprocess.run([hntrain, "--data", mnt, "--model", "cnn", "--epochs", epochs, "--batch", "64",
                                "--threads", str(ncpu), "--log", log])
            if r.returncode != 0:
                return r.returncode
            epoch_table(log)
            # stats.json is one page padded with spaces (docs/FORMAT.md): shown without the padding
            show(f"sed 's/ *$//' {mnt}/.spritefs/stats.json")
            text = core.read_text(f"{mnt}/.spritefs/stats.json")
            print("\n".join(l.rstrip() for l in text.splitlines()[:40]))
            show(f"fusermount3 -u {mnt}")
        if not os.environ.get("DEMO_SKIP_BENCH"):
            out = os.environ.get("DEMO_OUT") or tempfile.mkdtemp(prefix="spritefs-bench-demo.", dir="/tmp")
            say("4. spritefs-bench --quick: the same job over tmpfs, the disk and spritefs")
            show(f"spritefs-bench --quick --out {out}")
            rc = subprocess.run([bench, "--quick", "--out", out]).returncode
            pngs = [f"{out}/{f}" for f in ("throughput.png", "epoch_split.png") if os.path.isfile(f"{out}/{f}")]
            print(f"\nresults: {out}/results.json" + (", plots: " + " ".join(pngs) if pngs else ", no plots"))
            return rc
        return 0
    except KeyboardInterrupt:
        return 130
    finally:
        with contextlib.suppress(OSError):
            os.rmdir(mnt)
        with contextlib.suppress(OSError):
            os.remove(log)
