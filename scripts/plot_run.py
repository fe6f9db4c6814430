#!/usr/bin/env python3
"""Draws the curves of one or more training runs and writes RUN_DIR/run.png (for several runs, into
the first one's folder).

  .venv/bin/python scripts/plot_run.py RUN_DIR [RUN_DIR ...] [--out FILE]

Reads each RUN_DIR/metrics.jsonl (and run.json for the label, the batch and the kind of data) and
draws training loss, validation loss, validation bits per byte, HellaSwag accuracy, CORE (nanochat's
centered metric) and throughput (tok/s), runs overlaid; a metric no run recorded gets no panel. The x axis is the step, with the tokens seen on a second axis
when every run has the same tokens per step; runs of different batches are drawn against the tokens
seen, each with its own tokens per step. The published GPT-2 124M reference lines are drawn as
build-nanogpt plots them, where they mean something: OpenAI GPT-2 124M's FineWeb-EDU validation loss
(3.2924) for runs on GPT-2 token shards, and its HellaSwag accuracy (0.2955) on HellaSwag panels.
It prints what it drew. Bad input is one line on stderr and exit 2.
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


def fineweb_like(info):
    """A run on GPT-2 token shards, the kind of data the FineWeb validation reference is about."""
    return info.get("tokenizer") == "gpt2" and str(info.get("data", "")).startswith("token data")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
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

    wanted = [("loss", "training loss"), ("val_loss", "validation loss"), ("val_bpb", "validation bits per byte"),
              ("hellaswag_acc", "HellaSwag accuracy"), ("core", "CORE"), ("tok_per_sec", "tokens / s")]
    wanted = [(key, title) for key, title in wanted if any(series(rows, key)[0] for _, rows, _ in runs)]
    if not wanted:
        fail("the runs recorded no loss, validation, HellaSwag, CORE or throughput values")
    columns = 2 if len(wanted) > 2 else len(wanted)
    fig, grid = plt.subplots((len(wanted) + columns - 1) // columns, columns, figsize=(6.5 * columns, 4 * ((len(wanted) + 1) // 2)),
                             squeeze=False)
    axes = [ax for row in grid for ax in row]
    for ax in axes[len(wanted):]:
        ax.remove()
    # Each run's own tokens per step; against the tokens seen only when the runs' batches differ.
    per_step = [tokens_per_step(info) for _, _, info in runs]
    by_tokens = len(set(per_step)) > 1 and all(per_step)
    references = []
    for ax, (key, title) in zip(axes, wanted):
        for (folder, rows, info), tokens in zip(runs, per_step):
            steps, values = series(rows, key)
            if steps:
                x = [s * tokens for s in steps] if by_tokens else steps
                ax.plot(x, values, label=os.path.basename(os.path.normpath(folder)),
                        marker="o" if len(steps) < 30 else None, markersize=3)
        ax.set_title(title)
        ax.set_xlabel("tokens seen" if by_tokens else "step")
        ax.grid(alpha=0.3)
        if key == "val_loss" and any(fineweb_like(info) for _, _, info in runs):
            ax.axhline(GPT2_124M_VAL_LOSS, color="red", linestyle="--",
                       label=f"OpenAI GPT-2 124M, FineWeb-EDU val ({GPT2_124M_VAL_LOSS})")
            references.append("GPT-2 124M validation loss")
        if key == "hellaswag_acc":
            ax.axhline(GPT2_124M_HELLASWAG, color="red", linestyle="--",
                       label=f"OpenAI GPT-2 124M ({GPT2_124M_HELLASWAG})")
            references.append("GPT-2 124M HellaSwag")
        ax.legend(fontsize=8)
        if not by_tokens and per_step[0]:
            tokens = per_step[0]
            top = ax.secondary_xaxis("top", functions=(lambda s, t=tokens: s * t, lambda v, t=tokens: v / t))
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
    print("panels: " + ", ".join(title for _, title in wanted) + " | x: " +
          ("tokens seen (each run's own tokens per step)" if by_tokens else "step") +
          " | reference lines: " + (", ".join(references) or "none"))


if __name__ == "__main__":
    main()
