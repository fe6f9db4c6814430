#!/usr/bin/env python3
"""Sums a PyTorch profiler trace (Chrome trace JSON: `mygpt-ddp train --profile FILE`, or the PyTorch twin's
--profile) into where a training step's time goes.

With GPU kernels in the trace: the device time per step by kind of kernel (matrix products, attention, the
loss, normalization, GELU, other elementwise, reductions, optimizer, communication, copies), the idle gaps
between kernels (time the GPU waited for the host), and the costliest kernels. Without (a CPU run): the
operators with the most time, counted inclusively (an operator's time includes the operators it calls).

usage: profile_summary.py TRACE.json [--steps N] [--top K]
  --steps N   the steps the trace covers (default 3, train's --profile-steps default); times are per step
Bad input (no file, not a trace) is one line on stderr and exit 2.
"""
import argparse
import collections
import json
import re
import sys

# First match wins: a kernel's kind from its name (cuBLAS/cuBLASLt, cuDNN, ATen and our own kernels).
KINDS = [
    ("loss (lm_loss kernel)", r"lm_loss"),
    ("attention", r"sdpa|flash|fmha|attention|mha"),
    ("communication (NCCL)", r"nccl"),
    ("matrix products", r"nvjet|gemm|cutlass|xmma|cublas|sm\d+_.*(?:tn|nt|nn|tt)|Kernel2|splitK"),
    ("optimizer", r"adam|multi_tensor|foreach"),
    ("normalization", r"layer_norm|LayerNorm|rms_?norm|RmsNorm"),
    ("GELU", r"gelu|Gelu"),
    ("reductions", r"reduce_kernel|Reduce|norm_kernel"),
    ("copies and fills", r"copy|Memcpy|Memset|memcpy|memset|fill|FillFunctor"),
    ("other elementwise", r"elementwise|vectorized|unrolled|Functor"),
]
GPU_CATEGORIES = {"kernel", "gpu_memcpy", "gpu_memset"}


def die(message):
    print(f"profile_summary.py: {message}", file=sys.stderr)
    sys.exit(2)


def kind_of(name):
    for kind, pattern in KINDS:
        if re.search(pattern, name):
            return kind
    return "other"


def busy_time(intervals):
    """Length of the union of [start, end) intervals."""
    total, reach = 0.0, None
    for start, end in sorted(intervals):
        if reach is None or start > reach:
            total += end - start
            reach = end
        elif end > reach:
            total += end - reach
            reach = end
    return total


def summarize_gpu(events, steps, top):
    spans = [(e["ts"], e["ts"] + e.get("dur", 0)) for e in events]
    begin, end = min(s for s, _ in spans), max(e for _, e in spans)
    window, busy = end - begin, busy_time(spans)
    by_kind = collections.defaultdict(lambda: [0.0, 0])
    by_name = collections.defaultdict(lambda: [0.0, 0])
    for e in events:
        name = e.get("name", "?")
        for table, key in ((by_kind, kind_of(name)), (by_name, name)):
            table[key][0] += e.get("dur", 0)
            table[key][1] += 1
    ms = lambda us: us / 1000.0 / steps  # noqa: E731
    print(f"GPU kernels: {len(events)} over {steps} step(s); from the first kernel's start to the last one's end "
          f"{ms(window):.2f} ms per step, the GPU busy {ms(busy):.2f} ms ({100 * busy / window:.1f}%)")
    print()
    print("| kind | ms per step | share of the step | kernels per step |")
    print("|---|---|---|---|")
    for kind, (dur, count) in sorted(by_kind.items(), key=lambda kv: -kv[1][0]):
        print(f"| {kind} | {ms(dur):.2f} | {100 * dur / window:.1f}% | {count / steps:.0f} |")
    print(f"| idle gaps between kernels | {ms(window - busy):.2f} | {100 * (window - busy) / window:.1f}% | |")
    print()
    print(f"The {top} costliest kernels:")
    print()
    print("| kernel | kind | ms per step | launches per step |")
    print("|---|---|---|---|")
    for name, (dur, count) in sorted(by_name.items(), key=lambda kv: -kv[1][0])[:top]:
        short = name if len(name) <= 90 else name[:87] + "..."
        print(f"| `{short}` | {kind_of(name)} | {ms(dur):.3f} | {count / steps:.0f} |")


def summarize_cpu(events, steps, top):
    ops = [e for e in events if e.get("cat") == "cpu_op"]
    if not ops:
        die("the trace holds neither GPU kernels nor CPU operators")
    by_name = collections.defaultdict(lambda: [0.0, 0])
    for e in ops:
        by_name[e["name"]][0] += e.get("dur", 0)
        by_name[e["name"]][1] += 1
    print(f"CPU operators: {len(ops)} over {steps} step(s) (no GPU kernels in the trace); inclusive times")
    print()
    print("| operator | ms per step (inclusive) | calls per step |")
    print("|---|---|---|")
    for name, (dur, count) in sorted(by_name.items(), key=lambda kv: -kv[1][0])[:top]:
        print(f"| `{name}` | {dur / 1000.0 / steps:.2f} | {count / steps:.0f} |")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("trace")
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--top", type=int, default=15)
    args = p.parse_args(argv)
    if args.steps < 1 or args.top < 1:
        die("--steps and --top must be at least 1")
    try:
        with open(args.trace) as f:
            trace = json.load(f)
    except OSError as e:
        die(f"{args.trace}: {e.strerror}")
    except ValueError as e:
        die(f"{args.trace}: not JSON ({e})")
    events = trace.get("traceEvents") if isinstance(trace, dict) else None
    if not isinstance(events, list):
        die(f"{args.trace}: not a Chrome trace (no traceEvents list)")
    events = [e for e in events if isinstance(e, dict) and e.get("ph") == "X" and "ts" in e]
    gpu = [e for e in events if e.get("cat") in GPU_CATEGORIES]
    if gpu:
        summarize_gpu(gpu, args.steps, args.top)
    else:
        summarize_cpu(events, args.steps, args.top)


if __name__ == "__main__":
    main()
