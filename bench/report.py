#!/usr/bin/python3
"""report.py - turn one spritefs-bench run into results.json, tables and plots.

spritefs-bench writes what it measured as JSON lines (OUT/raw.jsonl: one
record per measurement, hntrain's own per-epoch logs under OUT/logs) plus
OUT/machine.json and OUT/data.json. This script takes medians over repeated
runs, computes the ratios against tmpfs and the issue targets, checks that
every medium delivered the same samples and trained to the same weights, and
writes OUT/results.json (all raw numbers, machine info, summary), a Markdown
report on stdout (also OUT/report.md), and PNG plots drawn by gnuplot (where
gnuplot is installed; else the data and plot.gp are left for later, and a
note says so). Standard library only, so it runs wherever Debian's python3 is.

Exit status: 0; 3 when the media disagreed (different weights for the same
seed on one device, or different decoded samples), after everything is
written; 1 on an error, 2 on usage.
"""
import json
import os
import shutil
import statistics
import subprocess
import sys

MIB = 1024 * 1024


def load_jsonl(path):
    out = []
    try:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line:
                    try:
                        out.append(json.loads(line))
                    except ValueError:
                        out.append({"kind": "unparsable", "line": line})
    except FileNotFoundError:
        pass
    return out


def load_json(path, default=None):
    try:
        with open(path) as f:
            return json.load(f)
    except (FileNotFoundError, ValueError):
        return default


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def parse_size(s):
    s = str(s).strip()
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    if s and s[-1].upper() in mult:
        return int(float(s[:-1]) * mult[s[-1].upper()])
    return int(float(s))


def fmt(x, nd=0):
    if x is None:
        return "-"
    if isinstance(x, str):
        return x
    if nd == 0:
        return f"{x:,.0f}"
    return f"{x:,.{nd}f}"


def ratio(a, b):
    if a is None or b is None or b == 0:
        return None
    return a / b


def pct(x):
    return "-" if x is None else f"{100 * x:.2f}%"


def fmt_acc(a):
    """hntrain logs accuracy as a fraction; accept a percentage too."""
    if a is None:
        return "-"
    return f"{100 * a:.2f}%" if a <= 1 else f"{a:.2f}%"


def per_epoch(t, k):
    v = t.get(k)
    return None if v is None else v / (t.get("n_epochs") or 1)


def fmt_ratio(r):
    return "-" if r is None else f"{r:.2f}x"


def summarize_train(out_dir, rec):
    """One hntrain run (its JSON-lines log) or a PyTorch peer result."""
    s = {"name": rec.get("name") or rec.get("medium"), "medium": rec["medium"],
         "state": rec["state"], "device": rec.get("device", "cpu"),
         "args": rec.get("args", "")}
    if rec.get("peer") in ("torch", "torch-gpu"):
        r = rec.get("result") or {}
        s.update({"peer": rec["peer"], "samples_s": r.get("samples_per_s", r.get("samples_s")),
                  "test_acc": r.get("test_acc"), "wall_s": r.get("wall_s"),
                  "raw": r})
        return s
    lines = load_jsonl(os.path.join(out_dir, rec["log"]))
    epochs = [l for l in lines if "epoch" in l and not l.get("final")]
    final = next((l for l in lines if l.get("final")), {})
    s["epochs"] = epochs
    s["final"] = final
    if not epochs:
        s["error"] = "no epoch lines in " + rec["log"]
        return s

    def tot(k):
        v = [e.get(k) for e in epochs]
        return sum(v) if all(x is not None for x in v) else None

    wall, comp, wait, n = tot("wall_s"), tot("compute_s"), tot("data_wait_s"), tot("samples")
    comm = sum(e.get("comm_s") or 0 for e in epochs)  # absent before data-parallel runs
    lcpu = tot("loader_cpu_s")  # the loaders' CPU: decode cost even when nothing waits
    aug = tot("augment_s")
    # wall_s is the training pass; evaluation is timed apart (eval_s)
    s.update({"n_epochs": len(epochs), "wall_s": wall, "compute_s": comp,
              "data_wait_s": wait, "samples": n, "eval_s": tot("eval_s"),
              "epoch_s": wall / len(epochs) if wall is not None else None,
              "samples_s": (n / wall) if n and wall else med(
                  [e.get("samples_per_s") for e in epochs]),
              "data_wait_share": (wait / wall) if wait is not None and wall else None,
              "compute_share": (comp / wall) if comp is not None and wall else None,
              "loader_cpu_s": lcpu,
              "augment_share": (aug / wall) if aug is not None and wall else None,
              "loader_cpu_share": (lcpu / wall) if lcpu is not None and wall else None,
              "comm_share": (comm / wall) if wall else None,
              "compute_gflops": (final["flops_per_sample"] * n / comp / 1e9)
              if final.get("flops_per_sample") and n and comp else None,
              "nranks": epochs[-1].get("nranks", 1),
              "test_acc": final.get("test_acc", epochs[-1].get("test_acc")),
              "train_loss": epochs[-1].get("train_loss"),
              "weights_xxh3": final.get("weights_xxh3")})
    return s


def main():
    if len(sys.argv) != 2:
        print("usage: report.py OUT_DIR", file=sys.stderr)
        return 2
    out = sys.argv[1]
    recs = load_jsonl(os.path.join(out, "raw.jsonl"))
    machine = load_json(os.path.join(out, "machine.json"), {})
    data = load_json(os.path.join(out, "data.json"), {})
    try:
        notes = [l.rstrip("\n") for l in open(os.path.join(out, "notes.txt")) if l.strip()]
    except FileNotFoundError:
        notes = []
    cfg = machine.get("config", {})
    store_bytes = data.get("store_bytes")
    gnuplot = shutil.which("gnuplot")
    if not gnuplot and not any("gnuplot" in n for n in notes):
        notes.append("gnuplot not installed: no plots (apt-get install gnuplot-nox; then "
                     "`gnuplot plot.gp` in this folder draws them)")
    if cfg.get("dataset") == "larger":
        return main_larger(out, recs, machine, notes, gnuplot)

    # ---- ceilings
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
    ceilings = {"fio_store_mb_s": med(ceil.get("fio-store", [])),
                "fio_store_pass_mb_s": med(ceil.get("fio-store-pass", [])),
                "fio_t2store_mb_s": med(ceil.get("fio-t2store", [])),
                "fio_t2store_pass_mb_s": med(ceil.get("fio-t2store-pass", [])),
                "fio_disk_mb_s": med(ceil.get("fio-disk", [])),
                "dd_tmpfs_mb_s": med(ceil.get("dd-tmpfs", [])),
                "fio_engine": (ceil.get("fio-disk-engine") or ceil.get("fio-store-engine")
                               or [None])[0],
                # fio's block size where it was not 1 MiB (a store smaller than that)
                "fio_bs": {k[:-3]: v[0] for k, v in ceil.items()
                           if k.endswith("-bs") and v and v[0] != MIB}}

    # ---- reads and decodes, medians per (medium, state)
    groups = {}
    for r in recs:
        if r.get("kind") not in ("read", "decode"):
            continue
        key = (r["medium"], r["state"])
        g = groups.setdefault(key, {"medium": r["medium"], "state": r["state"],
                                    "read": [], "decode": []})
        g[r["kind"]].append(r.get("result") or {})
    def per_pass(x, k):  # --passes N reads everything N times
        v = x.get(k)
        return v // max(1, x.get("passes") or 1) if isinstance(v, int) else v

    rows = []
    for key, g in groups.items():
        row = {"medium": g["medium"], "state": g["state"], "runs": max(len(g["read"]),
                                                                       len(g["decode"]))}
        if g["read"]:
            row["mb_s"] = med([x.get("mb_s") for x in g["read"]])
            row["files_s"] = med([x.get("files_s") for x in g["read"]])
            row["bytes"] = per_pass(g["read"][0], "bytes")
            row["read_wall_s"] = med([x.get("wall_s") for x in g["read"]])
        if g["decode"]:
            row["samples_s"] = med([x.get("samples_s") for x in g["decode"]])
            row["samples"] = per_pass(g["decode"][0], "samples")
            sums = {x.get("sample_sum") for x in g["decode"] if x.get("sample_sum")}
            if sums:
                row["sample_sum"] = sorted(sums)[0] if len(sums) == 1 else "differs:" + ",".join(sorted(sums))
            if g["decode"][0].get("decode"):
                row["decode"] = g["decode"][0]["decode"]
            if g["decode"][0].get("peer"):
                row["decode"] = g["decode"][0]["peer"]
        rows.append(row)
    order = ["tiff-tmpfs", "tiff-ssd", "store-tmpfs", "store-ssd", "batches-tmpfs", "spritefs",
             "spritefs-direct", "spritefs-t2-direct", "spritefs-t2-buffered", "spritefs-npy", "torch-tiff-tmpfs", "torch-tiff-ssd", "torch-spritefs-byclass"]
    rows.sort(key=lambda r: (order.index(r["medium"]) if r["medium"] in order else 99,
                             r["state"] != "warm"))

    def row_of(medium, state):
        return next((r for r in rows if r["medium"] == medium and r["state"] == state), {})

    cold = "cold" if any(r["state"] == "cold" for r in rows) else "nodrop"
    base_read = row_of("tiff-tmpfs", "warm")
    for r in rows:
        r["mb_s_x_tmpfs"] = ratio(r.get("mb_s"), base_read.get("mb_s"))
        r["samples_s_x_tmpfs"] = ratio(r.get("samples_s"), base_read.get("samples_s"))

    # same samples delivered by every medium?
    sums = {r["medium"] + "/" + r["state"]: r.get("sample_sum") for r in rows
            if r.get("sample_sum") and not r["medium"].startswith("torch")}
    distinct = set(sums.values())
    # None: nothing hashed to compare (no decode measured)
    samples_same = (len(distinct) == 1 and not any(str(v).startswith("differs") for v in distinct)
                    ) if sums else None

    # ---- training
    trains = [summarize_train(out, r) for r in recs if r.get("kind") == "train"]
    main_runs = [t for t in trains if not t["name"].startswith(("sweep-", "dp-", "gpux-"))
                 and not t.get("peer")]
    # the GPU at batch 64 and 512, fp32 and --amp (gpux-b<B>-<fp32|amp>), and PyTorch there
    gpux = {t["name"]: t for t in trains if t["name"].startswith("gpux-")}
    torch_gpu = next((t for t in trains if t.get("peer") == "torch-gpu"), None)
    sweeps = [t for t in trains if t["name"].startswith("sweep-")]
    dps = [t for t in trains if t["name"].startswith("dp-")]
    torch_train = next((t for t in trains if t.get("peer") == "torch"), None)
    base_train = next((t for t in main_runs if t["medium"] == "tiff-tmpfs" and t["device"] == "cpu"), {})
    for t in trains:
        peer = next((b for b in main_runs if b["medium"] == "tiff-tmpfs"
                     and b["device"] == t["device"]), base_train)
        t["samples_s_x_tmpfs"] = ratio(t.get("samples_s"), peer.get("samples_s"))
    weights = {}
    for t in main_runs:
        if t.get("weights_xxh3"):
            weights.setdefault(t["device"], {})[t["name"]] = t["weights_xxh3"]
    mismatch = {d: w for d, w in weights.items() if len(set(w.values())) > 1}
    accs = {t["name"]: t.get("test_acc") for t in main_runs}

    # ---- memory
    # The strictest case decides T7: the smallest budget measured (with a data
    # set larger than it, eviction must hold the line).
    mem = [dict(r.get("result") or {}, state=r.get("state")) for r in recs
           if r.get("kind") == "memory"]
    for m in mem:
        m["budget_bytes"] = parse_size(m["budget"]) if m.get("budget") else None
    mem = [m for m in mem if m.get("budget_bytes")]
    budget = min([m["budget_bytes"] for m in mem], default=None)
    tight = [m for m in mem if m["budget_bytes"] == budget]
    rss = max([m.get("rss_bytes", 0) for m in tight], default=0)
    hwm = max([m.get("hwm_bytes", 0) for m in tight], default=0)

    # ---- targets: the figures the project is held to (T1-T8)
    targets = []

    def target(tid, what, measured, goal, ok, how):
        targets.append({"id": tid, "what": what, "measured": measured, "target": goal,
                        "pass": ok, "how": how})

    sw = row_of("spritefs", "warm")
    bt = row_of("batches-tmpfs", "warm")
    r1 = ratio(sw.get("mb_s"), bt.get("mb_s"))
    target("T1", "spritefs warm batch-file reads vs the same bytes on tmpfs", r1, ">= 0.9x",
           None if r1 is None else r1 >= 0.9, "spritefs-readbench raw MB/s, median")
    # T2: a cold pass over the batch files, in store bytes per second, against
    # fio's O_DIRECT reads of the store (time-based: its steady bandwidth; one
    # pass: the same work as the spritefs pass, ramp-up included). Read twice:
    # with O_DIRECT like fio (and hntrain's epoch views), and buffered. In full
    # mode also over the tree packed at 56x56, where the pass is long enough
    # for the steady rate to show.
    t2_bytes = next(((r.get("bytes")) for r in recs if r.get("kind") == "store"
                     and r.get("medium") == "t2-56x56"), None)
    t2_sets = [("spritefs-direct", "spritefs", store_bytes, "fio_store", "")]
    if t2_bytes:
        t2_sets.append(("spritefs-t2-direct", "spritefs-t2-buffered", t2_bytes, "fio_t2store",
                        f", the tree packed at 56x56 ({t2_bytes / 1e6:.0f} MB store)"))
    for direct, buffered, nbytes, fio, where in t2_sets:
        for medium, how in ((direct, "O_DIRECT reads (as fio reads the store)"),
                            (buffered, "buffered reads")):
            wall = row_of(medium, cold).get("read_wall_s")
            steady, one = ceilings[fio + "_mb_s"], ceilings[fio + "_pass_mb_s"]
            if medium == "spritefs-direct" and not wall:
                continue  # an older bench run: buffered only
            t2 = (nbytes / 1e6 / wall) / steady if wall and nbytes and steady else None
            target("T2", f"spritefs cold (fresh mount, caches dropped){where}, {how}, vs fio O_DIRECT seq read of the store, compressed bytes",
                   t2, ">= 0.8x", None if t2 is None else t2 >= 0.8,
                   "store bytes / cold pass wall time over fio 1M QD16 MB/s (time-based)")
            targets[-1]["reads"] = "direct" if "direct" in medium else "buffered"
            targets[-1]["store"] = "56x56" if where else "data"
            if t2 is not None and one:
                targets[-1]["vs_one_pass"] = t2 * steady / one
                targets[-1]["also"] = f"{t2 * steady / one:.2f}x of one fio pass"
    tt = row_of("torch-tiff-tmpfs", "warm")
    dsw = row_of("spritefs", "warm")
    r3 = ratio(dsw.get("samples_s"), tt.get("samples_s"))
    if cfg.get("dataset") == "photos":
        target("T10", "photo JPEG folder: warm spritefs decoded samples/s vs torchvision ImageFolder + "
               "DataLoader with Resize+CenterCrop, 2 workers, over the same JPEG tree",
               r3, ">= 100x", None if r3 is None else r3 >= 100,
               "spritefs-readbench --decode batch vs torch_loader.py --resize (batch 64)")
    else:
        target("T3", "decoded samples/s to a reader: spritefs batch files vs PyTorch DataLoader over TIFF on tmpfs",
               r3, ">= 100x", None if r3 is None else r3 >= 100,
               "spritefs-readbench --decode batch vs torch_loader.py (2 workers, batch 64)")
    hs = next((t for t in main_runs if t["medium"] == "spritefs" and t["device"] == "cpu"), None) \
        or next((t for t in main_runs if t["device"] == "cpu"), None)
    r4 = ratio(hs.get("samples_s") if hs else None,
               torch_train.get("samples_s") if torch_train else None)
    target("T4", f"hntrain CPU vs PyTorch CPU, {cfg.get('model', 'cnn')}, same batch and threads", r4,
           ">= 2x", None if r4 is None else r4 >= 2, "samples/s over the epochs")
    peak = next(((r.get("result") or {}).get("gflops") for r in recs if r.get("kind") == "gemm"),
                None)
    g4 = hs.get("compute_gflops") if hs else None
    r4b = ratio(g4, peak)
    target("T4b", f"hntrain CPU {cfg.get('model', 'cnn')} training FLOP/s vs OpenBLAS large-SGEMM "
           "FLOP/s on the same cores", r4b, ">= 0.7x", None if r4b is None else r4b >= 0.7,
           f"{g4 or 0:.1f} GFLOP/s over the compute time (matrix products, forward + backward) vs "
           f"hntrain --gemm-peak {peak or 0:.1f}")
    share = hs.get("data_wait_share") if hs and hs["medium"] == "spritefs" else None
    target("T5", "data-wait share of an hntrain CPU epoch fed by spritefs",
           share, "< 1%", None if share is None else share < 0.01,
           "data_wait_s / wall_s from hntrain's log")
    r7 = (hwm / (budget + 64 * MIB)) if budget and hwm else None
    target("T7", "spritefs resident memory (peak VmHWM) vs cache budget + 64 MiB", r7,
           "<= 1.0x", None if r7 is None else r7 <= 1.0,
           f"VmHWM {hwm / MIB:.0f} MiB, budget {budget // MIB if budget else '-'} MiB")
    gs = next((t for t in main_runs if t["medium"] == "spritefs" and t["device"] == "gpu"), None)
    gp = next((t for t in main_runs if t["medium"] == "preload" and t["device"] == "gpu"), None)
    if gs and gp:
        r8 = ratio(gs.get("samples_s"), gp.get("samples_s"))
        target("T8", "hntrain GPU fed by spritefs vs preloaded in RAM", r8, ">= 0.95x",
               None if r8 is None else r8 >= 0.95, "samples/s")
    f512 = gpux.get("gpux-b512-fp32")
    if f512 and torch_gpu:
        r8b = ratio(f512.get("samples_s"), torch_gpu.get("samples_s"))
        target("T8b", "hntrain GPU fp32 (deterministic) vs PyTorch eager GPU, batch 512", r8b,
               ">= 2x", None if r8b is None else r8b >= 2,
               f"samples/s; PyTorch {(torch_gpu.get('raw') or {}).get('torch', '?')}")
    amp_x = {b: ratio((gpux.get(f"gpux-b{b}-amp") or {}).get("samples_s"),
                      (gpux.get(f"gpux-b{b}-fp32") or {}).get("samples_s")) for b in (64, 512)}
    if all(v is not None for v in amp_x.values()):
        r8c = min(amp_x.values())
        target("T8c", "hntrain GPU --amp vs fp32 (the lower of batch 64 and 512)", r8c,
               ">= 1.0x at every batch", r8c >= 1.0,
               ", ".join(f"batch {b}: {v:.2f}x" for b, v in amp_x.items()))
    d21 = next((t for t in dps if t["name"] == "dp-2x1"), None)
    d12 = next((t for t in dps if t["name"] == "dp-1x2"), None)
    if d21 and d12:
        r9 = ratio(d21.get("samples_s"), d12.get("samples_s"))
        a21, a12 = d21.get("test_acc"), d12.get("test_acc")
        acc_ok = a21 is not None and a12 is not None and abs(a21 - a12) <= 0.003
        target("T9", "2 MPI ranks x 1 thread vs 1 process x 2 threads (global batch 64)", r9,
               ">= 0.9x, test acc within 0.3 points",
               None if r9 is None else (r9 >= 0.9 and acc_ok),
               f"samples/s; comm share {pct(d21.get('comm_share'))}; "
               f"test acc {fmt_acc(a21)} vs {fmt_acc(a12)}")

    an = next((t for t in sweeps if t["name"] == "sweep-augment-none"), None)
    ac = next((t for t in sweeps if t["name"] == "sweep-augment-crop4-flip"), None)
    if an and ac:
        sa = ac.get("augment_share")
        target("T10b", f"--augment crop:4,flip: loader CPU time on it, share of an hntrain {cfg.get('model', 'cnn')} epoch",
               sa, "< 5%", None if sa is None else sa < 0.05,
               f"augment_s / wall_s; samples/s {ratio(ac.get('samples_s'), an.get('samples_s')) or 0:.2f}x "
               f"of the same epoch without it, data wait {pct(ac.get('data_wait_share'))}")
    summary = {"ceilings": ceilings, "reads": rows, "train": [
        {k: v for k, v in t.items() if k not in ("epochs", "final", "raw")} for t in trains],
        "weights_by_device": weights, "weights_mismatch": mismatch,
        "samples_same": samples_same, "sample_sums": sums,
        "memory": {"rss_bytes": rss, "hwm_bytes": hwm, "budget_bytes": budget,
                   "all": mem},
        "targets": targets, "test_acc": accs}
    results = {"machine": machine, "data": data, "notes": notes, "summary": summary,
               "records": recs, "train_logs": {t["name"]: {"epochs": t.get("epochs"),
                                                           "final": t.get("final")}
                                               for t in trains if t.get("epochs") is not None}}
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(results, f, indent=1)

    # ---- Markdown
    L = []
    mode = "quick" if cfg.get("quick") else "full"
    L.append(f"## spritefs-bench: {cfg.get('dataset', '?')} ({mode} mode)")
    L.append("")
    L.append(f"Machine: {machine.get('cpu', '?')}, {machine.get('cores', '?')} cores, "
             f"{(machine.get('ram_bytes') or 0) / 2**30:.0f} GiB RAM, kernel {machine.get('kernel', '?')}, "
             f"disk {machine.get('disk', {}).get('device', '?')} ({machine.get('disk', {}).get('fs', '?')})"
             + (f", GPU {machine['gpu']}" if machine.get("gpu") else ", no GPU") + ".")
    L.append(f"Data: {data.get('files', '?')} {data.get('format', '')} files "
             f"({(data.get('tree_bytes') or 0) / 1e6:.1f} MB), store {(store_bytes or 0) / 1e6:.1f} MB. "
             f"Medians of {cfg.get('runs', 1)} run(s); ratios are against the TIFF tree on tmpfs, "
             f"measured in the same run.")
    if data.get("pack_s") and data.get("files"):
        L.append(f"Packing: {data['files']} files into the store"
                 + (f" at {data['tile']} tiles (crop fit)" if data.get("tile") else "")
                 + f" in {data['pack_s']:.1f} s, {data['files'] / data['pack_s']:.0f} images/s "
                 f"(spritefs-pack, all CPUs).")
    L.append("")
    L.append("### Ceilings")
    L.append("")
    L.append("| what | MB/s |")
    L.append("|---|---:|")
    L.append(f"| disk: fio sequential 1 MiB, O_DIRECT, {ceilings['fio_engine'] or 'io_uring'}, QD16 | {fmt(ceilings['fio_disk_mb_s'])} |")
    def bs_note(medium):
        bs = ceilings["fio_bs"].get(medium)
        return f" ({bs // 1024} KiB blocks: the file is smaller than 1 MiB)" if bs else ""

    L.append(f"| disk: same, on the store file{bs_note('fio-store')} | {fmt(ceilings['fio_store_mb_s'])} |")
    L.append(f"| disk: same, one pass over the store file (median) | {fmt(ceilings['fio_store_pass_mb_s'])} |")
    if ceilings["fio_t2store_mb_s"]:
        L.append(f"| disk: same, on the store packed at 56x56 | {fmt(ceilings['fio_t2store_mb_s'])} |")
        L.append(f"| disk: same, one pass over it (median) | {fmt(ceilings['fio_t2store_pass_mb_s'])} |")
    L.append(f"| memory: dd bs=4M from a tmpfs file | {fmt(ceilings['dd_tmpfs_mb_s'])} |")
    L.append("")
    L.append("### Reading (no training)")
    L.append("")
    L.append("| medium | state | raw MB/s | files/s | decoded samples/s | decoder | samples/s vs tmpfs TIFF |")
    L.append("|---|---|---:|---:|---:|---|---:|")
    for r in rows:
        L.append(f"| {r['medium']} | {r['state']} | {fmt(r.get('mb_s'))} | {fmt(r.get('files_s'))} | "
                 f"{fmt(r.get('samples_s'))} | {r.get('decode', '-')} | {fmt_ratio(r.get('samples_s_x_tmpfs'))} |")
    L.append("")
    L.append("Same samples on every medium (XXH3 sum of decoded tiles): "
             + ("not measured" if samples_same is None else
                "yes" if samples_same else "**NO - MISMATCH** " + json.dumps(sums)))
    L.append("")
    if main_runs or torch_train:
        L.append(f"### Training: {cfg.get('model', 'cnn')}, {cfg.get('epochs')} epoch(s), batch 64, seed 1")
        L.append("")
        L.append("| run | medium | state | device | epoch s | samples/s | compute s/epoch | data wait s/epoch | wait share | loader CPU s/epoch | loader CPU share | test acc | weights xxh3 | samples/s vs tmpfs |")
        L.append("|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|")
        for t in main_runs + ([torch_train] if torch_train else []):
            acc = t.get("test_acc")
            L.append(f"| {t['name']} | {t['medium']} | {t['state']} | {t['device']} | {fmt(t.get('epoch_s'), 2)} | "
                     f"{fmt(t.get('samples_s'))} | {fmt(per_epoch(t, 'compute_s'), 2)} | {fmt(per_epoch(t, 'data_wait_s'), 3)} | "
                     f"{pct(t.get('data_wait_share'))} | {fmt(per_epoch(t, 'loader_cpu_s'), 3)} | "
                     f"{pct(t.get('loader_cpu_share'))} | "
                     f"{fmt_acc(acc)} | "
                     f"{t.get('weights_xxh3') or t.get('error') or '-'} | {fmt_ratio(t.get('samples_s_x_tmpfs'))} |")
        L.append("")
        if mismatch:
            L.append("**WEIGHTS MISMATCH: the same seed gave different weights on different media: "
                     + json.dumps(mismatch) + "**")
        elif weights:
            L.append("Weights hash identical on every medium (per device): storage changed the time, not the result.")
        L.append("")
    if gpux or torch_gpu:
        L.append("### GPU: batch and precision (preloaded)")
        L.append("")
        L.append("| run | args | samples/s | compute share | test acc | weights xxh3 |")
        L.append("|---|---|---:|---:|---:|---|")
        for t in list(gpux.values()) + ([torch_gpu] if torch_gpu else []):
            L.append(f"| {t['name']} | {t.get('args', '')} | {fmt(t.get('samples_s'))} | "
                     f"{pct(t.get('compute_share'))} | {fmt_acc(t.get('test_acc'))} | "
                     f"{t.get('weights_xxh3') or t.get('error') or '-'} |")
        L.append("")
    if sweeps:
        L.append("### Sweeps (fed by " + sweeps[0]["medium"] + ", 1 epoch)")
        L.append("")
        L.append("| run | args | samples/s | wait share | augment share | loader CPU share | test acc |")
        L.append("|---|---|---:|---:|---:|---:|---:|")
        for t in sweeps:
            acc = t.get("test_acc")
            L.append(f"| {t['name']} | {t.get('args', '')} | {fmt(t.get('samples_s'))} | "
                     f"{pct(t.get('data_wait_share'))} | {pct(t.get('augment_share'))} | "
                     f"{pct(t.get('loader_cpu_share'))} | "
                     f"{fmt_acc(acc)} |")
        L.append("")
    if dps:
        base = next((t for t in dps if t["name"] == "dp-1x2"), {})
        L.append("### Data-parallel (fed by " + dps[0]["medium"] + ", 1 epoch, global batch 64)")
        L.append("")
        L.append("| run | args | ranks | samples/s | x 1x2 | compute | data wait | comm | test acc |")
        L.append("|---|---|---:|---:|---:|---:|---:|---:|---:|")
        for t in dps:
            L.append(f"| {t['name']} | {t.get('args', '')} | {t.get('nranks', 1)} | "
                     f"{fmt(t.get('samples_s'))} | "
                     f"{fmt_ratio(ratio(t.get('samples_s'), base.get('samples_s')))} | "
                     f"{pct(t.get('compute_share'))} | {pct(t.get('data_wait_share'))} | "
                     f"{pct(t.get('comm_share'))} | {fmt_acc(t.get('test_acc'))} |")
        L.append("")
    L.append("### Targets")
    L.append("")
    L.append("| # | measure | measured | target | result |")
    L.append("|---|---|---:|---|---|")
    for t in targets:
        m = t["measured"]
        if m is None:
            ms = "-"
        elif t["id"] in ("T5", "T10b"):
            ms = f"{100 * m:.2f}%"
        else:
            ms = f"{m:.2f}x"
        res = "n/a" if t["pass"] is None else ("pass" if t["pass"] else "**miss**")
        if t.get("also"):
            ms += f" ({t['also']})"
        L.append(f"| {t['id']} | {t['what']} | {ms} | {t['target']} | {res} |")
    L.append("")
    if notes:
        L.append("Notes:")
        for n in notes:
            L.append(f"* {n}")
        L.append("")
    text = "\n".join(L)
    print(text)
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write(text + "\n")
    plots(out, rows, main_runs, gnuplot)
    # Last, so that it is the last thing on the terminal, and everything is written.
    if mismatch:
        print("spritefs-bench: WEIGHTS MISMATCH between media: " + json.dumps(mismatch),
              file=sys.stderr)
    if samples_same is False:
        print("spritefs-bench: media delivered different samples: " + json.dumps(sums),
              file=sys.stderr)
    return 3 if mismatch or samples_same is False else 0


def plots(out, rows, runs, gnuplot):
    """throughput.png (raw MB/s and decoded samples/s per medium) and
    epoch_split.png (per training run: the training pass split into compute,
    data wait and the rest, and the evaluation on top). The data files and
    plot.gp are written even without gnuplot, to be drawn later."""
    def q(s):
        return '"' + s.replace('"', "'") + '"'

    with open(os.path.join(out, "throughput.dat"), "w") as f:
        f.write("# medium raw_MB_s samples_s\n")
        for r in rows:
            f.write(f"{q(r['medium'] + ' ' + r['state'])} {r.get('mb_s') or 0:.3f} {r.get('samples_s') or 0:.3f}\n")
    nsplit = 0
    with open(os.path.join(out, "epoch_split.dat"), "w") as f:
        f.write("# run compute_s data_wait_s rest_of_pass_s eval_s (per epoch)\n")
        for t in runs:
            if t.get("compute_s") is None or t.get("epoch_s") is None:
                continue
            n = t.get("n_epochs") or 1
            c, w = t["compute_s"] / n, (t.get("data_wait_s") or 0) / n
            rest = max(0.0, t["epoch_s"] - c - w)
            ev = (t.get("eval_s") or 0) / n
            f.write(f"{q(t['name'])} {c:.6f} {w:.6f} {rest:.6f} {ev:.6f}\n")
            nsplit += 1
    term = "pngcairo font 'Sans,10'"
    if gnuplot and subprocess.run([gnuplot, "-e", "set terminal pngcairo"],
                                  capture_output=True).returncode != 0:
        term = "png"
    # gnuplot stops at a plot with no valid point: only panels with data are drawn
    panels = [(col, title, color) for col, key, title, color in (
        (2, "mb_s", "raw read MB/s", "#4472c4"),
        (3, "samples_s", "decoded samples/s delivered to a reader", "#ed7d31"))
        if any((r.get(key) or 0) > 0 for r in rows)]
    # x labels stand upright, ending at their bar: long names (spritefs-small-cache
    # second) take room below the plot, never past its right edge.
    gp = f"""# generated by spritefs-bench (report.py)
set style data histograms
set style fill solid 0.8 border -1
set boxwidth 0.8
set grid ytics
set xtics rotate by 90 right nomirror
"""
    if panels:
        gp += f"""set terminal {term} size 1100,{500 * len(panels)} noenhanced
set key off
set output 'throughput.png'
set multiplot layout {len(panels)},1 title 'spritefs-bench: throughput per medium (same data)'
set logscale y
set yrange [1:*]
"""
        for col, title, color in panels:
            gp += f"""set title '{title}'
plot 'throughput.dat' using (${col} > 0 ? ${col} : 1/0):xtic(1) linecolor rgb '{color}'
"""
        gp += "unset multiplot\nunset logscale y\n"
    if nsplit:
        gp += f"""set terminal {term} size 1100,800 noenhanced
set output 'epoch_split.png'
set yrange [0:*]
set style histogram rowstacked
set key outside right top
set title 'hntrain epoch: training pass (compute, data wait, rest) and evaluation'
set ylabel 'seconds per epoch'
plot 'epoch_split.dat' using 2:xtic(1) title 'compute' linecolor rgb '#4472c4', \\
     '' using 3 title 'data wait' linecolor rgb '#c00000', \\
     '' using 4 title 'rest of the training pass' linecolor rgb '#a5a5a5', \\
     '' using 5 title 'evaluation (test split)' linecolor rgb '#70ad47'
"""
    with open(os.path.join(out, "plot.gp"), "w") as f:
        f.write(gp)
    if not gnuplot:
        print("report.py: gnuplot not installed: throughput.png and epoch_split.png not drawn "
              "(plot.gp and the .dat files are in " + out + ")", file=sys.stderr)
        return
    try:
        r = subprocess.run([gnuplot, "plot.gp"], cwd=out, capture_output=True, text=True)
    except OSError as e:
        print(f"report.py: cannot run gnuplot: {e}", file=sys.stderr)
        return
    if r.returncode != 0:
        print("report.py: gnuplot failed: " + r.stderr.strip(), file=sys.stderr)


# ---- larger than memory (spritefs-bench --dataset larger) -------------------

def fio_mb_s(res):
    """Read bandwidth, MB/s, of a fio --output-format=json result."""
    try:
        return res["jobs"][0]["read"]["bw_bytes"] / 1e6
    except (KeyError, IndexError, TypeError):
        return None


def larger_epoch(r):
    """One cold epoch over the views: the reader's result and stats.json's fields."""
    res, st = r.get("result") or {}, r.get("stats") or {}
    ep = st.get("epoch") or {}
    wall = res.get("wall_s")
    shape = res.get("shape") or [224, 224, 1]
    tile = shape[0] * shape[1] * shape[2] or 224 * 224
    tiles = (res.get("samples") or 0) * tile
    amp = ep.get("read_amplification")
    views = r.get("views_limit") or 0
    if views and ep.get("batches") and ep.get("stored_bytes") and res.get("files"):
        # the first views only: over what they need, taken as their share of the epoch
        need = ep["stored_bytes"] * res["files"] / ep["batches"]
        amp = ep.get("store_bytes_read", 0) / need
    return {"cache": r.get("cache"), "budget_bytes": st.get("cache_budget"),
            "views_limit": views,
            "working_set": st.get("working_set"), "wall_s": wall,
            "samples": res.get("samples"), "samples_s": res.get("samples_s"),
            "tile_bytes": tile,
            "view_mb_s": res.get("mb_s"),
            "tiles_mb_s": tiles / 1e6 / wall if wall else None,
            "read_amplification": amp,
            "store_bytes_read": ep.get("store_bytes_read"),
            "stored_bytes": ep.get("stored_bytes"),
            "view_bytes": res.get("bytes"),
            "decode_s": st.get("decode_s"), "daemon_cpu_s": r.get("daemon_cpu_s"),
            "sheets_decoded": st.get("sheets_decoded"), "rss": st.get("rss"),
            "errors": res.get("errors")}


def main_larger(out, recs, machine, notes, gnuplot):
    cfg = machine.get("config", {})
    store = next((r.get("bytes") for r in recs if r.get("kind") == "store"), None)
    fio = next((fio_mb_s(r.get("result")) for r in recs
                if r.get("kind") == "ceiling" and r.get("medium") == "fio-store-larger"), None)
    lz4r = next((r for r in recs if r.get("kind") == "larger-lz4"), None)
    lz4 = (lz4r.get("result") or {}).get("mb_s") if lz4r else None
    workers = lz4r.get("workers") if lz4r else None
    epochs = [larger_epoch(r) for r in recs if r.get("kind") == "larger-epoch"]
    main_ep = next((e for r, e in zip([r for r in recs if r.get("kind") == "larger-epoch"],
                                      epochs) if r.get("tag") == "main"), None)
    sweep = sorted([e for r, e in zip([r for r in recs if r.get("kind") == "larger-epoch"],
                                      epochs) if r.get("tag") == "sweep"],
                   key=lambda e: e.get("budget_bytes") or 0)
    # compression ratio of the train split: what a view delivers over what it needs from the store
    ratio_c = None
    if main_ep and main_ep.get("stored_bytes") and main_ep.get("samples"):
        ratio_c = main_ep["samples"] * main_ep["tile_bytes"] / main_ep["stored_bytes"]
    disk_bound = fio * ratio_c if fio and ratio_c else None
    dec_bound = lz4 * workers if lz4 and workers else None
    bounds = [b for b in (disk_bound, dec_bound) if b]
    bound = min(bounds) if bounds else None
    bound_by = None if not bound else ("disk" if bound == disk_bound else "decode")
    cold_ratio = ratio(main_ep.get("tiles_mb_s"), bound) if main_ep else None
    trains = {r["medium"]: summarize_train(out, r) for r in recs if r.get("kind") == "larger-train"}
    tm, tp = trains.get("mount"), trains.get("preload")
    same = None
    if tm and tp and tm.get("weights_xxh3") and tp.get("weights_xxh3"):
        same = tm["weights_xxh3"] == tp["weights_xxh3"]
    budget = main_ep.get("budget_bytes") if main_ep else None
    whole = main_ep.get("view_bytes") if main_ep else None
    summary = {
        "store_bytes": store, "compression_ratio": ratio_c,
        "fio_store_mb_s": fio, "lz4_mb_s_per_thread": lz4, "decode_workers": workers,
        "bound_tiles_mb_s": bound, "bound_by": bound_by, "disk_bound_tiles_mb_s": disk_bound,
        "decode_bound_tiles_mb_s": dec_bound, "cold_epoch": main_ep,
        "cold_vs_bound": cold_ratio,
        "decoded_over_budget": (main_ep["samples"] * main_ep["tile_bytes"] / budget)
        if main_ep and budget and main_ep.get("samples") else None,
        "train": {k: {x: y for x, y in v.items() if x not in ("epochs", "final", "raw")}
                  for k, v in trains.items()},
        "samples_s_vs_preload": ratio(tm.get("samples_s"), tp.get("samples_s"))
        if tm and tp else None,
        "weights_same": same, "sweep": sweep}
    results = {"machine": machine, "notes": notes, "summary": summary, "records": recs}
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(results, f, indent=1)

    L = []
    mode = "quick" if cfg.get("quick") else "full"
    L.append(f"## spritefs-bench: larger than memory ({mode} mode)")
    L.append("")
    L.append(f"Machine: {machine.get('cpu', '?')}, {machine.get('cores', '?')} cores, "
             f"{(machine.get('ram_bytes') or 0) / 2**30:.0f} GiB RAM, disk "
             f"{machine.get('disk', {}).get('device', '?')} ({machine.get('disk', {}).get('fs', '?')}).")
    dec = main_ep["samples"] * main_ep["tile_bytes"] if main_ep and main_ep.get("samples") else None
    L.append(f"Data: Fashion-MNIST at 224x224x1, store {fmt((store or 0) / 1e6)} MB, train split "
             f"{fmt((dec or 0) / 1e6)} MB decoded, -o cache={main_ep.get('cache') if main_ep else '?'} "
             f"(decoded train split {fmt_ratio(summary['decoded_over_budget'])} the budget, working set "
             f"{fmt(((main_ep or {}).get('working_set') or 0) / 2**20)} MiB), every other option default.")
    L.append("")
    L.append("| what | value |")
    L.append("|---|---:|")
    rows = [
        ("read amplification of a cold epoch (store bytes read / bytes it needs)",
         fmt((main_ep or {}).get("read_amplification"), 3)),
        ("cold epoch: decoded tiles MB/s (O_DIRECT views)", fmt((main_ep or {}).get("tiles_mb_s"))),
        ("fio O_DIRECT 1 MiB QD16 on the store, MB/s", fmt(fio)),
        ("compression ratio (train split, decoded / stored)", fmt(ratio_c, 2)),
        ("lz4 decode, one thread (checksum + lz4 + checks), MB/s decoded", fmt(lz4)),
        ("decode workers", fmt(workers)),
        (f"bound min(fio x ratio, lz4 x workers), MB/s ({bound_by or '-'})", fmt(bound)),
        ("cold epoch vs bound", fmt_ratio(cold_ratio)),
        ("daemon CPU time / cold epoch wall", fmt_ratio(
            ratio((main_ep or {}).get("daemon_cpu_s"), (main_ep or {}).get("wall_s")))),
        ("daemon decode time / cold epoch wall", fmt_ratio(
            ratio((main_ep or {}).get("decode_s"), (main_ep or {}).get("wall_s")))),
    ]
    for name, t in (("mount", tm), ("preload", tp)):
        if t:
            rows.append((f"hntrain {cfg.get('model', '')} samples/s, {name}", fmt(t.get("samples_s"))))
            rows.append((f"hntrain data-wait share, {name}", pct(t.get("data_wait_share"))))
    rows.append(("hntrain samples/s, mount vs --preload", fmt_ratio(summary["samples_s_vs_preload"])))
    rows.append(("same weights hash (mount, --preload)",
                 "-" if same is None else ("yes" if same else "**NO: MISMATCH**")))
    for a, b in rows:
        L.append(f"| {a} | {b} |")
    L.append("")
    if sweep:
        L.append("### Cache budget sweep (one cold epoch each)")
        L.append("")
        L.append("| budget MiB | / working set | decoded tiles MB/s | read amplification |")
        L.append("|---:|---:|---:|---:|")
        for e in sweep:
            part = f" (first {e['views_limit']} views)" if e.get("views_limit") else ""
            L.append(f"| {fmt((e.get('budget_bytes') or 0) / 2**20, 1)}{part} | "
                     f"{fmt_ratio(ratio(e.get('budget_bytes'), e.get('working_set')))} | "
                     f"{fmt(e.get('tiles_mb_s'))} | {fmt(e.get('read_amplification'), 3)} |")
        L.append("")
    if notes:
        L.append("### Notes")
        L.append("")
        for n in notes:
            L.append(f"* {n}")
        L.append("")
    text = "\n".join(L)
    print(text)
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write(text + "\n")
    with open(os.path.join(out, "larger.dat"), "w") as f:
        f.write("# budget_MiB tiles_MB_s read_amplification\n")
        for e in sweep:
            if e.get("budget_bytes") and e.get("tiles_mb_s") is not None:
                f.write(f"{e['budget_bytes'] / 2**20:.3f} {e['tiles_mb_s']:.3f} "
                        f"{e.get('read_amplification') or 0:.4f}\n")
    ws = (main_ep or {}).get("working_set")
    gp = f"""# generated by spritefs-bench (report.py)
set terminal pngcairo font 'Sans,10' size 900,500
set output 'larger.png'
set title 'Cold epoch over the views against the cache budget'
set xlabel 'cache budget, MiB (log)'
set logscale x
set ylabel 'decoded tiles MB/s'
set y2label 'read amplification (log)'
set logscale y2
set yrange [0:*]
set y2range [0.9:*]
set ytics nomirror
set y2tics
set key top left
{f"set arrow from {ws / 2**20:.3f}, graph 0 to {ws / 2**20:.3f}, graph 1 nohead dt 2" if ws else ""}
plot 'larger.dat' using 1:2 with linespoints lw 2 title 'decoded tiles MB/s', \\
     '' using 1:3 axes x1y2 with linespoints lw 2 title 'read amplification'
"""
    with open(os.path.join(out, "larger.gp"), "w") as f:
        f.write(gp)
    if gnuplot and len(sweep) >= 2:
        r = subprocess.run([gnuplot, "larger.gp"], cwd=out, capture_output=True, text=True)
        if r.returncode != 0:
            print("report.py: gnuplot failed: " + r.stderr.strip(), file=sys.stderr)
    if same is False:
        print("spritefs-bench: WEIGHTS MISMATCH between the mount and --preload", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
