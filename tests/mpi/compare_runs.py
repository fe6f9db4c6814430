"""Compares two training runs of mygpt-ddp: per-step losses (metrics.jsonl) and final checkpoints.

usage: compare_runs.py TOLERANCE "LABEL|RUN_A|RUN_B|same" "LABEL|RUN_A|RUN_B|different" ...
       ("same-steps": the same losses and weights from micro-batches of other row counts; see compare())
       compare_runs.py fp16-adamw "LABEL|RUN_A|RUN_B|same" ...   (bounds derived from fp16 and AdamW; below)

A checkpoint is a safetensors file: "model.*" tensors are the weights and "loader.position" is the
data position. It is read here with a few lines of Python rather than the safetensors package, so the
test needs nothing beyond torch. Prints one line per pair, "PASS:" or "FAIL:": a "same" pair passes
when losses and weights agree within TOLERANCE, a
"different" pair (a control that the comparison can fail at all) when they do not. One process
compares every pair, since importing torch is the slow part.
"""
import glob
import json
import os
import struct
import sys

import torch


def losses(run, key="loss"):
    with open(os.path.join(run, "metrics.jsonl")) as f:
        records = [json.loads(line) for line in f if line.strip()]
    return {r["step"]: r[key] for r in records if key in r}


def final_state(run):
    checkpoints = sorted(glob.glob(os.path.join(run, "ckpt_*.safetensors")))
    if not checkpoints:
        raise SystemExit(f"no checkpoint in {run}")
    return os.path.basename(checkpoints[-1]), read_safetensors(checkpoints[-1])


DTYPES = {"F32": torch.float32, "F64": torch.float64, "BF16": torch.bfloat16, "F16": torch.float16,
          "I64": torch.int64, "I32": torch.int32, "U8": torch.uint8, "BOOL": torch.bool}


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (header_len,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + header_len])
    start = 8 + header_len
    state = {}
    for name, entry in header.items():
        if name == "__metadata__" or entry["dtype"] not in DTYPES:
            continue
        begin, end = entry["data_offsets"]
        raw = bytearray(data[start + begin:start + end])
        state[name] = torch.frombuffer(raw, dtype=DTYPES[entry["dtype"]]).reshape(entry["shape"]) if raw else \
            torch.zeros(entry["shape"], dtype=DTYPES[entry["dtype"]])
    return state


def data_position(state):
    for key in ("loader.position", "extra.loader", "extra.train_loader"):
        if key in state:
            return sorted(set(state[key].flatten().tolist()))
    return None  # a checkpoint layout without a loader position: nothing to compare


def compare(run_a, run_b, tolerance, expect_different, other_rows=False):
    """Returns (agrees_as_expected, summary, problems). other_rows: the runs cut the same global batch into
    micro-batches of different row counts, so their loader positions (counted in batches) and validations
    (batches of those rows) differ by design and only the step losses and weights are compared."""
    problems = []
    loss_a, loss_b = losses(run_a), losses(run_b)
    if sorted(loss_a) != sorted(loss_b) or not loss_a:
        problems.append(f"steps differ: {sorted(loss_a)} vs {sorted(loss_b)}")
        loss_diff = float("inf")
    else:
        loss_diff = max(abs(loss_a[s] - loss_b[s]) for s in loss_a)
    # Validation losses, where the runs evaluated: the same batches, whatever the number of ranks.
    val_a, val_b = ({}, {}) if other_rows else (losses(run_a, "val_loss"), losses(run_b, "val_loss"))
    if sorted(val_a) != sorted(val_b):
        problems.append(f"validation steps differ: {sorted(val_a)} vs {sorted(val_b)}")
    elif val_a:
        loss_diff = max(loss_diff, max(abs(val_a[s] - val_b[s]) for s in val_a))

    name_a, state_a = final_state(run_a)
    name_b, state_b = final_state(run_b)
    if name_a != name_b:
        problems.append(f"final checkpoints differ: {name_a} vs {name_b}")
    weights = sorted(k for k in state_a if k.startswith("model."))
    if not weights or weights != sorted(k for k in state_b if k.startswith("model.")):
        problems.append("the checkpoints hold different parameter names")
        param_diff = float("inf")
    else:
        param_diff = max((state_a[k] - state_b[k]).abs().max().item() for k in weights)
    # Both runs consumed the same chunks of the stream, so they saved the same data position (one row
    # per rank where the checkpoint keeps per-rank states; a sequential loader's rows are all equal).
    position_a, position_b = data_position(state_a), data_position(state_b)
    if position_a != position_b and not other_rows:
        problems.append(f"data positions differ: {position_a} vs {position_b}")
    summary = (f"max loss diff {loss_diff:.3g} over {len(loss_a)} steps and {len(val_a)} validations, "
               f"max parameter diff {param_diff:.3g}")
    within = loss_diff <= tolerance and param_diff <= tolerance and not problems
    return (not within) if expect_different else within, summary, problems


# fp16's unit roundoff: a rounding changes a value by at most this fraction of it.
FP16_UNIT_ROUNDOFF = 2.0 ** -11


def records(run):
    with open(os.path.join(run, "metrics.jsonl")) as f:
        return {r["step"]: r for r in (json.loads(line) for line in f if line.strip()) if "loss" in r}


def compare_fp16_adamw(run_a, run_b, expect_different):
    """Two fp16 runs that differ only in how their arithmetic is rounded (another order of additions,
    another CPU's fp16 instructions). No fixed tolerance holds on every CPU, so each bound follows from
    fp16's unit roundoff u and the run's own learning rates:
      - loss and gradient norm of every step: within 8u of each other, relative. The norm is where an
        error of the loss scaling shows (a gradient left scaled is 4096x larger; AdamW would hide it);
      - the median weight: within 8u x (sum of the learning rates). A weight with a real gradient
        moves by about lr x g / |g| per step, and a relative error of a few u in g moves it by a few u x lr;
        a step taken on one side only moves most weights by about lr, far outside this bound;
      - every weight: within 2 x (sum of the learning rates). A weight whose gradient is only rounding
        noise (zero in theory) gets AdamW steps of up to lr of either sign on either side, whatever u is.
    """
    u = FP16_UNIT_ROUNDOFF
    rec_a, rec_b = records(run_a), records(run_b)
    problems = []
    if sorted(rec_a) != sorted(rec_b) or not rec_a:
        return expect_different, f"steps differ: {sorted(rec_a)} vs {sorted(rec_b)}", []
    lr_sum = sum(r["lr"] for r in rec_a.values())
    worst_rel = 0.0
    for step in sorted(rec_a):
        for key in ("loss", "grad_norm"):
            a, b = rec_a[step].get(key), rec_b[step].get(key)
            if a is None or b is None:
                continue
            rel = abs(a - b) / max(abs(a), abs(b), 1e-30)
            worst_rel = max(worst_rel, rel)
            if rel > 8 * u:
                problems.append(f"step {step}: {key} {a} vs {b} (relative {rel:.3g} > 8u = {8 * u:.3g})")
    _, state_a = final_state(run_a)
    _, state_b = final_state(run_b)
    names = sorted(k for k in state_a if k.startswith("model."))
    diffs = torch.cat([(state_a[k].double() - state_b[k].double()).abs().flatten() for k in names])
    median, largest = diffs.median().item(), diffs.max().item()
    if median > 8 * u * lr_sum:
        problems.append(f"median weight difference {median:.3g} > 8u x sum(lr) = {8 * u * lr_sum:.3g}")
    if largest > 2 * lr_sum:
        problems.append(f"largest weight difference {largest:.3g} > 2 x sum(lr) = {2 * lr_sum:.3g}")
    summary = (f"loss/norm relative diff {worst_rel:.3g} (bound {8 * u:.3g}), weights: median diff {median:.3g} "
               f"(bound {8 * u * lr_sum:.3g}), max {largest:.3g} (bound {2 * lr_sum:.3g})")
    within = not problems
    return (not within) if expect_different else within, summary, problems


def main():
    mode = sys.argv[1]
    all_ok = True
    for spec in sys.argv[2:]:
        label, run_a, run_b, expectation = spec.split("|")
        try:
            if mode == "fp16-adamw":
                ok, summary, problems = compare_fp16_adamw(run_a, run_b, expectation == "different")
            else:
                ok, summary, problems = compare(run_a, run_b, float(mode), expectation == "different",
                                                other_rows=expectation == "same-steps")
        except (OSError, RuntimeError, SystemExit) as e:  # a missing run was reported by the caller
            ok, summary, problems = False, f"cannot compare: {e}", []
        print(f"{'PASS' if ok else 'FAIL'}: {label}: {summary}")
        if not ok:
            for p in problems:
                print(f"     | {p}")
        all_ok = all_ok and ok
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
