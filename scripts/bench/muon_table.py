"""The tables of scripts/bench_muon.sh from its runs: RUNS lists one run a line,
"CONFIG SEED VARIANT METRICS_JSONL WALL_SECONDS", VARIANT adamw, muon or muon_short. A Muon run that
was stopped before its last step (a busy machine) is read as far as it got.

usage: muon_table.py RUNS
"""
import collections
import json
import os
import statistics
import sys

runs = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    config, seed, variant, path, wall = line.split()
    if not os.path.exists(path):  # a copied work folder: the run folders beside RUNS
        path = os.path.join(os.path.dirname(sys.argv[1]), os.path.basename(os.path.dirname(path)), "metrics.jsonl")
    records = [json.loads(l) for l in open(path)]
    train = [r for r in records if "loss" in r and "val_loss" not in r]
    val = {r["step"]: r["val_loss"] for r in records if "val_loss" in r}
    # Training time up to (and including) step s: the sum of the step times, evaluations excluded.
    elapsed, t = {}, 0.0
    for r in train:
        t += r["dt_ms"] / 1000
        elapsed[r["step"] + 1] = t
    elapsed[0] = 0.0
    runs[(config, seed)][variant] = {"val": val, "elapsed": elapsed, "steps": len(train), "train": train[10:]}

# Step times compare only over the time all variants of a seed ran side by side (a shared machine's load
# changes once one of them ends): the median dt of each run's steps inside that window.
for variants in runs.values():
    start = max(v["train"][0]["elapsed_s"] for v in variants.values())
    end = min(v["train"][-1]["elapsed_s"] for v in variants.values())
    for v in variants.values():
        inside = [r["dt_ms"] for r in v["train"] if start <= r["elapsed_s"] <= end] or [r["dt_ms"] for r in v["train"]]
        v["dt"] = statistics.median(inside)

def reach(run, target):
    """The first evaluated step whose validation loss is at or below target, or None."""
    hits = [s for s in sorted(run["val"]) if run["val"][s] <= target + 1e-12]
    return hits[0] if hits else None

print("| data | seed | AdamW val @ N | Muon val @ N | Muon steps to AdamW's val @ N (ratio) | train time to it, Muon / AdamW "
      "| Muon, schedule of 0.7 N: val @ 0.7 N | step ms AdamW / Muon (ratio) |")
print("|---|---:|---:|---:|---:|---:|---:|---:|")
curves = collections.defaultdict(list)
for (config, seed), v in runs.items():
    a, m = v["adamw"], v["muon"]
    n = a["steps"]
    target = a["val"][n]
    hit = reach(m, target)
    reached = f"{hit} ({hit / n:.2f})" if hit is not None else f"not reached (min {min(m['val'].values()):.4f})"
    times = f"{m['elapsed'][hit]:.0f} s / {a['elapsed'][n]:.0f} s" if hit is not None else "-"
    short = v.get("muon_short")
    short_text = "-"
    if short and short["steps"] in short["val"]:
        short_text = f"{short['val'][short['steps']]:.4f} ({short['steps']} steps)"
    muon_at_n = f"{m['val'][n]:.4f}" if n in m["val"] else f"(stopped at step {max(m['val'])})"
    print(f"| {config} | {seed} | {target:.4f} | {muon_at_n} | {reached} | {times} | {short_text} "
          f"| {a['dt']:.1f} / {m['dt']:.1f} ({m['dt'] / a['dt']:.2f}) |")
    for variant in ("adamw", "muon"):
        curves[(config, variant)].append(v[variant])

print()
print("Validation loss against steps (mean over seeds) and training seconds to that step (mean):")
print()
for config in sorted({c for c, _ in curves}):
    a, m = curves[(config, "adamw")], curves[(config, "muon")]
    steps = sorted(a[0]["val"])
    stride = max(1, len(steps) // 10)
    print(f"| {config}: step | AdamW val | AdamW s | Muon val | Muon s |")
    print("|---:|---:|---:|---:|---:|")
    for s in steps[::stride] + ([steps[-1]] if (len(steps) - 1) % stride else []):
        def mean(rs, key, form):
            values = [r[key][s] for r in rs if s in r[key]]
            return format(statistics.mean(values), form) if len(values) == len(rs) else "-"
        print(f"| {s} | {mean(a, 'val', '.4f')} | {mean(a, 'elapsed', '.0f')} | {mean(m, 'val', '.4f')} "
              f"| {mean(m, 'elapsed', '.0f')} |")
    print()
