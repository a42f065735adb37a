"""accuracy.py - `spritefs-bench accuracy` (or --dataset accuracy): the test
accuracy a residual preset reaches on Fashion-MNIST, trained by hntrain
through a spritefs mount, against issue 31's target: at least 94% within 15
epochs.

Fashion-MNIST is packed, mounted (view batch 64) and trained with the recipe
docs/HNTRAIN.md measured (resnet-fm, --augment flip, the other defaults:
momentum SGD, lr 0.05, cosine, batch 64), seed 1, on every CPU the bench may
use (or the GPU where hntrain finds one), evaluated on the whole test split
after every epoch. The figure: the best test accuracy, the first epoch (and
training seconds) at or above the target, and pass or miss. --quick trains
one epoch on 1,024 samples and evaluates 1,000: a check of the command, not
of the target.
"""
import json
import os
import subprocess

from .report import table_notes, write_report
from .rutil import command_line, fmt, load_json, load_jsonl

TARGET = 0.94
TARGET_EPOCHS = 15


def run(b):
    from . import cli
    c = b.cfg
    store = f"{b.ssd}/fmnist.sprites"
    b.msg(f"1/3 packing Fashion-MNIST from {c.fmnist}")
    if not b.run_logged("pack-base", [b.p.pack, c.fmnist, store]):
        b.die(f"spritefs-pack failed (see {b.out}/logs/pack-base.log)")
    gpu = False
    if c.gpu:
        gpu = subprocess.run([b.p.hntrain, "--data", store, "--model", "cnn", "--epochs", "1", "--limit", "256",
                              "--test-split", "none", "--device", "gpu"], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL).returncode == 0
    log = "logs/accuracy.jsonl"
    cmd = [b.p.hntrain, "--data", b.mnt, "--model", c.model, "--epochs", str(c.epochs), "--augment", "flip",
           "--seed", "1", "--log", b.path(log)] + (["--limit", str(c.limit)] if c.limit else []) \
        + (["--test-limit", "1000"] if c.quick else []) \
        + ((["--device", "gpu"] + ([f"--amp={c.amp}"] if c.amp else [])) if gpu else ["--threads", str(b.ncpu)])
    if c.amp and not gpu:
        b.note(f"--amp {c.amp}: no GPU here, so the CPU trains in fp32")
    b.msg(f"2/3 hntrain {c.model}, {c.epochs} epoch(s) on the {'GPU' if gpu else 'CPU'}, through the mount "
          "(the test split evaluated after every epoch)")
    with b.mounted(store, opts="batch=64") as m:
        if m is None:
            b.die("the store did not mount (see logs/spritefs.log)")
        ok = b.run_logged("accuracy", cmd)
    if not ok:
        b.fail(f"hntrain (see {b.out}/logs/accuracy.log)")
    b.rec("accuracy-run", "spritefs", "warm", 0, {"command": " ".join(cmd).replace(b.mnt, "MNT"),
                                                  "device": "gpu" if gpu else "cpu", "log": log})
    b.msg("3/3 report: results.json, report.md")
    report(b.out, load_jsonl(os.path.join(b.out, "raw.jsonl")))
    return cli.finish(b, 0, "")


def summarize(out, recs):
    run = next((r for r in recs if r.get("kind") == "accuracy-run"), {})
    lines = load_jsonl(os.path.join(out, run["log"])) if run.get("log") else []
    epochs = [l for l in lines if "epoch" in l and not l.get("final")]
    rows, wall = [], 0.0
    for e in epochs:
        wall += e.get("wall_s") or 0.0
        rows.append({"epoch": e["epoch"], "test_acc": e.get("test_acc"), "train_loss": e.get("train_loss"),
                     "train_s": wall})
    accs = [r for r in rows if r["test_acc"] is not None]
    best = max(accs, key=lambda r: r["test_acc"]) if accs else None
    hit = next((r for r in accs if r["test_acc"] >= TARGET), None)
    within = hit is not None and hit["epoch"] <= TARGET_EPOCHS
    return {"command": run.get("command"), "device": run.get("device"), "epochs": rows,
            "best_test_acc": best["test_acc"] if best else None, "best_epoch": best["epoch"] if best else None,
            "final_test_acc": accs[-1]["test_acc"] if accs else None,
            "target": TARGET, "target_epochs": TARGET_EPOCHS,
            "reached_epoch": hit["epoch"] if hit else None, "reached_train_s": hit["train_s"] if hit else None,
            "pass": within if accs else None}


def figure(s):
    """The one line the command is for."""
    if s["best_test_acc"] is None:
        return "no test accuracy measured"
    line = (f"best test accuracy {100 * s['best_test_acc']:.2f}% (epoch {s['best_epoch']} of {len(s['epochs'])}), "
            f"last {100 * s['final_test_acc']:.2f}%; ")
    if s["reached_epoch"]:
        line += (f"{100 * TARGET:.0f}% first at epoch {s['reached_epoch']} after "
                 f"{s['reached_train_s']:.0f} s of training: ")
    else:
        line += f"{100 * TARGET:.0f}% not reached: "
    return line + ("pass" if s["pass"] else "miss") + f" (target: {100 * TARGET:.0f}% within {TARGET_EPOCHS} epochs)"


def report(out, recs):
    machine = load_json(os.path.join(out, "machine.json"), {})
    cfg = machine.get("config", {})
    try:
        with open(os.path.join(out, "notes.txt")) as f:
            notes = [l.rstrip("\n") for l in f if l.strip()]
    except FileNotFoundError:
        notes = []
    s = summarize(out, recs)
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump({"machine": machine, "notes": notes, "summary": s, "records": recs}, f, indent=1)
    L = [f"## spritefs-bench: accuracy ({'quick' if cfg.get('quick') else 'full'} mode)", "",
         f"Machine: {machine.get('cpu', '?')}, {machine.get('cores', '?')} cores; {cfg.get('model')} on the "
         f"{(s['device'] or '?').upper()}, trained by `{s['command'] or '?'}` (MNT: a spritefs mount of "
         "Fashion-MNIST)."] + command_line(cfg) + ["", "| epoch | test acc | train loss | training s so far |",
                                                   "|---:|---:|---:|---:|"]
    for r in s["epochs"]:
        L.append(f"| {r['epoch']} | {fmt(None if r['test_acc'] is None else 100 * r['test_acc'], 2)}% | "
                 f"{fmt(r['train_loss'], 4)} | {fmt(r['train_s'], 1)} |")
    L += ["", "**" + figure(s) + "**", ""]
    write_report(out, L + table_notes(notes))
    print("spritefs-bench accuracy: " + figure(s), flush=True)
    return 0
