#!/usr/bin/env python3
"""Median, mean and spread of per-step metrics over one window of steps, read from a metrics.jsonl: the
C++ trainer's (`mygpt-ddp train --out DIR` writes DIR/metrics.jsonl) or a PyTorch twin's (`--metrics FILE`,
the same keys). scripts/bench_gpt2_gpu.sh computes every row of its table with it, so the two sides are
summed over the same steps by the same arithmetic.

  step_stats.py FILE --first-step 10 [--last-step 59] [--keys dt_ms,tok_per_sec,...] [--cells]

The window is the records with first-step <= step <= last-step (validation records, which have no dt_ms,
are left out; a step skipped as not finite still took its time and counts). Prints one JSON object: for each
key, n, median, mean, sd (the sample standard deviation; 0 for one value), min and max. --cells prints the
table cells of bench_gpt2_gpu.sh instead, separated by '|': ms/step median, mean, sd, min-max, tok/s
median, MFU median, peak memory (MiB, the largest), last loss, window; "n/a" where a side has no such key.
"""
import argparse
import json
import math
import statistics
import sys

DEFAULT_KEYS = ["dt_ms", "tok_per_sec", "mfu", "peak_mem_mib", "loss"]


def window(path, first, last):
    """The step records of FILE within [first, last]."""
    rows = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                sys.exit(f"step_stats.py: {path}:{number}: not JSON ({e.msg})")
            step = record.get("step")
            if step is None or "dt_ms" not in record:
                continue
            if step >= first and (last is None or step <= last):
                rows.append(record)
    return rows


def stats(values):
    values = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    if not values:
        return None
    return {"n": len(values), "median": statistics.median(values), "mean": statistics.fmean(values),
            "sd": statistics.stdev(values) if len(values) > 1 else 0.0, "min": min(values), "max": max(values)}


def summary(rows, keys):
    return {key: stats([r.get(key) for r in rows]) for key in keys}


def cells(rows):
    s = summary(rows, DEFAULT_KEYS)

    def fmt(x, digits=2):
        return f"{x:,.{digits}f}"

    dt, tok, mfu, mem = s["dt_ms"], s["tok_per_sec"], s["mfu"], s["peak_mem_mib"]
    if dt is None:
        return "|".join(["n/a"] * 9)
    steps = [r["step"] for r in rows]
    return "|".join([
        fmt(dt["median"]), fmt(dt["mean"]), fmt(dt["sd"]), f"{fmt(dt['min'])}-{fmt(dt['max'])}",
        fmt(tok["median"], 0) if tok else "n/a",
        f"{100 * mfu['median']:.1f}%" if mfu else "n/a",
        fmt(mem["max"], 0) if mem else "n/a",
        f"{rows[-1]['loss']:.4f}" if "loss" in rows[-1] else "n/a",
        f"steps {min(steps)}-{max(steps)} (n={len(steps)})",
    ])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("metrics", help="a metrics.jsonl: one JSON record per step")
    p.add_argument("--first-step", type=int, required=True, help="the window's first step (warm-up steps before it)")
    p.add_argument("--last-step", type=int, help="the window's last step (default: the file's last)")
    p.add_argument("--keys", default=",".join(DEFAULT_KEYS), help="comma-separated metric keys")
    p.add_argument("--cells", action="store_true", help="bench_gpt2_gpu.sh's table cells instead of JSON")
    args = p.parse_args(argv)
    try:
        rows = window(args.metrics, args.first_step, args.last_step)
    except OSError as e:
        sys.exit(f"step_stats.py: {args.metrics}: {e.strerror}")
    if args.cells:
        print(cells(rows))
    else:
        print(json.dumps(summary(rows, args.keys.split(","))))


if __name__ == "__main__":
    main()
