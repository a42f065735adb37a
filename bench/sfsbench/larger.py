"""larger.py - `spritefs-bench --dataset larger` (or `spritefs-bench larger`):
data several times the cache budget. Steps:

 1. Fashion-MNIST packed at 224x224x1 on the disk (all of it; --limit N
    samples per split), with the store's default order (quick: windows of
    2 sheets, so that a small store still has a working set below its size).
 2. The bound: fio O_DIRECT on the store file (MB/s) x the compression
    ratio (decoded bytes over stored bytes of the train split), and the
    decode rate of one thread (spritefs-readbench --decode lz4: what a decode
    worker does, stored bytes already in memory) x the mount's decode
    workers (its default: one per CPU); the smaller of the two.
 3. A cold epoch (page cache dropped, fresh mount, -o cache=CACHE, all else
    default) over train/epochs/1/0 read with O_DIRECT by NCPU threads, as
    hntrain reads views: decoded tiles/s against the bound, and the read
    amplification, store bytes read and decode time from stats.json; the
    daemon's CPU time says where the time went.
 4. hntrain on the mount (defaults, cold) against --preload of the store
    file: samples/s, data-wait share, and the same weights hash.
 5. The budget swept from the smallest the mount takes to the whole split:
    one cold epoch each, throughput and read amplification (larger.png).

Records go to OUT/raw.jsonl as the other scenarios' do (kind "larger-*");
report_larger.py turns them into tables, results.json and the plot.
"""
import json
import os
import re
import shutil
import subprocess

from . import core


def pack(b, store):
    c = b.cfg
    b.msg("1/5 larger than memory: packing Fashion-MNIST at 224x224x1"
          + (f", {c.limit} samples per split" if c.limit else ""))
    win = ["--window", "2"] if c.quick else []
    if c.limit:
        ok = (b.run_logged("pack-base", [b.p.pack, c.fmnist, f"{b.ssd}/base.sprites"])
              and b.run_logged("export-small", [b.p.pack, "--export", f"{b.ssd}/small", "--format", "png",
                                                "--limit", str(c.limit), f"{b.ssd}/base.sprites"])
              and b.run_logged("pack-larger", [b.p.pack, "--tile", "224x224x1"] + win
                               + [f"{b.ssd}/small", store]))
        if not ok:
            b.die(f"packing failed (see {b.out}/logs/pack-*.log)")
        shutil.rmtree(f"{b.ssd}/small", ignore_errors=True)
        os.remove(f"{b.ssd}/base.sprites")
    elif not b.run_logged("pack-larger", [b.p.pack, "--tile", "224x224x1"] + win + [c.fmnist, store]):
        b.die(f"packing failed (see {b.out}/logs/pack-larger.log)")
    b.rec("store", "larger", "na", 0, {"bytes": os.path.getsize(store)})


def bound(b, store):
    c = b.cfg
    b.msg("2/5 the bound: fio O_DIRECT on the store, one decode thread (spritefs-readbench --decode lz4)")
    if shutil.which("fio"):
        engine = "io_uring"
        if core.quiet(["fio", "--name=probe", f"--filename={store}", "--rw=read", "--bs=4k", "--size=4k",
                       "--ioengine=io_uring", "--direct=1"]) != 0:
            engine = "libaio"
        b.drop_caches()
        out = b.output(["fio", "--name=larger", f"--filename={store}", "--rw=read", "--bs=1M",
                        "--iodepth=16", f"--ioengine={engine}", "--direct=1",
                        f"--runtime={3 if c.quick else 10}", "--time_based", "--output-format=json"],
                       "fio-larger.err")
        res = fio_json(out)
        if res is None:
            b.fail(f"fio on {store} (see logs/fio-larger.err)")
        else:
            with open(b.path("logs", "fio-larger.json"), "w") as f:
                f.write(out)
            b.rec("ceiling", "fio-store-larger", b.cold, 0, {}, res)
    else:
        b.note("fio not installed: no disk bound (apt-get install fio)")
    out = b.output([b.p.readbench, "--decode", "lz4", "--seconds", str(2 if c.quick else 5), "--threads", "1",
                    "--limit", "64", "--label", "lz4", store], "larger-lz4.err")
    res = core.parse_json(out) if out else None
    if res is None:
        b.fail("decode rate (see logs/larger-lz4.err)")
    else:
        b.rec("larger-lz4", "store", "warm", 0, {"workers": len(core.cpus_allowed())}, res)


def fio_json(out):
    """fio's --output-format=json result (after any warning lines); None if none."""
    try:
        return json.loads(out[out.index("{"):]) if out else None
    except ValueError:
        return None


def epoch(b, store, cache, tag, views=0):
    """One cold epoch over the views with -o cache=CACHE (with VIEWS, only the first VIEWS
    of them); records larger-epoch with the reader's result, stats.json's fields and the
    daemon's CPU. False where it could not be measured."""
    with b.mounted(store, cache=cache, cold=True) as m:
        if m is None:
            return False
        cpu0 = m.cpu_s()
        lim = ["--limit", str(views)] if views else []
        out = b.output([b.p.readbench, "--decode", "batch", "--direct", "--threads", str(b.ncpu)] + lim
                       + ["--label", tag, f"{b.mnt}/train/epochs/1/0"], "larger-readbench.err", timeout=600)
        res = core.parse_json(out) if out else None
        if res is None:
            b.fail(f"cold epoch over {b.mnt}/train/epochs/1/0 with cache={cache} (see logs/larger-readbench.err)")
            return False
        b.rec("larger-epoch", "spritefs", b.cold, 0,
              {"cache": cache, "tag": tag, "views_limit": views,
               "daemon_cpu_s": round(m.cpu_s() - cpu0, 3), "stats": m.stats()}, res)
    return True


def train(b, store):
    c = b.cfg
    b.msg(f"4/5 hntrain {c.model} on the mount (cold, defaults) and with --preload of the store")
    args = ["--model", c.model, "--epochs", str(c.epochs), "--seed", "1"]
    with b.mounted(store, cold=True) as m:
        if m is None:
            return
        for what in ("mount", "preload"):
            data, extra = (store, ["--preload"]) if what == "preload" else (b.mnt, [])
            log = f"logs/train-larger-{what}.jsonl"
            with open(b.path("logs", f"train-larger-{what}.out"), "w") as o:
                rc = subprocess.run([b.p.hntrain, "--data", data] + args + extra + ["--log", b.path(log)],
                                    stdout=o, stderr=subprocess.STDOUT).returncode
            if rc == 0:
                b.rec("larger-train", what, b.cold, 0, {"name": f"larger-{what}", "log": log,
                                                         "args": " ".join(args + extra)})
            else:
                b.fail(f"hntrain on {data} (see logs/train-larger-{what}.out)")


def smallest_budget(b, store):
    """The smallest budget the mount takes, MiB, from its refusal of 1 MiB; None if unsaid."""
    os.makedirs(b.mnt, exist_ok=True)
    try:
        r = subprocess.run([b.p.spritefs, "-f", "-o", "cache=1M", store, b.mnt], capture_output=True,
                           text=True, timeout=60)
        text = r.stdout + r.stderr
    except (OSError, subprocess.TimeoutExpired):
        text = ""
    if os.path.ismount(b.mnt):
        core.quiet(["fusermount3", "-u", b.mnt])
    m = re.search(r"smallest budget that works is ([0-9.]+) MiB", text)
    return float(m.group(1)) if m else None


def budgets(mn, ws, whole):
    """The sweep's points: from the smallest budget (said to 0.1 MiB) to the whole split."""
    mn = (mn + 0.05) * 2**20
    pts = sorted({max(mn, x) for x in (mn, ws / 4, ws / 2, ws, 2 * ws, whole)})
    pts = [x for k, x in enumerate(pts) if x <= whole and (k == len(pts) - 1 or pts[k + 1] > 1.1 * x)]
    return ["%dK" % -(-int(x) // 1024) for x in pts]


def sweep(b, store):
    mn = smallest_budget(b, store)
    ws = whole = nviews = None
    with b.mounted(store) as m:
        if m is not None:
            ws = m.stats().get("working_set")
            try:
                whole = os.path.getsize(f"{b.mnt}/train/images.npy")
                nviews = sum(1 for _, _, fs in os.walk(f"{b.mnt}/train/epochs/1/0")
                             for f in fs if f.endswith(".sprite"))
            except OSError:
                ws = None
    if mn is None or not ws:
        b.fail("budget sweep: no smallest budget or working set (see logs/spritefs.log)")
        return
    pts = budgets(mn, ws, whole)
    b.msg(f"5/5 budget sweep: {' '.join(pts)} (working set {ws >> 20} MiB)")
    for p in pts:
        # Below half the working set each view may load most of its window's sheets
        # again: the first 1/16 of the epoch, at least 8 views (their amplification is
        # over what they need) keeps such points to seconds.
        part = 0
        if int(p[:-1]) * 1024 * 2 < ws:
            part = (nviews + 15) // 16
            if part < 8:
                part = min(nviews, 8)
        if not epoch(b, store, p, "sweep", part):
            break


def run(b):
    from . import cli, report
    store = f"{b.ssd}/larger.sprites"
    pack(b, store)
    bound(b, store)
    if b.have_mount:
        b.msg(f"3/5 a cold epoch over the views, -o cache={b.cfg.cache}, read with O_DIRECT by {b.ncpu} threads")
        epoch(b, store, b.cfg.cache, "main")
    if b.have_mount and b.p.hntrain:
        train(b, store)
    if b.have_mount:
        sweep(b, store)
    b.msg("report: results.json, tables, plot")
    rc = report.main(b.out)
    if rc not in (0, 3):
        b.die("report failed")
    return cli.finish(b, rc, "hntrain on the mount and with --preload gave different weights "
                      f"(see {b.out}/report.md)")
