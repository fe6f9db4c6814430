#!/usr/bin/env python3
"""Draws the curves of one or more training runs and writes RUN_DIR/run.png (for several runs, into
the first one's folder).

  .venv/bin/python scripts/plot_run.py RUN_DIR [RUN_DIR ...] [--out FILE]

Reads each RUN_DIR/metrics.jsonl (and run.json for the label and the kind of data) and draws, against
the step, and on a second axis the tokens seen: training loss, validation loss, HellaSwag accuracy and
throughput (tok/s), runs overlaid. When a run trains on GPT-2 tokens, the published GPT-2 124M
reference lines are drawn as build-nanogpt plots them: OpenAI GPT-2 124M's validation loss on FineWeb
(3.2924) and its HellaSwag accuracy (0.2955). Bad input is one line on stderr and exit 2.
"""
import argparse
import json
import os
import sys

GPT2_124M_VAL_LOSS = 3.2924   # build-nanogpt's reference line (OpenAI GPT-2 124M on FineWeb-EDU val)
GPT2_124M_HELLASWAG = 0.2955  # OpenAI GPT-2 124M HellaSwag accuracy (length-normalized)


def fail(message):
    print(f"plot_run.py: {message}", file=sys.stderr)
    sys.exit(2)


def read_run(folder):
    metrics = os.path.join(folder, "metrics.jsonl")
    if not os.path.isdir(folder):
        fail(f"run folder '{folder}' does not exist")
    if not os.path.isfile(metrics):
        fail(f"'{folder}' holds no metrics.jsonl (is it a training run's --out?)")
    rows = []
    with open(metrics) as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue  # a torn last line of a killed run
            if isinstance(row, dict) and isinstance(row.get("step"), int):
                rows.append(row)
    if not rows:
        fail(f"'{metrics}' has no rows")
    info = {}
    run_json = os.path.join(folder, "run.json")
    if os.path.isfile(run_json):
        try:
            with open(run_json) as f:
                info = json.load(f)
        except (OSError, json.JSONDecodeError):
            info = {}
    return rows, info


def series(rows, key):
    points = [(r["step"], r[key]) for r in rows if isinstance(r.get(key), (int, float))]
    return [p[0] for p in points], [p[1] for p in points]


def tokens_per_step(info):
    options = info.get("options", {})
    try:
        batch = int(options.get("batch-size", 0)) * int(options.get("seq-len", 0) or info["model"]["block_size"])
        return batch * int(options.get("grad-accum", 1)) * int(info.get("world_size", 1))
    except (KeyError, TypeError, ValueError):
        return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("runs", nargs="+", metavar="RUN_DIR")
    parser.add_argument("--out", help="image file to write (default: RUN_DIR/run.png of the first run)")
    args = parser.parse_args()
    runs = [(folder, *read_run(folder)) for folder in args.runs]
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        fail("matplotlib is not installed in this python (scripts/setup.sh installs it into .venv)")

    fig, axes = plt.subplots(2, 2, figsize=(13, 8))
    panels = [(axes[0][0], "loss", "training loss"), (axes[0][1], "val_loss", "validation loss"),
              (axes[1][0], "hellaswag_acc", "HellaSwag accuracy"), (axes[1][1], "tok_per_sec", "tokens / s")]
    gpt2_tokens = False
    for folder, rows, info in runs:
        label = os.path.basename(os.path.normpath(folder))
        gpt2_tokens |= info.get("model", {}).get("vocab_size", 0) >= 50257
        for ax, key, _ in panels:
            steps, values = series(rows, key)
            if steps:
                ax.plot(steps, values, label=label, marker="o" if len(steps) < 30 else None, markersize=3)
    for ax, key, title in panels:
        ax.set_title(title)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        if gpt2_tokens and key == "val_loss":
            ax.axhline(GPT2_124M_VAL_LOSS, color="red", linestyle="--", label=f"OpenAI GPT-2 124M ({GPT2_124M_VAL_LOSS})")
        if gpt2_tokens and key == "hellaswag_acc":
            ax.axhline(GPT2_124M_HELLASWAG, color="red", linestyle="--",
                       label=f"OpenAI GPT-2 124M ({GPT2_124M_HELLASWAG})")
        if ax.lines:
            ax.legend(fontsize=8)
        else:
            ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes, color="gray")
    # Tokens seen on the loss panel's top axis, from the first run's tokens per step.
    per_step = tokens_per_step(runs[0][2])
    if per_step:
        top = axes[0][0].secondary_xaxis("top", functions=(lambda s: s * per_step, lambda t: t / per_step))
        top.set_xlabel("tokens seen")
    fig.tight_layout()

    out = args.out or os.path.join(args.runs[0], "run.png")
    temporary = os.path.join(os.path.dirname(os.path.abspath(out)), f".{os.path.basename(out)}.tmp.{os.getpid()}.png")
    try:
        with open(temporary, "wb") as image:
            fig.savefig(image, dpi=110, format="png")
            image.flush()
            os.fsync(image.fileno())  # on disk before the rename publishes it, as common/file_io does
        os.replace(temporary, out)  # never a half-written image under the name
    except OSError as e:
        if os.path.exists(temporary):
            os.remove(temporary)
        fail(f"cannot write '{out}': {e.strerror}")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
