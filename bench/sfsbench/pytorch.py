"""pytorch.py - `spritefs-bench pytorch` (or --dataset pytorch): issue 30's
target T13, a PyTorch training loop fed by the spritefs reader against the
same loop fed by torchvision's ImageFolder.

The data is a photo folder read in place: --data DIR (train/<class>/...), or
camera-sized JPEGs (2-12 megapixels, seeded) written by mkphotos.py --sizes
camera, the regime of the photos users have: there decoding and resizing a
file costs more than a training step of resnet18 on a 64x64 tile, which on a
few cores is compute-bound at some tens to a few hundred samples/s. (On
small photos, as --dataset photos makes, ImageFolder keeps up better: the
decode is cheap.) The folder is packed at 64x64x3 with the crop fit into a
store on the disk and mounted with -o batch=B; then torch_feed.py trains
torchvision's resnet18 on the CPU from

  spritefs-reader  spritefs.torch.EpochDataset over the mount, DataLoader
                   with 2 workers (the package from the source tree when the
                   bench runs from it)
  imagefolder      torchvision.datasets.ImageFolder over the folder's train/
                   (the files the store holds), Resize + CenterCrop to 64x64
                   (the packer's crop fit), DataLoader with 2 workers

with the same batch, torch threads, model, initial weights and optimizer,
alternating, --runs times. Each run checks that every sample of the split
came exactly once per epoch (the indices counted) and records its steady
samples/s (after each epoch's first step) and its whole-epoch samples/s.
T13: the reader's median samples/s over ImageFolder's, against 5x, and
exactly once per epoch. The report (table, results.json) is made here too.
"""
import json
import os
import subprocess

from . import core
from .rutil import command_line, fmt, fmt_ratio, load_json, med, ratio

TILE = "64x64x3"
FEEDS = ("spritefs-reader", "imagefolder")
FEED_TEXT = {"spritefs-reader": "spritefs reader: spritefs.torch.EpochDataset over the mount",
             "imagefolder": "torchvision ImageFolder over the JPEGs, Resize + CenterCrop to 64x64"}
TARGET = 5.0
MIN_S = 2.0  # a training run shorter than this measures start-up, not the feed


class Feed:
    def __init__(self, b):
        self.b, c = b, b.cfg
        self.photos = c.data or f"{b.ssd}/photos"
        self.store = f"{b.ssd}/store/pytorch.sprites"
        self.batch = 16 if c.quick else 64
        here = os.path.normpath(os.path.join(b.p.here, "..", "mount"))
        self.env = dict(os.environ)
        if os.path.isfile(os.path.join(here, "spritefs", "__init__.py")):  # the source tree's reader
            self.env["PYTHONPATH"] = here + (":" + self.env["PYTHONPATH"] if self.env.get("PYTHONPATH") else "")

    def prepare(self):
        b, c = self.b, self.b.cfg
        os.makedirs(f"{b.ssd}/store", exist_ok=True)
        if not c.data:
            if not b.p.mkphotos:
                b.die("mkphotos.py not found beside it")
            b.msg(f"1/3 preparing data: {c.photos_feed} camera-sized JPEGs (2-12 megapixels), seed 1 "
                  "(mkphotos.py --sizes camera)")
            if not b.run_logged("mkphotos", [core.PY, b.p.mkphotos, "--count", str(c.photos_feed), "--seed", "1",
                                             "--sizes", "camera", "--jobs", str(b.ncpu), self.photos]):
                b.die(f"mkphotos.py failed (see {b.out}/logs/mkphotos.log)")
        b.msg(f"      packing the photos at {TILE} (crop fit) into the store on the disk")
        if not b.run_logged("pack-photos", [b.p.pack, "--tile", TILE, self.photos, self.store]):
            b.die(f"packing the photos failed (see {b.out}/logs/pack-photos.log)")
        os.sync()
        files = self.kept_files()
        train = [f for f in files if f.startswith(f"{self.photos}/train/")]
        jpeg_bytes = sum(os.path.getsize(f) for f in train)
        pixels = self.pixels(train)
        self.train = len(train)
        core.write_json(b.path("data.json"), {
            "source": c.data or "mkphotos --sizes camera", "files": len(files), "train_files": len(train),
            "train_bytes": jpeg_bytes, "mean_megapixels": pixels, "store_bytes": os.path.getsize(self.store),
            "tile": TILE, "batch": self.batch})
        b.msg(f"      {len(train)} training photos ({jpeg_bytes / 1e6:.0f} MB"
              + (f", {pixels:.1f} megapixels on average" if pixels else "") + ")")
        if len(train) < 2 * self.batch:
            b.die(f"the training split ({len(train)} photos) holds fewer than two batches of {self.batch}: "
                  "give a folder with more photos")

    def kept_files(self):
        """The photos the store holds, by its path table (the folder is read in place, and
        ImageFolder must read what the packer kept); the train split's in logs/kept-train.txt."""
        from . import storefile
        files, self.files_list = storefile.kept_files(self.b, self.store, self.photos, "ImageFolder")
        return files

    def pixels(self, files):
        """The mean megapixels of FILES (PIL reads the headers only), or None."""
        prog = ("import sys\nfrom PIL import Image\nn = 0\nfor p in sys.stdin.read().splitlines():\n"
                "    try:\n        w, h = Image.open(p).size\n        n += w * h\n"
                "    except OSError:\n        pass\nprint(n)")
        try:
            out = subprocess.run([core.PY, "-c", prog], input="".join(f + "\n" for f in files),
                                      capture_output=True, text=True).stdout
            return int(out) / 1e6 / len(files) if files and out.strip() else None
        except (OSError, ValueError):
            return None

    def run_one(self, feed, run):
        b, c = self.b, self.b.cfg
        load, others = os.getloadavg(), others_busy()  # what other jobs take as the run starts
        cmd = [core.PY, b.p.torch_feed, "--epochs", str(c.epochs), "--batch", str(self.batch),
               "--workers", "2", "--threads", str(b.ncpu), "--seed", "1"]
        if feed == "spritefs-reader":
            cmd += ["--mount", b.mnt]
            with b.mounted(self.store, opts=f"batch={self.batch}") as m:
                if m is None:
                    return
                out = self.feed_output(cmd, feed)
        else:
            cmd += ["--tile", TILE.rsplit("x", 1)[0], "--files", "logs/kept-train.txt",
                    "--folder", f"{self.photos}/train"]
            out = self.feed_output(cmd, feed, cwd=b.out)
        shown = " ".join([os.path.basename(cmd[1])] + cmd[2:]).replace(b.mnt, "MNT").replace(b.ssd, "DISK")
        row = {"feed": feed, "command": shown, "loadavg": load, "others_busy": others}
        if out is None or not out.get("samples_s"):
            b.fail(f"torch_feed.py {feed} run {run} (see logs/torch-feed.err)")
            b.rec("feed-run", feed, "failed", run, row, None)
            return
        b.rec("feed-run", feed, "warm", run, row, out)
        b.msg(f"      run {run} {feed}: {out['samples_s']:.1f} samples/s steady "
              f"({out['epoch_samples_s']:.1f} over whole epochs), each sample once: {out['exactly_once']}")

    def feed_output(self, cmd, feed, cwd=None):
        with open(self.b.path("logs", "torch-feed.err"), "a") as err:
            err.write(f"== {feed}: {' '.join(cmd)}\n")
            err.flush()
            r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=err, text=True, env=self.env, cwd=cwd)
        return core.parse_json(r.stdout) if r.returncode == 0 else None


def others_busy(secs=1.0):
    """The share of all CPUs busy over SECS while this bench runs nothing (/proc/stat):
    other jobs on a shared machine. resnet18's step is compute-bound, and its torch threads
    lose the most when a core is taken, so a busy machine lowers the reader's rate most."""
    import time

    def ticks():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return sum(v), v[3] + (v[4] if len(v) > 4 else 0)  # all, idle + iowait
    try:
        t0, i0 = ticks()
        time.sleep(secs)
        t1, i1 = ticks()
    except (OSError, ValueError, IndexError):
        return None
    return round(1 - (i1 - i0) / (t1 - t0), 3) if t1 > t0 else None


def run(b):
    from . import cli
    f = Feed(b)
    f.prepare()
    c = b.cfg
    b.msg(f"2/3 resnet18 on the CPU ({b.ncpu} threads), batch {f.batch}, {c.epochs} epoch(s), 2 DataLoader "
          f"workers: the spritefs reader and ImageFolder in turn, {c.runs} run(s) each")
    load0 = os.getloadavg()
    for r in range(1, c.runs + 1):
        for feed in FEEDS:
            f.run_one(feed, r)
    b.rec("feed-load", "machine", "-", 0, {"loadavg_before": load0, "loadavg_after": os.getloadavg()})
    b.msg("3/3 report: results.json, the table, T13")
    from . import report
    rc = report.main(b.out)
    if rc != 0:
        b.die("report failed")
    return cli.finish(b, rc, "")


# ---- the report ------------------------------------------------------------------

def summarize(recs):
    runs = [dict(r.get("result") or {}, feed=r["medium"], run=r["run"], command=r.get("command"),
                 loadavg=r.get("loadavg"), others_busy=r.get("others_busy"),
                 status="measured" if r.get("result") else "failed")
            for r in recs if r.get("kind") == "feed-run"]
    rows = []
    for feed in FEEDS:
        ok = [x for x in runs if x["feed"] == feed and x["status"] == "measured"]
        if not ok:
            continue
        rows.append({"feed": feed, "runs": len(ok), "samples_s": med([x["samples_s"] for x in ok]),
                     "epoch_samples_s": med([x["epoch_samples_s"] for x in ok]),
                     "train_s": med([x["train_s"] for x in ok]),
                     "first_step_s": med([x["per_epoch"][0]["first_step_s"] for x in ok]),
                     "split_samples": ok[0]["split_samples"], "classes": ok[0]["classes"],
                     "batch": ok[0]["batch"], "workers": ok[0]["workers"], "threads": ok[0]["threads"],
                     "epochs": ok[0]["epochs"], "exactly_once": all(x["exactly_once"] for x in ok),
                     "label_counts": ok[0]["label_counts"], "command": ok[0]["command"]})
    by = {r["feed"]: r for r in rows}
    sf, tv = by.get("spritefs-reader"), by.get("imagefolder")
    measured = ratio(sf and sf["samples_s"], tv and tv["samples_s"])
    # run r's reader over run r's ImageFolder: the spread the load of a shared machine gives
    per = {(x["feed"], x["run"]): x["samples_s"] for x in runs if x["status"] == "measured"}
    pairs = sorted(ratio(per[("spritefs-reader", r)], per[("imagefolder", r)])
                   for f, r in per if f == "spritefs-reader" and ("imagefolder", r) in per)
    once = bool(sf and sf["exactly_once"])
    short = next((f"the {r['feed']} run lasted {r['train_s']:.2f} s, under {MIN_S:g} s" for r in rows
                  if r["train_s"] < MIN_S), None)
    t = {"id": "T13", "what": "resnet18 (CPU, 64x64 tiles) fed by the spritefs reader with 2 workers vs "
         "ImageFolder over the JPEGs with 2 workers: samples/s, each sample once per epoch",
         "measured": measured, "target": f">= {TARGET:g}x and exactly once", "exactly_once": once,
         "whole_epochs_ratio": ratio(sf and sf["epoch_samples_s"], tv and tv["epoch_samples_s"]),
         "run_ratios": pairs,
         "pass": None if measured is None else (measured >= TARGET and once)}
    if short and measured is not None:
        t["small"], t["pass"] = short, None
    if sf and not once:
        t["pass"] = False  # a sample twice or missing is a miss whatever the data's size
        t.pop("small", None)
    from .report import verdict
    t["verdict"] = verdict(t)
    return {"rows": rows, "runs": runs, "targets": [t]}


def main(out, recs, machine, notes):
    cfg = machine.get("config", {})
    data = load_json(os.path.join(out, "data.json"), {})
    s = summarize(recs)
    load = next((r for r in recs if r.get("kind") == "feed-load"), {})
    s["loadavg_before"], s["loadavg_after"] = load.get("loadavg_before"), load.get("loadavg_after")
    busy = med([x.get("others_busy") for x in s["runs"]])
    s["others_busy"] = busy
    if busy is not None and busy > 0.2:
        notes = notes + [f"other jobs kept {100 * busy:.0f}% of the CPUs busy before a run (the median; "
                         "each run's in results.json, others_busy): the rates are a shared machine's, "
                         "and the reader's compute-bound steps lose the most"]
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump({"machine": machine, "data": data, "notes": notes, "summary": s, "records": recs}, f, indent=1)
    mp = data.get("mean_megapixels")
    L = [f"## spritefs-bench: a PyTorch training loop, fed by the spritefs reader and by ImageFolder "
         f"({'quick' if cfg.get('quick') else 'full'} mode)", "",
         f"Machine: {machine.get('cpu', '?')}, {machine.get('cores', '?')} cores, torch {machine.get('torch', '?')}; "
         f"load average {fmt_load(s['loadavg_before'])} before, {fmt_load(s['loadavg_after'])} after.",
         f"Data: {data.get('train_files', '?')} training JPEGs ({data.get('source', '?')}, "
         f"{fmt((data.get('train_bytes') or 0) / 1e6)} MB" + (f", {mp:.1f} megapixels on average" if mp else "")
         + f"), packed at {data.get('tile', TILE)} (crop fit), store {fmt((data.get('store_bytes') or 0) / 1e6, 1)} MB."]
    L += command_line(cfg) + ["",
          "| feed | runs | samples/s (steady) | samples/s (whole epochs) | first step s | epoch(s) s | "
          "each sample once |", "|---|---:|---:|---:|---:|---:|---|"]
    for r in s["rows"]:
        L.append(f"| {r['feed']} | {r['runs']} | {fmt(r['samples_s'], 1)} | {fmt(r['epoch_samples_s'], 1)} | "
                 f"{fmt(r['first_step_s'], 2)} | {fmt(r['train_s'], 1)} | "
                 f"{'yes' if r['exactly_once'] else '**no**'} |")
    L.append("")
    L += [f"* {r['feed']}: {FEED_TEXT[r['feed']]}; `{r['command']}`" for r in s["rows"]]
    if s["rows"]:
        r = s["rows"][0]
        L.append(f"* torchvision resnet18 ({r['classes']} classes), SGD, batch {r['batch']}, {r['threads']} torch "
                 f"threads, {r['workers']} DataLoader workers, {r['epochs']} epoch(s) of {r['split_samples']} "
                 "samples; steady: after each epoch's first step (start-up and the first batch's wait, long "
                 "for ImageFolder, left out); medians over the runs")
    L += ["", "### Target", "", "| # | measure | measured | target | result |", "|---|---|---:|---|---|"]
    for t in s["targets"]:
        res = t["verdict"]
        res = "**miss**" if res == "miss" else f"{res} ({t['small']})" if t.get("small") else res
        spread = t.get("run_ratios") or []
        spread = f"; runs {fmt_ratio(spread[0])}-{fmt_ratio(spread[-1])}" if len(spread) > 1 else ""
        L.append(f"| {t['id']} | {t['what']} | {fmt_ratio(t['measured'])} (whole epochs "
                 f"{fmt_ratio(t['whole_epochs_ratio'])}{spread}) | {t['target']} | {res} |")
    L.append("")
    from .report import table_notes, write_report
    write_report(out, L + table_notes(notes))
    return 0


def fmt_load(v):
    return "-" if not v else "/".join(f"{x:.2f}" for x in v)
