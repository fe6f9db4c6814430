"""Compares two training runs of mygpt-ddp: per-step losses (metrics.jsonl) and final checkpoints.

usage: compare_runs.py TOLERANCE "LABEL|RUN_A|RUN_B|same" "LABEL|RUN_A|RUN_B|different" ...

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


def losses(run):
    with open(os.path.join(run, "metrics.jsonl")) as f:
        records = [json.loads(line) for line in f if line.strip()]
    return {r["step"]: r["loss"] for r in records if "loss" in r}


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


def compare(run_a, run_b, tolerance, expect_different):
    """Returns (agrees_as_expected, summary, problems)."""
    problems = []
    loss_a, loss_b = losses(run_a), losses(run_b)
    if sorted(loss_a) != sorted(loss_b) or not loss_a:
        problems.append(f"steps differ: {sorted(loss_a)} vs {sorted(loss_b)}")
        loss_diff = float("inf")
    else:
        loss_diff = max(abs(loss_a[s] - loss_b[s]) for s in loss_a)

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
    if position_a != position_b:
        problems.append(f"data positions differ: {position_a} vs {position_b}")
    summary = f"max loss diff {loss_diff:.3g} over {len(loss_a)} steps, max parameter diff {param_diff:.3g}"
    within = loss_diff <= tolerance and param_diff <= tolerance and not problems
    return (not within) if expect_different else within, summary, problems


def main():
    tolerance = float(sys.argv[1])
    all_ok = True
    for spec in sys.argv[2:]:
        label, run_a, run_b, expectation = spec.split("|")
        try:
            ok, summary, problems = compare(run_a, run_b, tolerance, expectation == "different")
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
