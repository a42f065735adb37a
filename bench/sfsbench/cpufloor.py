"""cpufloor.py - the CPU floor of a cold byte, and what a cold pass costs
against it (issue 26's T11), shared by `spritefs-bench --dataset accelerators`
and bench/cold_cpu.py.

The floor of a decoded byte delivered from a cold store is one lz4 decode
per stored byte at the single-core rate (spritefs-readbench --decode lz4
--threads 1: checksum, lz4 and its checks, sheets already in memory; none
for a store of raw sheets) plus one memory copy per delivered byte at the
single-core rate (--decode copy), in core-seconds per decoded GB. Each rate
is per CPU-second of the timing thread (its CLOCK_THREAD_CPUTIME_ID), so a
busy machine slows the floor no more than it slows the daemon's
core-seconds. A cold pass is one epoch's view files read with O_DIRECT by
reader threads from a fresh mount, page cache dropped: the daemon's CPU
from /proc/PID/stat and the readers' from wait4, each per decoded GB.

The floor is measured before the first pass and again after each one, and a
pass is set against the mean of the floors on either side of it: on a shared
machine the single-core rates drift (four floors within 20 s of one run:
0.573, 0.494, 0.470 and 0.516 core-s/GB), and one floor taken before three
passes set them against a faster or slower moment than their own.
"""
import os

TARGET = 1.3  # T11: a cold pass's core-seconds per GB over the floor, at most


def codec_of(info):
    """spritefs-pack --info's compression ("lz4", "lz4 (some sheets raw)", "none"), or None."""
    for line in (info or "").splitlines():
        if line.startswith("compression:"):
            return line.split(":", 1)[1].split(",")[0].strip()
    return None


def floor(run_json, readbench, store, seconds, codec):
    """The floor's rates and core-seconds per decoded GB. RUN_JSON(cmd) runs a readbench
    command and gives its JSON object (or None); the floor is None where one failed."""
    common = [readbench, "--threads", "1", "--limit", "48", "--seconds", str(seconds), store]
    cp = run_json(common[:1] + ["--decode", "copy"] + common[1:])
    if not cp or not cp.get("cpu_s"):
        return None
    cp_rate = cp["bytes"] / cp["cpu_s"]  # copied bytes per core-second
    out = {"compression": codec, "lz4_decoded_gb_per_s": None, "copy_gb_per_s": cp_rate / 1e9,
           "floor_core_s_per_gb": 1e9 / cp_rate}
    if codec == "none":
        return out
    # a store with some raw sheets: their "decode" (checksum and copy) is timed as lz4's,
    # which raises the floor a little
    lz4 = run_json(common[:1] + ["--decode", "lz4"] + common[1:])
    if not lz4 or not lz4.get("cpu_s"):
        return None
    lz4_rate = lz4["bytes"] / lz4["cpu_s"]  # decoded bytes per core-second
    out["lz4_decoded_gb_per_s"] = lz4_rate / 1e9
    out["floor_core_s_per_gb"] += 1e9 / lz4_rate
    return out


def task_cpu_ns(pid):
    """{tid: nanoseconds on a CPU} of each live thread of PID, from
    /proc/PID/task/*/schedstat (its first field, sum_exec_runtime): exact, where
    /proc/PID/stat's utime + stime come in 10 ms ticks, 5% of a cold pass's
    0.2 core-seconds. An empty dict where the process is gone."""
    out = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for t in tids:
        try:
            with open(f"/proc/{pid}/task/{t}/schedstat") as f:
                out[t] = int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass  # the thread ended between the listing and the read
    return out


def cpu_between(before, after):
    """CPU seconds between two task_cpu_ns snapshots of one process, or None
    where a thread of BEFORE has ended (its time is then lost to schedstat:
    use the process's ticks)."""
    if not after or any(t not in after for t in before):
        return None
    return sum(ns - before.get(t, 0) for t, ns in after.items()) / 1e9


def pass_cost(res, daemon_s, readers_s, stats, floor_s_per_gb=None):
    """One cold pass: readbench's JSON RES, the daemon's and the readers' CPU seconds, the
    mount's stats.json; core-seconds per decoded GB and the ratio over the floor (set later
    by bracket where FLOOR_S_PER_GB is None)."""
    gb = res["bytes"] / 1e9
    total = (daemon_s + readers_s) / gb
    return {"bytes": res["bytes"], "wall_s": res["wall_s"], "gb_per_s": gb / res["wall_s"],
            "daemon_core_s": daemon_s, "readers_core_s": readers_s,
            "daemon_core_s_per_gb": daemon_s / gb, "readers_core_s_per_gb": readers_s / gb,
            "core_s_per_gb": total, "floor_core_s_per_gb": floor_s_per_gb,
            "ratio": total / floor_s_per_gb if floor_s_per_gb else None,
            "read_amplification": (stats.get("epoch") or {}).get("read_amplification"),
            "stats_cpu_s_per_gb_served": stats.get("cpu_s_per_gb_served")}


def bracket(p, before, after):
    """Set pass P against the mean of the floors (core-s/GB) measured before and after it."""
    p["floor_core_s_per_gb"] = (before + after) / 2
    p["ratio"] = p["core_s_per_gb"] / p["floor_core_s_per_gb"]
    return p


def combined(floors):
    """One floor from several of a run: the median rates, and the floor they make."""
    fl = dict(floors[0])
    cp = median(f["copy_gb_per_s"] for f in floors)
    lz = median(f.get("lz4_decoded_gb_per_s") for f in floors)
    fl.update(copy_gb_per_s=cp, lz4_decoded_gb_per_s=lz,
              floor_core_s_per_gb=1 / cp + (1 / lz if lz else 0),
              floors_core_s_per_gb=[f["floor_core_s_per_gb"] for f in floors])
    return fl


def median(xs):
    xs = sorted(x for x in xs if x is not None)
    if not xs:
        return None
    m = len(xs) // 2
    return xs[m] if len(xs) % 2 else (xs[m - 1] + xs[m]) / 2


def bench_step(b, store, mem_store, budget, batch, readers=2):
    """The accelerators scenario's T11 step: the floor (on MEM_STORE, a copy in memory),
    then cold passes over one epoch's views of STORE mounted with BUDGET, recorded as
    "cpu-floor" and "cold-cpu" records. Needs a mount (root for the dropped cache)."""
    from . import core
    from .accel import self_children_cpu_s as children_cpu_s

    def run_json(cmd):
        out = b.output(cmd, "cpu-floor.err")
        return core.parse_json(out) if out else None

    codec = codec_of(b.output([b.p.pack, "--info", store], "cpu-floor.err"))
    if codec is None:
        b.fail(f"spritefs-pack --info {store} gave no compression (see logs/cpu-floor.err)")
        return
    secs = 1 if b.cfg.quick else 2

    def measure(k):
        fl = floor(run_json, b.p.readbench, mem_store, secs, codec)
        if fl is None:
            b.fail("spritefs-readbench --decode copy/lz4: the floor (see logs/cpu-floor.err)")
            return None
        b.rec("cpu-floor", "store", "warm", k, {"compression": codec}, fl)
        lz = fl["lz4_decoded_gb_per_s"]
        b.msg(f"      the floor ({codec}){' again' if k else ''}: lz4 {f'{lz:.2f} GB/s decoded' if lz else 'none'}, "
              f"copy {fl['copy_gb_per_s']:.2f} GB/s per core: {fl['floor_core_s_per_gb']:.3f} core-s/GB")
        return fl

    fl = measure(0)
    if fl is None or not b.have_mount:
        return
    for k in range(1 if b.cfg.quick else 3):
        with b.mounted(store, cache=budget, cold=True, opts=f"batch={batch}") as m:
            if m is None:
                return
            d0, r0 = m.cpu_s(), children_cpu_s()
            res = run_json([b.p.readbench, "--direct", "--threads", str(readers), f"{b.mnt}/train/epochs/1/0"])
            readers_s, daemon_s = children_cpu_s() - r0, m.cpu_s() - d0
            stats = m.stats()
        if res is None or not res.get("bytes"):
            b.fail("spritefs-readbench --direct over a cold mount's epoch views (see logs/cpu-floor.err)")
            return
        after = measure(k + 1)
        if after is None:
            return
        c = bracket(pass_cost(res, daemon_s, readers_s, stats), fl["floor_core_s_per_gb"],
                    after["floor_core_s_per_gb"])
        fl = after
        b.rec("cold-cpu", "spritefs-cold", b.cold, k, {"readers": readers, "cache": budget}, c)
        b.msg(f"      cold pass {k + 1}: {c['gb_per_s']:.2f} GB/s, daemon {c['daemon_core_s_per_gb']:.3f} + "
              f"readers {c['readers_core_s_per_gb']:.3f} = {c['core_s_per_gb']:.3f} core-s/GB, "
              f"{c['ratio']:.2f}x the floors around it ({c['floor_core_s_per_gb']:.3f})")


def summary(recs):
    """The report's T11 figures from the records: the floor, each pass, the medians."""
    floors = [r.get("result") or {} for r in recs if r.get("kind") == "cpu-floor"]
    passes = [r.get("result") or {} for r in recs if r.get("kind") == "cold-cpu"]
    if not floors:
        return None
    fl = combined(floors)
    return {"floor": fl, "passes": passes,
            "daemon_core_s_per_gb": median(p.get("daemon_core_s_per_gb") for p in passes),
            "readers_core_s_per_gb": median(p.get("readers_core_s_per_gb") for p in passes),
            "core_s_per_gb": median(p.get("core_s_per_gb") for p in passes),
            "ratio": median(p.get("ratio") for p in passes),
            "ratios": [p.get("ratio") for p in passes],
            "gb_per_s": median(p.get("gb_per_s") for p in passes)}
