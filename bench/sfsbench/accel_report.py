"""accel_report.py - the report of `spritefs-bench --dataset accelerators`: per
medium the largest number of emulated accelerators held at AU >= 90%, its
samples/s, MB/s, AU and CPU core-seconds per delivered GB (daemon and readers
apart); the bound of T12 and the targets; AU against the number of
accelerators and against accelerator speed (accel_au.png, accel_speed.png).
"""
import json
import os

from . import cpufloor, plots
from .accel import AU_MIN, MEDIA, TILE_BYTES
from .report import table_notes, write_report
from .rutil import command_line, fmt, fmt_ratio, load_json, parse_size, ratio

MEDIUM_TEXT = {"spritefs-cold": "spritefs, cold (fresh mount, page cache dropped)",
               "spritefs-warm": "spritefs, warm (the budget holds the split)",
               "store-ssd": "store file on the disk, read by hntrain",
               "store-tmpfs": "store file on tmpfs, read by hntrain",
               "torch-jpeg": "PyTorch DataLoader + torchvision over the JPEGs"}


def per_gb(cpu, t):
    """Core-seconds per GB of decoded tiles delivered in trial T."""
    gb = (t.get("samples") or 0) * TILE_BYTES / 1e9
    return cpu / gb if cpu is not None and gb else None


def rows_of(trials, results, need):
    """One row per medium: its trial at the largest N that held AU >= 90% (at N = 1 where
    none did, with the fraction of one accelerator it holds)."""
    rows = []
    for medium in MEDIA:
        res = next((r for r in results if r["medium"] == medium), None)
        if res is None:
            continue
        n = res.get("accelerators") or 0
        bis = {t["accelerators"]: t for t in trials if t["medium"] == medium and t["purpose"] == "bisect"}
        t = bis.get(n or 1) or {}
        row = {"medium": medium, "state": res["state"], "accelerators": n, "max_tried": res.get("max_tried"),
               "samples_s": t.get("samples_s"), "mb_s": t.get("mb_s"), "au": t.get("au"),
               "data_wait_share": t.get("data_wait_share"),
               "daemon_cpu_s_per_gb": per_gb(t.get("daemon_cpu_s"), t),
               "reader_cpu_s_per_gb": per_gb(t.get("reader_cpu_s"), t), "workers": res.get("workers"),
               "fraction_of_one": None}
        cpus = [x for x in (row["daemon_cpu_s_per_gb"], row["reader_cpu_s_per_gb"]) if x is not None]
        row["cpu_s_per_gb"] = sum(cpus) if cpus else None
        if n == 0 and t.get("samples_s") and need:
            row["fraction_of_one"] = min(1.0, t["samples_s"] / need)
        rows.append(row)
    return rows


def curves(trials, purpose, key):
    """{medium: [(x, AU), ...]} of the trials of PURPOSE, x = KEY(trial)."""
    out = {}
    for t in trials:
        if t["purpose"] == purpose and t.get("au") is not None:
            out.setdefault(t["medium"], []).append((key(t), t["au"]))
    return {m: sorted(v) for m, v in out.items()}


def summarize(out, recs, machine):
    cfg = machine.get("config", {})
    data = load_json(os.path.join(out, "data.json"), {})
    trials = [dict(r, medium=r["medium"]) for r in recs if r.get("kind") == "accel-trial"]
    results = [r for r in recs if r.get("kind") == "accel-result"]
    batch = next((t["batch"] for t in trials), None)
    compute = next((t["compute_s"] for t in trials if t["purpose"] == "bisect"), None)
    need = batch / compute if batch and compute else None
    rows = rows_of(trials, results, need)
    store, budget = data.get("store_bytes"), parse_size(data["cache"]) if data.get("cache") else None
    fio = next(((r.get("result") or {}).get("jobs", [{}])[0].get("read", {}).get("bw_bytes")
                for r in recs if r.get("kind") == "ceiling" and r.get("medium") == "fio-store-accel"), None)
    lz4 = next((r for r in recs if r.get("kind") == "accel-lz4"), None)
    comp = (data.get("files") or 0) * TILE_BYTES / store if store else None
    disk = fio / 1e6 * comp if fio and comp else None
    cold_cpu = cpufloor.summary(recs)
    # the CPU's side of the bound: the CPUs at the floor's cost of a decoded byte (one lz4
    # decode and one copy, T11's floor, measured in this run); one lz4 thread per CPU where
    # the run has no floor
    cpus = lz4.get("workers", 1) if lz4 else None
    fl = (cold_cpu or {}).get("floor") or {}
    if cpus and fl.get("floor_core_s_per_gb"):
        dec = cpus * 1e3 / fl["floor_core_s_per_gb"]
    else:
        dec = (lz4.get("result") or {}).get("mb_s", 0) * cpus if lz4 else None
    bounds = [x for x in (disk, dec) if x]
    need_mb = need * TILE_BYTES / 1e6 if need else None
    bound = {"disk_tiles_mb_s": disk, "decode_tiles_mb_s": dec, "compression_ratio": comp,
             "fio_store_mb_s": fio / 1e6 if fio else None,
             "tiles_mb_s": min(bounds) if bounds else None,
             "by": None if not bounds else ("disk" if min(bounds) == disk else "decode"),
             "decode_from": "floor" if fl.get("floor_core_s_per_gb") else "lz4",
             "accelerators": min(bounds) / need_mb if bounds and need_mb else None}
    workers = {r.get("workers"): (r.get("result") or {}).get("samples_s") for r in recs
               if r.get("kind") == "decode" and r.get("medium") == "torch-jpeg"}
    return {"torch_workers_samples_s": workers, "profile": {"name": cfg.get("profile"), "batch": batch, "compute_s": compute,
                        "samples_s_per_accelerator": need, "mb_s_per_accelerator": need_mb, "au_min": AU_MIN},
            "data": data, "store_bytes": store, "cache_budget_bytes": budget,
            "store_over_budget": ratio(store, budget), "rows": rows, "bound": bound,
            "au_vs_accelerators": curves(trials, "bisect", lambda t: t["accelerators"]),
            "au_vs_speed": curves(trials, "speed", lambda t: t["batch"] / t["compute_s"]),
            "cold_cpu": cold_cpu, "targets": targets(rows, bound, cold_cpu)}


def count(row):
    """A row's accelerators as a number: the fraction of one where it holds none."""
    if not row:
        return None
    return row["accelerators"] or row.get("fraction_of_one")


def targets(rows, bound, cc):
    by = {r["medium"]: r for r in rows}
    cold, peer = by.get("spritefs-cold"), by.get("torch-jpeg")
    tg = []
    if cc and cc.get("ratio") is not None:
        tg.append({"id": "T11", "what": "daemon + reader core-s per decoded GB, a cold epoch (store >= 4x the "
                   "budget, 2 O_DIRECT readers) vs the floor of the same run", "measured": cc["ratio"],
                   "target": f"<= {cpufloor.TARGET}x", "pass": cc["ratio"] <= cpufloor.TARGET,
                   "how": "median of the passes"})
    r1 = ratio(count(cold), bound.get("accelerators"))
    tg.append({"id": "T12", "what": "emulated accelerators at AU >= 90% fed by a cold spritefs mount "
               "(store >= 4x the budget) vs the bound", "measured": r1, "target": ">= 0.8x",
               "pass": None if r1 is None else r1 >= 0.8,
               "how": f"bound {fmt(bound.get('accelerators'), 1)} accelerators: min(fio x compression, "
                      f"{'floor' if bound.get('decode_from') == 'floor' else 'lz4'} x CPUs) = {fmt(bound.get('tiles_mb_s'))} MB/s ({bound.get('by') or '-'})"})
    r2 = ratio(count(cold), count(peer))
    tg.append({"id": "T12", "what": "the same vs PyTorch DataLoader + torchvision over the JPEGs, same cores",
               "measured": r2, "target": ">= 20x", "pass": None if r2 is None else r2 >= 20,
               "how": "accelerators (a fraction of one where PyTorch holds none)"})
    return tg


def au_text(au):
    return "-" if au is None else f"{100 * au:.1f}%"


def table_main(s, machine, cfg):
    p, d = s["profile"], s["data"]
    L = [f"## spritefs-bench: emulated accelerators ({'quick' if cfg.get('quick') else 'full'} mode)", "",
         f"Machine: {machine.get('cpu', '?')}, {machine.get('cores', '?')} cores, "
         f"{(machine.get('ram_bytes') or 0) / 2**30:.0f} GiB RAM, disk "
         f"{machine.get('disk', {}).get('device', '?')} ({machine.get('disk', {}).get('fs', '?')}).",
         f"Profile {p['name']}: batch {p['batch']}, {fmt(p['compute_s'], 3)} s of compute per batch, "
         f"{fmt(p['samples_s_per_accelerator'])} samples/s ({fmt(p['mb_s_per_accelerator'])} MB/s of 224x224x3 "
         f"tiles) per accelerator; a medium holds N accelerators when their AU is at least {AU_MIN:.0%}.",
         f"Data: {d.get('files', '?')} JPEGs ({d.get('source', '?')}, {fmt((d.get('jpeg_bytes') or 0) / 1e6)} MB), "
         f"store {fmt((s['store_bytes'] or 0) / 1e6)} MB, spritefs budget {d.get('cache', '?')} (the store is "
         f"{fmt_ratio(s['store_over_budget'])} the budget)."] + command_line(cfg) + ["",
         "| medium | state | accelerators | samples/s | MB/s | AU | daemon core-s/GB | readers core-s/GB |",
         "|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in s["rows"]:
        n = str(r["accelerators"])
        if r["accelerators"] == 0 and r.get("fraction_of_one") is not None:
            n = f"{r['fraction_of_one']:.2f} of one"
        elif r["accelerators"] and r["accelerators"] == r.get("max_tried"):
            n += " (all tried)"
        name = r["medium"] + (f" ({r['workers']} workers)" if r.get("workers") else "")
        L.append(f"| {name} | {r['state']} | {n} | {fmt(r['samples_s'])} | {fmt(r['mb_s'])} | "
                 f"{au_text(r['au'])} | "
                 f"{fmt(r['daemon_cpu_s_per_gb'], 2)} | {fmt(r['reader_cpu_s_per_gb'], 2)} |")
    L.append("")
    L += [f"* {m}: {MEDIUM_TEXT[m]}" for m in MEDIA if any(r["medium"] == m for r in s["rows"])]
    if s["torch_workers_samples_s"]:
        L.append("* PyTorch's decode rate (samples/s, no compute step) by DataLoader workers: "
                 + ", ".join(f"{w}: {fmt(v)}" for w, v in sorted(s["torch_workers_samples_s"].items())))
    return L + [""]


def table_curve(curves, title, unit):
    """AU per medium, a column per x tried (accelerators, or samples/s per accelerator)."""
    xs = sorted({x for v in curves.values() for x, _ in v})
    if not xs:
        return []
    L = [f"### {title}", "", "| medium | " + " | ".join(f"{fmt(x)}{unit}" for x in xs) + " |",
         "|---|" + "---:|" * len(xs)]
    for m in MEDIA:
        if m in curves:
            au = dict(curves[m])
            L.append(f"| {m} | " + " | ".join(au_text(au.get(x)) for x in xs) + " |")
    return L + [""]


def table_targets(s):
    b = s["bound"]
    L = ["### The bound and the targets", "",
         f"Bound: fio O_DIRECT on the store {fmt(b['fio_store_mb_s'])} MB/s x compression "
         f"{fmt(b['compression_ratio'], 2)} = {fmt(b['disk_tiles_mb_s'])} MB/s of tiles; {cpu_side(b)} = "
         f"{fmt(b['decode_tiles_mb_s'])} MB/s; the smaller over {fmt(s['profile']['mb_s_per_accelerator'])} "
         f"MB/s per accelerator: {fmt(b['accelerators'], 1)} accelerators.", "",
         ] + floor_text(s.get("cold_cpu")) + [
         "| # | measure | measured | target | result |", "|---|---|---:|---|---|"]
    for t in s["targets"]:
        res = "n/a" if t["pass"] is None else ("pass" if t["pass"] else "**miss**")
        L.append(f"| {t['id']} | {t['what']} | {fmt_ratio(t['measured'])} | {t['target']} | {res} |")
    return L + [""]


def cpu_side(b):
    """How the bound's CPU side was taken (records of runs before the floor say lz4)."""
    if b.get("decode_from") == "floor":
        return "the CPUs at the floor's cost (one lz4 decode and one copy per byte, below)"
    return "one lz4 thread x the CPUs"


def floor_text(cc):
    """T11's line: the floor's rates and the cold passes against it."""
    if not cc:
        return []
    fl = cc["floor"]
    lz = fl.get("lz4_decoded_gb_per_s")
    passes = ", ".join(fmt_ratio(r) for r in cc["ratios"])
    each = fl.get("floors_core_s_per_gb") or []
    return [f"Floor ({fl.get('compression')}): one lz4 decode per stored byte at "
            f"{fmt(lz, 2) + ' GB/s decoded' if lz else 'none (raw sheets)'} and one copy per delivered byte at "
            f"{fmt(fl.get('copy_gb_per_s'), 2)} GB/s, per core-second of one thread: "
            f"{fmt(fl.get('floor_core_s_per_gb'), 3)} core-s/GB (median rates of {len(each)} measurements, "
            f"before the first pass and after each: {', '.join(fmt(x, 3) for x in each)}). Cold passes over one "
            f"epoch's views (a fresh mount, page cache dropped, 2 O_DIRECT readers; medians): "
            f"{fmt(cc['gb_per_s'], 2)} GB/s, daemon {fmt(cc['daemon_core_s_per_gb'], 3)} + readers "
            f"{fmt(cc['readers_core_s_per_gb'], 3)} = {fmt(cc['core_s_per_gb'], 3)} core-s/GB; each over the mean "
            f"of the floors before and after it: {passes}.", ""]


def main(out, recs, machine, notes, gnuplot):
    cfg = machine.get("config", {})
    s = summarize(out, recs, machine)
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump({"machine": machine, "notes": notes, "summary": s, "records": recs}, f, indent=1)
    write_report(out, table_main(s, machine, cfg)
                 + table_curve(s["au_vs_accelerators"], "AU against the number of accelerators (the trials of "
                               "the bisection)", " acc.")
                 + table_curve(s["au_vs_speed"], "One accelerator's AU against its speed (the compute time "
                               "swept)", " samples/s")
                 + table_targets(s) + table_notes(notes))
    plots.accel(out, s["au_vs_accelerators"], s["au_vs_speed"], s["profile"], gnuplot)
    return 0
