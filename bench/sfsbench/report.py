"""report.py - turn one spritefs-bench run into results.json, tables and plots.

A run's folder holds what it measured as JSON lines (OUT/raw.jsonl: one
record per measurement, hntrain's own per-epoch logs under OUT/logs) plus
OUT/machine.json and OUT/data.json. This takes medians over repeated runs,
computes the ratios against tmpfs and the issue targets, checks that every
medium delivered the same samples and trained to the same weights, and
writes OUT/results.json (all raw numbers, machine info, summary), a Markdown
report on stdout (also OUT/report.md), and PNG plots drawn by gnuplot (where
gnuplot is installed; else the data and plot.gp are left for later, and a
note says so). One function per table. `spritefs-bench report DIR` runs it
again on a finished run.

Returns 0; 3 when the media disagreed (different weights for the same seed
on one device, or different decoded samples), after everything is written.
"""
import json
import os
import shutil
import sys

from . import plots
from .rutil import (MIB, command_line, fmt, fmt_acc, fmt_ratio, load_json, load_jsonl, med, parse_size, pct,
                    per_epoch, ratio, summarize_train)


def main(out):
    recs = load_jsonl(os.path.join(out, "raw.jsonl"))
    machine = load_json(os.path.join(out, "machine.json"), {})
    data = load_json(os.path.join(out, "data.json"), {})
    try:
        with open(os.path.join(out, "notes.txt")) as f:
            notes = [l.rstrip("\n") for l in f if l.strip()]
    except FileNotFoundError:
        notes = []
    cfg = machine.get("config", {})
    gnuplot = shutil.which("gnuplot")
    if not gnuplot and not any("gnuplot" in n for n in notes) and cfg.get("dataset") not in ("review", "accuracy", "pytorch"):
        notes.append("gnuplot not installed: no plots (apt-get install gnuplot-nox; then "
                     "`gnuplot plot.gp` in this folder draws them)")
    if cfg.get("dataset") == "larger":
        from . import report_larger
        return report_larger.main(out, recs, machine, notes, gnuplot)
    if cfg.get("dataset") == "accelerators":
        from . import accel_report
        return accel_report.main(out, recs, machine, notes, gnuplot)
    if cfg.get("dataset") == "review":
        from . import review_report
        return review_report.main(out, recs, machine, notes)
    if cfg.get("dataset") == "accuracy":
        from . import accuracy
        return accuracy.report(out, recs)
    if cfg.get("dataset") == "pytorch":
        from . import pytorch
        return pytorch.main(out, recs, machine, notes)
    return standard(out, recs, machine, data, notes, gnuplot)


# ---- the numbers ---------------------------------------------------------------

def ceilings(out, recs):
    """fio and dd rates, medians per medium."""
    ceil = {}
    for r in recs:
        if r.get("kind") != "ceiling":
            continue
        if r["medium"].startswith("fio"):
            j = load_json(os.path.join(out, r.get("file", "")), {})
            try:
                bw = j["jobs"][0]["read"]["bw_bytes"]
            except (KeyError, IndexError, TypeError):
                bw = None
            ceil.setdefault(r["medium"], []).append(bw / 1e6 if bw else None)
            ceil.setdefault(r["medium"] + "-engine", []).append(r["state"])
            ceil.setdefault(r["medium"] + "-bs", []).append(r.get("bs", MIB))
        else:
            res = r.get("result") or {}
            if res.get("wall_s"):
                ceil.setdefault(r["medium"], []).append(res["bytes"] / 1e6 / res["wall_s"])
    return {"fio_store_mb_s": med(ceil.get("fio-store", [])),
            "fio_store_pass_mb_s": med(ceil.get("fio-store-pass", [])),
            "fio_t2store_mb_s": med(ceil.get("fio-t2store", [])),
            "fio_t2store_pass_mb_s": med(ceil.get("fio-t2store-pass", [])),
            "fio_disk_mb_s": med(ceil.get("fio-disk", [])),
            "dd_tmpfs_mb_s": med(ceil.get("dd-tmpfs", [])),
            "fio_engine": (ceil.get("fio-disk-engine") or ceil.get("fio-store-engine") or [None])[0],
            # fio's block size where it was not 1 MiB (a store smaller than that)
            "fio_bs": {k[:-3]: v[0] for k, v in ceil.items() if k.endswith("-bs") and v and v[0] != MIB}}


ORDER = ["tiff-tmpfs", "tiff-ssd", "store-tmpfs", "store-ssd", "batches-tmpfs", "spritefs",
         "spritefs-direct", "spritefs-t2-direct", "spritefs-t2-buffered", "spritefs-npy",
         "torch-tiff-tmpfs", "torch-tiff-ssd", "torch-spritefs-byclass"]


def per_pass(x, k):
    """--passes N reads everything N times."""
    v = x.get(k)
    return v // max(1, x.get("passes") or 1) if isinstance(v, int) else v


def read_rows(recs):
    """Reads and decodes, medians per (medium, state), in the report's order."""
    groups = {}
    for r in recs:
        if r.get("kind") not in ("read", "decode"):
            continue
        g = groups.setdefault((r["medium"], r["state"]), {"medium": r["medium"], "state": r["state"],
                                                          "read": [], "decode": []})
        g[r["kind"]].append(r.get("result") or {})
    rows = []
    for g in groups.values():
        row = {"medium": g["medium"], "state": g["state"],
               "runs": max(len(g["read"]), len(g["decode"]))}
        if g["read"]:
            row["mb_s"] = med([x.get("mb_s") for x in g["read"]])
            row["files_s"] = med([x.get("files_s") for x in g["read"]])
            row["bytes"] = per_pass(g["read"][0], "bytes")
            row["read_wall_s"] = med([x.get("wall_s") for x in g["read"]])
        if g["decode"]:
            row["samples_s"] = med([x.get("samples_s") for x in g["decode"]])
            row["samples"] = per_pass(g["decode"][0], "samples")
            row["decode_wall_s"] = med([x.get("wall_s") for x in g["decode"]])
            sums = {x.get("sample_sum") for x in g["decode"] if x.get("sample_sum")}
            if sums:
                row["sample_sum"] = sorted(sums)[0] if len(sums) == 1 else "differs:" + ",".join(sorted(sums))
            if g["decode"][0].get("decode"):
                row["decode"] = g["decode"][0]["decode"]
            if g["decode"][0].get("peer"):
                row["decode"] = g["decode"][0]["peer"]
        rows.append(row)
    rows.sort(key=lambda r: (ORDER.index(r["medium"]) if r["medium"] in ORDER else 99,
                             r["state"] != "warm"))
    base = row_of(rows, "tiff-tmpfs", "warm")
    for r in rows:
        r["mb_s_x_tmpfs"] = ratio(r.get("mb_s"), base.get("mb_s"))
        r["samples_s_x_tmpfs"] = ratio(r.get("samples_s"), base.get("samples_s"))
    return rows


def row_of(rows, medium, state):
    return next((r for r in rows if r["medium"] == medium and r["state"] == state), {})


def same_samples(rows):
    """(True/False, or None with nothing hashed to compare; the sums per medium)."""
    sums = {r["medium"] + "/" + r["state"]: r.get("sample_sum") for r in rows
            if r.get("sample_sum") and not r["medium"].startswith("torch")}
    distinct = set(sums.values())
    same = (len(distinct) == 1 and not any(str(v).startswith("differs") for v in distinct)) \
        if sums else None
    return same, sums


def training(out, recs):
    """Every training run summarised, and grouped as the tables show them."""
    trains = [summarize_train(out, r) for r in recs if r.get("kind") == "train"]
    t = {"all": trains,
         "main": [x for x in trains if not x["name"].startswith(("sweep-", "dp-", "gpux-"))
                  and not x.get("peer")],
         # the GPU at batch 64 and 512, fp32 and --amp (gpux-b<B>-<fp32|amp>)
         "gpux": {x["name"]: x for x in trains if x["name"].startswith("gpux-")},
         "torch_gpu": next((x for x in trains if x.get("peer") == "torch-gpu"), None),
         "sweeps": [x for x in trains if x["name"].startswith("sweep-")],
         "dps": [x for x in trains if x["name"].startswith("dp-")],
         "torch": next((x for x in trains if x.get("peer") == "torch"), None)}
    base = next((x for x in t["main"] if x["medium"] == "tiff-tmpfs" and x["device"] == "cpu"), {})
    for x in trains:
        peer = next((m for m in t["main"] if m["medium"] == "tiff-tmpfs" and m["device"] == x["device"]),
                    base)
        x["samples_s_x_tmpfs"] = ratio(x.get("samples_s"), peer.get("samples_s"))
    weights = {}
    for x in t["main"]:
        if x.get("weights_xxh3"):
            weights.setdefault(x["device"], {})[x["name"]] = x["weights_xxh3"]
    t["weights"] = weights
    t["mismatch"] = {d: w for d, w in weights.items() if len(set(w.values())) > 1}
    return t


def memory(recs):
    """The strictest case decides T7: the smallest budget measured (with a data set larger
    than it, eviction must hold the line)."""
    mem = [dict(r.get("result") or {}, state=r.get("state")) for r in recs if r.get("kind") == "memory"]
    for m in mem:
        m["budget_bytes"] = parse_size(m["budget"]) if m.get("budget") else None
    mem = [m for m in mem if m.get("budget_bytes")]
    budget = min([m["budget_bytes"] for m in mem], default=None)
    tight = [m for m in mem if m["budget_bytes"] == budget]
    return {"rss_bytes": max([m.get("rss_bytes", 0) for m in tight], default=0),
            "hwm_bytes": max([m.get("hwm_bytes", 0) for m in tight], default=0),
            "budget_bytes": budget, "all": mem}


# "Too small to measure": a target compares rates of timed runs, and a run carries fixed costs
# however little it reads - reader threads started and files opened, a fresh mount's first
# requests and its read-ahead filling and draining (about 1 ms for spritefs-readbench over a
# one-sheet store), PyTorch's DataLoader workers forked, a training run's loader threads
# started and its first batch read and its buffers touched (tens to hundreds of ms). A run
# shorter than 10x those costs measures them, not the medium: a spritefs-readbench run of
# less than MIN_READ_S, a PyTorch loader or training run of less than MIN_RUN_S. T7 needs
# decoded data larger than the cache budget it holds spritefs to, or eviction never runs.
# Such a target keeps its measured figure and has the verdict "too small to measure" (pass
# None), never "miss".
MIN_READ_S = 0.010
MIN_RUN_S = 2.0
# T2's cold pass also needs a store of at least four read-ahead windows: spritefs reads
# prefetch + 1 sheets ahead (prefetch=8 by default), and a pass over fewer sheets is mostly
# that window filling and draining, whatever its length.
MIN_SHEETS = 4 * (8 + 1)
TOO_SMALL = "too small to measure"


def short_run(*runs):
    """The reason a target is too small to measure, or None: the first of RUNS, (what,
    seconds, minimum), that lasted less than its minimum (an unmeasured one is passed over)."""
    for what, secs, least in runs:
        if isinstance(secs, (int, float)) and secs < least:
            shown = f"{1000 * secs:.1f} ms" if secs < 1 else f"{secs:.2f} s"
            need = f"{1000 * least:.0f} ms" if least < 1 else f"{least:g} s"
            return f"{what} lasted {shown}, under {need}"
    return None


def verdict(t):
    return TOO_SMALL if t.get("small") else "n/a" if t["pass"] is None else "pass" if t["pass"] else "miss"


class Targets(list):
    def add(self, tid, what, measured, goal, ok, how, small=None, **more):
        """SMALL: why the data is too small to measure it (short_run), or None."""
        t = dict({"id": tid, "what": what, "measured": measured, "target": goal,
                  "pass": None if small and measured is not None else ok, "how": how}, **more)
        if small and measured is not None:
            t["small"] = small
        t["verdict"] = verdict(t)
        self.append(t)


def few_sheets(sheets):
    """The reason a store is too small for a cold pass (MIN_SHEETS), or None."""
    if isinstance(sheets, int) and sheets < MIN_SHEETS:
        return (f"the store has {sheets} sheet{'s' if sheets != 1 else ''}, under {MIN_SHEETS}: "
                "four read-ahead windows")
    return None


def targets_io(tg, recs, rows, ceil, store_bytes, cfg, sheets=None):
    """T1, T2, T3/T10: the reads."""
    cold = "cold" if any(r["state"] == "cold" for r in rows) else "nodrop"
    r1 = ratio(row_of(rows, "spritefs", "warm").get("mb_s"), row_of(rows, "batches-tmpfs", "warm").get("mb_s"))
    tg.add("T1", "spritefs warm batch-file reads vs the same bytes on tmpfs", r1, ">= 0.9x",
           None if r1 is None else r1 >= 0.9, "spritefs-readbench raw MB/s, median",
           small=short_run(("the warm spritefs read", row_of(rows, "spritefs", "warm").get("read_wall_s"),
                            MIN_READ_S),
                           ("the tmpfs read", row_of(rows, "batches-tmpfs", "warm").get("read_wall_s"),
                            MIN_READ_S)))
    # T2: a cold pass over the batch files, in store bytes per second, against fio's
    # O_DIRECT reads of the store (time-based: its steady bandwidth; one pass: the same
    # work as the spritefs pass, ramp-up included). Read twice: with O_DIRECT like fio
    # (and hntrain's epoch views), and buffered. In full mode also over the tree packed
    # at 56x56, where the pass is long enough for the steady rate to show.
    t2_rec = next((r for r in recs if r.get("kind") == "store" and r.get("medium") == "t2-56x56"), {})
    t2_bytes = t2_rec.get("bytes")
    sets = [("spritefs-direct", "spritefs", store_bytes, "fio_store", "", sheets)]
    if t2_bytes:
        sets.append(("spritefs-t2-direct", "spritefs-t2-buffered", t2_bytes, "fio_t2store",
                     f", the tree packed at 56x56 ({t2_bytes / 1e6:.0f} MB store)", t2_rec.get("sheets")))
    for direct, buffered, nbytes, fio, where, nsheets in sets:
        for medium, how in ((direct, "O_DIRECT reads (as fio reads the store)"), (buffered, "buffered reads")):
            wall = row_of(rows, medium, cold).get("read_wall_s")
            steady, one = ceil[fio + "_mb_s"], ceil[fio + "_pass_mb_s"]
            if medium == "spritefs-direct" and not wall:
                continue  # an older bench run: buffered only
            t2 = (nbytes / 1e6 / wall) / steady if wall and nbytes and steady else None
            more = {"reads": "direct" if "direct" in medium else "buffered",
                    "store": "56x56" if where else "data"}
            if t2 is not None and one:
                more["vs_one_pass"] = t2 * steady / one
                more["also"] = f"{t2 * steady / one:.2f}x of one fio pass"
            tg.add("T2", f"spritefs cold (fresh mount, caches dropped){where}, {how}, vs fio O_DIRECT "
                   "seq read of the store, compressed bytes", t2, ">= 0.8x", None if t2 is None else t2 >= 0.8,
                   "store bytes / cold pass wall time over fio 1M QD16 MB/s (time-based)",
                   small=few_sheets(nsheets) or short_run(("the cold pass", wall, MIN_READ_S)), **more)
    r3 = ratio(row_of(rows, "spritefs", "warm").get("samples_s"),
               row_of(rows, "torch-tiff-tmpfs", "warm").get("samples_s"))
    s3 = short_run(("the warm spritefs decode", row_of(rows, "spritefs", "warm").get("decode_wall_s"), MIN_READ_S),
                   ("the PyTorch loader run", row_of(rows, "torch-tiff-tmpfs", "warm").get("decode_wall_s"),
                    MIN_RUN_S))
    if cfg.get("dataset") == "photos":
        tg.add("T10", "photo JPEG folder: warm spritefs decoded samples/s vs torchvision ImageFolder + "
               "DataLoader with Resize+CenterCrop, 2 workers, over the same JPEG tree",
               r3, ">= 100x", None if r3 is None else r3 >= 100,
               "spritefs-readbench --decode batch vs torch_loader.py --resize (batch 64)", small=s3)
    else:
        tg.add("T3", "decoded samples/s to a reader: spritefs batch files vs PyTorch DataLoader over TIFF on tmpfs",
               r3, ">= 100x", None if r3 is None else r3 >= 100,
               "spritefs-readbench --decode batch vs torch_loader.py (2 workers, batch 64)", small=s3)


def wall(x):
    """A training summary's training pass, seconds (None where unmeasured)."""
    return x.get("wall_s") if x else None


def targets_train(tg, recs, t, mem, cfg, data_bytes=None):
    """T4, T4b, T5, T7, T8, T8b, T8c, T9, T10b: training and memory."""
    main_runs, model = t["main"], cfg.get("model", "cnn")
    hs = next((x for x in main_runs if x["medium"] == "spritefs" and x["device"] == "cpu"), None) \
        or next((x for x in main_runs if x["device"] == "cpu"), None)
    r4 = ratio(hs.get("samples_s") if hs else None, t["torch"].get("samples_s") if t["torch"] else None)
    hs_short = ("the hntrain training pass", wall(hs), MIN_RUN_S)
    tg.add("T4", f"hntrain CPU vs PyTorch CPU, {model}, same batch and threads", r4,
           ">= 2x", None if r4 is None else r4 >= 2, "samples/s over the epochs",
           small=short_run(hs_short, ("the PyTorch training run", wall(t["torch"]), MIN_RUN_S)))
    peak = next(((r.get("result") or {}).get("gflops") for r in recs if r.get("kind") == "gemm"), None)
    g4 = hs.get("compute_gflops") if hs else None
    r4b = ratio(g4, peak)
    tg.add("T4b", f"hntrain CPU {model} training FLOP/s vs OpenBLAS large-SGEMM FLOP/s on the same cores",
           r4b, ">= 0.7x", None if r4b is None else r4b >= 0.7,
           f"{g4 or 0:.1f} GFLOP/s over the compute time (matrix products, forward + backward) vs "
           f"hntrain --gemm-peak {peak or 0:.1f}", small=short_run(hs_short))
    share = hs.get("data_wait_share") if hs and hs["medium"] == "spritefs" else None
    tg.add("T5", "data-wait share of an hntrain CPU epoch fed by spritefs", share, "< 1%",
           None if share is None else share < 0.01, "data_wait_s / wall_s from hntrain's log",
           small=short_run(hs_short))
    budget, hwm = mem["budget_bytes"], mem["hwm_bytes"]
    r7 = (hwm / (budget + 64 * MIB)) if budget and hwm else None
    tg.add("T7", "spritefs resident memory (peak VmHWM) vs cache budget + 64 MiB", r7, "<= 1.0x",
           None if r7 is None else r7 <= 1.0,
           f"VmHWM {hwm / MIB:.0f} MiB, budget {budget // MIB if budget else '-'} MiB",
           small=(f"the decoded data ({data_bytes / MIB:.1f} MiB) fits the {budget // MIB} MiB budget: "
                  "nothing is evicted") if budget and data_bytes is not None and data_bytes <= budget else None)
    gs = next((x for x in main_runs if x["medium"] == "spritefs" and x["device"] == "gpu"), None)
    gp = next((x for x in main_runs if x["medium"] == "preload" and x["device"] == "gpu"), None)
    if gs and gp:
        r8 = ratio(gs.get("samples_s"), gp.get("samples_s"))
        tg.add("T8", "hntrain GPU fed by spritefs vs preloaded in RAM", r8, ">= 0.95x",
               None if r8 is None else r8 >= 0.95, "samples/s",
               small=short_run(("the GPU run from spritefs", wall(gs), MIN_RUN_S),
                               ("the preloaded GPU run", wall(gp), MIN_RUN_S)))
    gpux, tgpu = t["gpux"], t["torch_gpu"]
    f512 = gpux.get("gpux-b512-fp32")
    if f512 and tgpu:
        r8b = ratio(f512.get("samples_s"), tgpu.get("samples_s"))
        tg.add("T8b", "hntrain GPU fp32 (deterministic) vs PyTorch eager GPU, batch 512", r8b,
               ">= 2x", None if r8b is None else r8b >= 2,
               f"samples/s; PyTorch {(tgpu.get('raw') or {}).get('torch', '?')}",
               small=short_run(("the hntrain GPU run", wall(f512), MIN_RUN_S),
                               ("the PyTorch GPU run", wall(tgpu), MIN_RUN_S)))
    amp_x = {b: ratio((gpux.get(f"gpux-b{b}-amp") or {}).get("samples_s"),
                      (gpux.get(f"gpux-b{b}-fp32") or {}).get("samples_s")) for b in (64, 512)}
    if all(v is not None for v in amp_x.values()):
        r8c = min(amp_x.values())
        tg.add("T8c", "hntrain GPU --amp vs fp32 (the lower of batch 64 and 512)", r8c,
               ">= 1.0x at every batch", r8c >= 1.0, ", ".join(f"batch {b}: {v:.2f}x" for b, v in amp_x.items()),
               small=short_run(*((f"the GPU run {k}", wall(gpux.get(k)), MIN_RUN_S)
                                 for k in ("gpux-b64-fp32", "gpux-b64-amp", "gpux-b512-fp32", "gpux-b512-amp"))))
    d21 = next((x for x in t["dps"] if x["name"] == "dp-2x1"), None)
    d12 = next((x for x in t["dps"] if x["name"] == "dp-1x2"), None)
    if d21 and d12:
        r9 = ratio(d21.get("samples_s"), d12.get("samples_s"))
        a21, a12 = d21.get("test_acc"), d12.get("test_acc")
        acc_ok = a21 is not None and a12 is not None and abs(a21 - a12) <= 0.003
        tg.add("T9", "2 MPI ranks x 1 thread vs 1 process x 2 threads (global batch 64)", r9,
               ">= 0.9x, test acc within 0.3 points", None if r9 is None else (r9 >= 0.9 and acc_ok),
               f"samples/s; comm share {pct(d21.get('comm_share'))}; test acc {fmt_acc(a21)} vs {fmt_acc(a12)}",
               small=short_run(("the 2-rank run", wall(d21), MIN_RUN_S), ("the 2-thread run", wall(d12), MIN_RUN_S)))
    an = next((x for x in t["sweeps"] if x["name"] == "sweep-augment-none"), None)
    ac = next((x for x in t["sweeps"] if x["name"] == "sweep-augment-crop4-flip"), None)
    if an and ac:
        sa = ac.get("augment_share")
        tg.add("T10b", f"--augment crop:4,flip: loader CPU time on it, share of an hntrain {model} epoch",
               sa, "< 5%", None if sa is None else sa < 0.05,
               f"augment_s / wall_s; samples/s {ratio(ac.get('samples_s'), an.get('samples_s')) or 0:.2f}x "
               f"of the same epoch without it, data wait {pct(ac.get('data_wait_share'))}",
               small=short_run(("the run with --augment", wall(ac), MIN_RUN_S)))


# ---- the tables -------------------------------------------------------------------

def table_header(machine, data, cfg):
    store = data.get("store_bytes")
    L = [f"## spritefs-bench: {cfg.get('dataset', '?')} ({'quick' if cfg.get('quick') else 'full'} mode)", "",
         f"Machine: {machine.get('cpu', '?')}, {machine.get('cores', '?')} cores, "
         f"{(machine.get('ram_bytes') or 0) / 2**30:.0f} GiB RAM, kernel {machine.get('kernel', '?')}, "
         f"disk {machine.get('disk', {}).get('device', '?')} ({machine.get('disk', {}).get('fs', '?')})"
         + (f", GPU {machine['gpu']}" if machine.get("gpu") else ", no GPU") + ".",
         f"Data: {data.get('files', '?')} {data.get('format', '')} files "
         f"({(data.get('tree_bytes') or 0) / 1e6:.1f} MB), store {(store or 0) / 1e6:.1f} MB. "
         f"Medians of {cfg.get('runs', 1)} run(s); ratios are against the TIFF tree on tmpfs, "
         "measured in the same run."] + command_line(cfg)
    if data.get("pack_s") and data.get("files"):
        found = data.get("found") or data["files"]
        L.append(f"Packing: {found} files into the store"
                 + (f" at {data['tile']} tiles (crop fit)" if data.get("tile") else "")
                 + f" in {data['pack_s']:.1f} s, {found / data['pack_s']:.0f} images/s "
                 "(spritefs-pack, all CPUs)"
                 + (f"; {data['left_out']} of them skipped by the packer and left out of every medium "
                    f"(logs/left-out.txt), {data['files']} read" if data.get("left_out") else "") + ".")
    return L + [""]


def table_ceilings(ceil):
    def bs_note(medium):
        bs = ceil["fio_bs"].get(medium)
        return f" ({bs // 1024} KiB blocks: the file is smaller than 1 MiB)" if bs else ""

    L = ["### Ceilings", "", "| what | MB/s |", "|---|---:|",
         f"| disk: fio sequential 1 MiB, O_DIRECT, {ceil['fio_engine'] or 'io_uring'}, QD16 | "
         f"{fmt(ceil['fio_disk_mb_s'])} |",
         f"| disk: same, on the store file{bs_note('fio-store')} | {fmt(ceil['fio_store_mb_s'])} |",
         f"| disk: same, one pass over the store file (median) | {fmt(ceil['fio_store_pass_mb_s'])} |"]
    if ceil["fio_t2store_mb_s"]:
        L.append(f"| disk: same, on the store packed at 56x56 | {fmt(ceil['fio_t2store_mb_s'])} |")
        L.append(f"| disk: same, one pass over it (median) | {fmt(ceil['fio_t2store_pass_mb_s'])} |")
    L.append(f"| memory: dd bs=4M from a tmpfs file | {fmt(ceil['dd_tmpfs_mb_s'])} |")
    return L + [""]


def table_reads(rows, same, sums):
    L = ["### Reading (no training)", "",
         "| medium | state | raw MB/s | files/s | decoded samples/s | decoder | samples/s vs tmpfs TIFF |",
         "|---|---|---:|---:|---:|---|---:|"]
    for r in rows:
        L.append(f"| {r['medium']} | {r['state']} | {fmt(r.get('mb_s'))} | {fmt(r.get('files_s'))} | "
                 f"{fmt(r.get('samples_s'))} | {r.get('decode', '-')} | {fmt_ratio(r.get('samples_s_x_tmpfs'))} |")
    L += ["", "Same samples on every medium (XXH3 sum of decoded tiles): "
          + ("not measured" if same is None else "yes" if same else "**NO - MISMATCH** " + json.dumps(sums)), ""]
    return L


def table_training(t, cfg):
    runs = t["main"] + ([t["torch"]] if t["torch"] else [])
    if not runs:
        return []
    L = [f"### Training: {cfg.get('model', 'cnn')}, {cfg.get('epochs')} epoch(s), batch 64, seed 1", "",
         "| run | medium | state | device | epoch s | samples/s | compute s/epoch | data wait s/epoch | "
         "wait share | loader CPU s/epoch | loader CPU share | test acc | weights xxh3 | samples/s vs tmpfs |",
         "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|"]
    for x in runs:
        L.append(f"| {x['name']} | {x['medium']} | {x['state']} | {x['device']} | {fmt(x.get('epoch_s'), 2)} | "
                 f"{fmt(x.get('samples_s'))} | {fmt(per_epoch(x, 'compute_s'), 2)} | "
                 f"{fmt(per_epoch(x, 'data_wait_s'), 3)} | {pct(x.get('data_wait_share'))} | "
                 f"{fmt(per_epoch(x, 'loader_cpu_s'), 3)} | {pct(x.get('loader_cpu_share'))} | "
                 f"{fmt_acc(x.get('test_acc'))} | {x.get('weights_xxh3') or x.get('error') or '-'} | "
                 f"{fmt_ratio(x.get('samples_s_x_tmpfs'))} |")
    L.append("")
    if t["mismatch"]:
        L.append("**WEIGHTS MISMATCH: the same seed gave different weights on different media: "
                 + json.dumps(t["mismatch"]) + "**")
    elif t["weights"]:
        L.append("Weights hash identical on every medium (per device): storage changed the time, not the result.")
    return L + [""]


def table_gpu(t):
    runs = list(t["gpux"].values()) + ([t["torch_gpu"]] if t["torch_gpu"] else [])
    if not runs:
        return []
    L = ["### GPU: batch and precision (preloaded)", "",
         "| run | args | samples/s | compute share | test acc | weights xxh3 |", "|---|---|---:|---:|---:|---|"]
    for x in runs:
        L.append(f"| {x['name']} | {x.get('args', '')} | {fmt(x.get('samples_s'))} | "
                 f"{pct(x.get('compute_share'))} | {fmt_acc(x.get('test_acc'))} | "
                 f"{x.get('weights_xxh3') or x.get('error') or '-'} |")
    return L + [""]


def table_sweeps(t):
    if not t["sweeps"]:
        return []
    L = ["### Sweeps (fed by " + t["sweeps"][0]["medium"] + ", 1 epoch)", "",
         "| run | args | samples/s | wait share | augment share | loader CPU share | test acc |",
         "|---|---|---:|---:|---:|---:|---:|"]
    for x in t["sweeps"]:
        L.append(f"| {x['name']} | {x.get('args', '')} | {fmt(x.get('samples_s'))} | "
                 f"{pct(x.get('data_wait_share'))} | {pct(x.get('augment_share'))} | "
                 f"{pct(x.get('loader_cpu_share'))} | {fmt_acc(x.get('test_acc'))} |")
    return L + [""]


def table_dp(t):
    dps = t["dps"]
    if not dps:
        return []
    base = next((x for x in dps if x["name"] == "dp-1x2"), {})
    L = ["### Data-parallel (fed by " + dps[0]["medium"] + ", 1 epoch, global batch 64)", "",
         "| run | args | ranks | samples/s | x 1x2 | compute | data wait | comm | test acc |",
         "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for x in dps:
        L.append(f"| {x['name']} | {x.get('args', '')} | {x.get('nranks', 1)} | {fmt(x.get('samples_s'))} | "
                 f"{fmt_ratio(ratio(x.get('samples_s'), base.get('samples_s')))} | "
                 f"{pct(x.get('compute_share'))} | {pct(x.get('data_wait_share'))} | "
                 f"{pct(x.get('comm_share'))} | {fmt_acc(x.get('test_acc'))} |")
    return L + [""]


def table_targets(targets):
    L = ["### Targets", "", "| # | measure | measured | target | result |", "|---|---|---:|---|---|"]
    for t in targets:
        m = t["measured"]
        ms = "-" if m is None else (f"{100 * m:.2f}%" if t["id"] in ("T5", "T10b") else f"{m:.2f}x")
        res = verdict(t)
        res = "**miss**" if res == "miss" else f"{res} ({t['small']})" if t.get("small") else res
        if t.get("also"):
            ms += f" ({t['also']})"
        L.append(f"| {t['id']} | {t['what']} | {ms} | {t['target']} | {res} |")
    return L + [""]


def table_notes(notes, heading="Notes:"):
    if not notes:
        return []
    return ([heading] if heading == "Notes:" else [heading, ""]) + [f"* {n}" for n in notes] + [""]


def write_report(out, lines):
    """The Markdown on stdout and in OUT/report.md."""
    text = "\n".join(lines)
    print(text)
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write(text + "\n")


def standard(out, recs, machine, data, notes, gnuplot):
    cfg = machine.get("config", {})
    ceil = ceilings(out, recs)
    rows = read_rows(recs)
    same, sums = same_samples(rows)
    t = training(out, recs)
    mem = memory(recs)
    tg = Targets()
    targets_io(tg, recs, rows, ceil, data.get("store_bytes"), cfg, data.get("sheets"))
    tile = data.get("tile_bytes")
    targets_train(tg, recs, t, mem, cfg, tile * data["samples"] if tile and data.get("samples") else None)
    summary = {"ceilings": ceil, "reads": rows,
               "train": [{k: v for k, v in x.items() if k not in ("epochs", "final", "raw")} for x in t["all"]],
               "weights_by_device": t["weights"], "weights_mismatch": t["mismatch"],
               "samples_same": same, "sample_sums": sums, "memory": mem, "targets": list(tg),
               "test_acc": {x["name"]: x.get("test_acc") for x in t["main"]}}
    results = {"machine": machine, "data": data, "notes": notes, "summary": summary, "records": recs,
               "train_logs": {x["name"]: {"epochs": x.get("epochs"), "final": x.get("final")}
                              for x in t["all"] if x.get("epochs") is not None}}
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    write_report(out, table_header(machine, data, cfg) + table_ceilings(ceil) + table_reads(rows, same, sums)
                 + table_training(t, cfg) + table_gpu(t) + table_sweeps(t) + table_dp(t)
                 + table_targets(tg) + table_notes(notes))
    plots.standard(out, rows, t["main"], gnuplot)
    # Last, so that it is the last thing on the terminal, and everything is written.
    if t["mismatch"]:
        print("spritefs-bench: WEIGHTS MISMATCH between media: " + json.dumps(t["mismatch"]), file=sys.stderr)
    if same is False:
        print("spritefs-bench: media delivered different samples: " + json.dumps(sums), file=sys.stderr)
    return 3 if t["mismatch"] or same is False else 0
