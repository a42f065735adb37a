"""report_larger.py - the report of `spritefs-bench --dataset larger`: one cold
epoch over the views of a store several times the cache budget against its
bound (the smaller of fio x compression ratio and lz4 x decode workers),
hntrain on the mount against --preload, and the cache budget sweep.
"""
import json
import os
import sys

from . import plots
from .report import table_notes, write_report
from .rutil import command_line, fmt, fmt_ratio, pct, ratio, summarize_train


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


def summarize(out, recs):
    """The summary of results.json: the bound, the cold epoch, hntrain, the sweep."""
    store = next((r.get("bytes") for r in recs if r.get("kind") == "store"), None)
    fio = next((fio_mb_s(r.get("result")) for r in recs
                if r.get("kind") == "ceiling" and r.get("medium") == "fio-store-larger"), None)
    lz4r = next((r for r in recs if r.get("kind") == "larger-lz4"), None)
    lz4 = (lz4r.get("result") or {}).get("mb_s") if lz4r else None
    workers = lz4r.get("workers") if lz4r else None
    eps = [r for r in recs if r.get("kind") == "larger-epoch"]
    main_ep = next((larger_epoch(r) for r in eps if r.get("tag") == "main"), None)
    sweep = sorted([larger_epoch(r) for r in eps if r.get("tag") == "sweep"],
                   key=lambda e: e.get("budget_bytes") or 0)
    # compression ratio of the train split: what a view delivers over what it needs from the store
    ratio_c = None
    if main_ep and main_ep.get("stored_bytes") and main_ep.get("samples"):
        ratio_c = main_ep["samples"] * main_ep["tile_bytes"] / main_ep["stored_bytes"]
    disk_bound = fio * ratio_c if fio and ratio_c else None
    dec_bound = lz4 * workers if lz4 and workers else None
    bounds = [b for b in (disk_bound, dec_bound) if b]
    bound = min(bounds) if bounds else None
    trains = {r["medium"]: summarize_train(out, r) for r in recs if r.get("kind") == "larger-train"}
    tm, tp = trains.get("mount"), trains.get("preload")
    same = None
    if tm and tp and tm.get("weights_xxh3") and tp.get("weights_xxh3"):
        same = tm["weights_xxh3"] == tp["weights_xxh3"]
    budget = main_ep.get("budget_bytes") if main_ep else None
    return {
        "store_bytes": store, "compression_ratio": ratio_c,
        "fio_store_mb_s": fio, "lz4_mb_s_per_thread": lz4, "decode_workers": workers,
        "bound_tiles_mb_s": bound,
        "bound_by": None if not bound else ("disk" if bound == disk_bound else "decode"),
        "disk_bound_tiles_mb_s": disk_bound, "decode_bound_tiles_mb_s": dec_bound,
        "cold_epoch": main_ep,
        "cold_vs_bound": ratio(main_ep.get("tiles_mb_s"), bound) if main_ep else None,
        "decoded_over_budget": (main_ep["samples"] * main_ep["tile_bytes"] / budget)
        if main_ep and budget and main_ep.get("samples") else None,
        "train": {k: {x: y for x, y in v.items() if x not in ("epochs", "final", "raw")}
                  for k, v in trains.items()},
        "samples_s_vs_preload": ratio(tm.get("samples_s"), tp.get("samples_s")) if tm and tp else None,
        "weights_same": same, "sweep": sweep}


def table_main(s, machine, cfg):
    ep = s["cold_epoch"] or {}
    store = s["store_bytes"]
    dec = ep["samples"] * ep["tile_bytes"] if ep.get("samples") else None
    L = [f"## spritefs-bench: larger than memory ({'quick' if cfg.get('quick') else 'full'} mode)", "",
         f"Machine: {machine.get('cpu', '?')}, {machine.get('cores', '?')} cores, "
         f"{(machine.get('ram_bytes') or 0) / 2**30:.0f} GiB RAM, disk "
         f"{machine.get('disk', {}).get('device', '?')} ({machine.get('disk', {}).get('fs', '?')}).",
         f"Data: Fashion-MNIST at 224x224x1, store {fmt((store or 0) / 1e6)} MB, train split "
         f"{fmt((dec or 0) / 1e6)} MB decoded, -o cache={ep.get('cache', '?')} "
         f"(decoded train split {fmt_ratio(s['decoded_over_budget'])} the budget, working set "
         f"{fmt((ep.get('working_set') or 0) / 2**20)} MiB), every other option default."] + command_line(cfg) + ["",
         "| what | value |", "|---|---:|"]
    rows = [
        ("read amplification of a cold epoch (store bytes read / bytes it needs)",
         fmt(ep.get("read_amplification"), 3)),
        ("cold epoch: decoded tiles MB/s (O_DIRECT views)", fmt(ep.get("tiles_mb_s"))),
        ("fio O_DIRECT 1 MiB QD16 on the store, MB/s", fmt(s["fio_store_mb_s"])),
        ("compression ratio (train split, decoded / stored)", fmt(s["compression_ratio"], 2)),
        ("lz4 decode, one thread (checksum + lz4 + checks), MB/s decoded", fmt(s["lz4_mb_s_per_thread"])),
        ("decode workers", fmt(s["decode_workers"])),
        (f"bound min(fio x ratio, lz4 x workers), MB/s ({s['bound_by'] or '-'})", fmt(s["bound_tiles_mb_s"])),
        ("cold epoch vs bound", fmt_ratio(s["cold_vs_bound"])),
        ("daemon CPU time / cold epoch wall", fmt_ratio(ratio(ep.get("daemon_cpu_s"), ep.get("wall_s")))),
        ("daemon decode time / cold epoch wall", fmt_ratio(ratio(ep.get("decode_s"), ep.get("wall_s")))),
    ]
    for name in ("mount", "preload"):
        t = s["train"].get(name)
        if t:
            rows.append((f"hntrain {cfg.get('model', '')} samples/s, {name}", fmt(t.get("samples_s"))))
            rows.append((f"hntrain data-wait share, {name}", pct(t.get("data_wait_share"))))
    rows.append(("hntrain samples/s, mount vs --preload", fmt_ratio(s["samples_s_vs_preload"])))
    same = s["weights_same"]
    rows.append(("same weights hash (mount, --preload)",
                 "-" if same is None else ("yes" if same else "**NO: MISMATCH**")))
    return L + [f"| {a} | {b} |" for a, b in rows] + [""]


def table_sweep(sweep):
    if not sweep:
        return []
    L = ["### Cache budget sweep (one cold epoch each)", "",
         "| budget MiB | / working set | decoded tiles MB/s | read amplification |", "|---:|---:|---:|---:|"]
    for e in sweep:
        part = f" (first {e['views_limit']} views)" if e.get("views_limit") else ""
        L.append(f"| {fmt((e.get('budget_bytes') or 0) / 2**20, 1)}{part} | "
                 f"{fmt_ratio(ratio(e.get('budget_bytes'), e.get('working_set')))} | "
                 f"{fmt(e.get('tiles_mb_s'))} | {fmt(e.get('read_amplification'), 3)} |")
    return L + [""]


def main(out, recs, machine, notes, gnuplot):
    cfg = machine.get("config", {})
    s = summarize(out, recs)
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump({"machine": machine, "notes": notes, "summary": s, "records": recs}, f, indent=1)
    write_report(out, table_main(s, machine, cfg) + table_sweep(s["sweep"]) + table_notes(notes, "### Notes"))
    plots.larger(out, s["sweep"], (s["cold_epoch"] or {}).get("working_set"), gnuplot)
    if s["weights_same"] is False:
        print("spritefs-bench: WEIGHTS MISMATCH between the mount and --preload", file=sys.stderr)
        return 3
    return 0
