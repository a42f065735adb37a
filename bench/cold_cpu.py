#!/usr/bin/python3
"""cold_cpu.py - the CPU cost of a decoded byte on a cold mount, against its floor.

One run measures, side by side on the same machine:

* the floor: one lz4 decode per stored byte at the single-core rate
  (spritefs-readbench --decode lz4 --threads 1: checksum + lz4 + checks of
  sheets already in memory) plus one memory copy per delivered byte at the
  single-core rate (--decode copy), in core-seconds per decoded GB, each rate
  per CPU-second of the timing thread, so that other load on the machine
  does not inflate the floor;
* a cold pass: the page cache dropped, a fresh mount with -o cache=CACHE,
  one epoch's view files read with O_DIRECT by READERS threads
  (spritefs-readbench --direct); the daemon's CPU time from
  /proc/PID/task/*/schedstat (exact; /proc/PID/stat's 10 ms ticks where a
  thread ended during the pass) and the readers' from wait4's rusage, each
  in core-seconds per decoded GB delivered, and their sum over the floor:
  the floor is measured again after each pass, and a pass set against the
  mean of the floors before and after it (sfsbench/cpufloor.py says why).

Prints one JSON object (and a line per pass on stderr). Needs root (drop_caches)
and /dev/fuse. Used for issue 26's T11 (docs/ARCHITECTURE.md, "CPU floor").

    bench/cold_cpu.py --store S --cache 256M --spritefs build/fs/spritefs \\
        --readbench build/bench/spritefs-readbench --pack build/pack/spritefs-pack [--runs 3]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager

from sfsbench.cpufloor import bracket, codec_of, combined, cpu_between, floor, median, pass_cost, task_cpu_ns

TICK = os.sysconf("SC_CLK_TCK")


def proc_cpu(pid):
    """utime + stime of a process (fields 14 and 15 of /proc/PID/stat), seconds."""
    with open(f"/proc/{pid}/stat") as f:
        rest = f.read().rsplit(")", 1)[1].split()
    return (int(rest[11]) + int(rest[12])) / TICK


def run_checked(cmd):
    """Run CMD (a readbench command); its last stdout line as JSON, or exit naming it."""
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        sys.exit(f"cold_cpu: {' '.join(cmd)} exited {p.returncode}: {p.stderr.strip()}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def children_cpu():
    import resource
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


@contextmanager
def mounted(spritefs, store, mnt, opts):
    log = open(os.path.join(os.path.dirname(mnt), "spritefs.log"), "w")
    p = subprocess.Popen([spritefs, "-f", "-o", opts, store, mnt], stdout=log, stderr=log)
    try:
        for _ in range(300):
            if os.path.exists(os.path.join(mnt, "dataset.json")):
                break
            if p.poll() is not None:
                sys.exit(f"cold_cpu: spritefs exited {p.returncode} (see {log.name})")
            time.sleep(0.05)
        else:
            sys.exit("cold_cpu: the mount did not come up")
        yield p.pid
    finally:
        subprocess.run(["fusermount3", "-u", mnt], stderr=subprocess.DEVNULL)
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        log.close()


def cold_pass(a, tmp):
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")
    mnt = os.path.join(tmp, "mnt")
    os.makedirs(mnt, exist_ok=True)
    opts = f"cache={a.cache},seed={a.seed},batch={a.batch}" + (f",{a.opts}" if a.opts else "")
    with mounted(a.spritefs, a.store, mnt, opts) as pid:
        t0, d0 = task_cpu_ns(pid), proc_cpu(pid)
        c0 = children_cpu()
        views = os.path.join(mnt, "train", "epochs", str(a.seed), "0")
        res = run_checked([a.readbench, "--direct", "--threads", str(a.readers), "--bs", a.bs, views])
        readers = children_cpu() - c0
        exact = cpu_between(t0, task_cpu_ns(pid))
        ticks = proc_cpu(pid) - d0
        if exact is not None and ticks > exact + 3 / TICK:
            exact = None  # a thread came and went unseen: the ticks count it
        daemon = exact if exact is not None else ticks
        with open(os.path.join(mnt, ".spritefs", "stats.json")) as f:
            stats = json.load(f)
    r = pass_cost(res, daemon, readers, stats)
    r["daemon_cpu_from"] = "schedstat" if exact is not None else "stat ticks"
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--store", required=True)
    ap.add_argument("--cache", default="256M")
    ap.add_argument("--readers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--bs", default="1M", help="each reader's read size (spritefs-readbench --bs)")
    ap.add_argument("--opts", default="", help="more -o options for spritefs")
    ap.add_argument("--floor-seconds", type=float, default=2.0)
    ap.add_argument("--spritefs", required=True)
    ap.add_argument("--readbench", required=True)
    ap.add_argument("--pack", required=True, help="spritefs-pack (--info says the codec)")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("cold_cpu: needs root (drop_caches, mount)")
    with tempfile.TemporaryDirectory(prefix="cold_cpu.") as tmp:
        info = subprocess.run([a.pack, "--info", a.store], capture_output=True, text=True).stdout
        codec = codec_of(info)
        if codec is None:
            sys.exit(f"cold_cpu: spritefs-pack --info {a.store} says no compression")
        def measure():
            fl = floor(run_checked, a.readbench, a.store, a.floor_seconds, codec)
            lz = fl["lz4_decoded_gb_per_s"]
            print(f"floor ({fl['compression']}): lz4 {f'{lz:.2f} GB/s decoded' if lz else 'none'}, "
                  f"copy {fl['copy_gb_per_s']:.2f} GB/s: {fl['floor_core_s_per_gb']:.3f} core-s/GB",
                  file=sys.stderr)
            return fl

        floors, runs = [measure()], []
        for k in range(a.runs):
            r = cold_pass(a, tmp)
            floors.append(measure())
            bracket(r, floors[-2]["floor_core_s_per_gb"], floors[-1]["floor_core_s_per_gb"])
            runs.append(r)
            print(f"cold pass {k + 1}: {r['gb_per_s']:.2f} GB/s, daemon "
                  f"{r['daemon_core_s_per_gb']:.3f} + readers {r['readers_core_s_per_gb']:.3f} "
                  f"= {r['core_s_per_gb']:.3f} core-s/GB = {r['ratio']:.2f}x the floors around it "
                  f"({r['floor_core_s_per_gb']:.3f}; amplification {r['read_amplification']})", file=sys.stderr)
    print(json.dumps({"store": a.store, "cache": a.cache, "readers": a.readers, "floor": combined(floors),
                      "runs": runs, "ratio_median": median(r["ratio"] for r in runs)}))


if __name__ == "__main__":
    main()
