"""rutil.py - the report's small helpers: JSON-lines loading, medians, number
formats, and one hntrain run (its JSON-lines log) or PyTorch peer summarised.
Shared by report.py, report_larger.py and accel.py.
"""
import json
import os
import statistics

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


def command_line(cfg):
    """The line that says which command produced a report ([] for a run that did not record it)."""
    return [f"Command: `{cfg['command']}`."] if cfg.get("command") else []
