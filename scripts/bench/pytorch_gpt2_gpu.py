#!/usr/bin/env python3
"""The Python PyTorch twin of `mygpt-ddp train --preset gpt2 --device cuda` on token shards, for
scripts/bench_gpt2_gpu.sh: eager, or with --compile under torch.compile, in its default mode or in
--compile-mode max-autotune (Triton autotuning of matmuls and fused kernels) or reduce-overhead (the
compiled forward and backward replayed as CUDA graphs) (build-nanogpt's setup: bf16
autocast around forward, fp32 weights, fused AdamW, flash attention through
scaled_dot_product_attention, TF32 matmuls for what stays fp32).

Everything else is pytorch_gpt_train.py's (model, loader, schedule, optimizer, timed loop) and
pytorch_gpt2_cpu.py's (the shards): the same code the CPU twins run. Each timed step ends with
loss.item(), a device sync, as the C++ trainer's dt. --metrics FILE writes one JSON line per step with
metrics.jsonl's keys (on CUDA also peak_mem_mib, the allocator's peak so far), which
scripts/bench/step_stats.py sums as it sums the C++ side's.

The last line of output is machine-readable:
  RESULT {"median_tok_per_sec": ..., "median_dt_ms": ..., "peak_memory_mib": ..., ...}
"""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pytorch_gpt_train as twin  # noqa: E402
from pytorch_gpt2_cpu import GPT2_SHAPE, read_train_tokens  # noqa: E402


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", required=True, help="directory of llm.c train_*.bin shards, or one shard")
    p.add_argument("--device", default="cuda")
    p.add_argument("--compile", action="store_true", help="torch.compile the model (default: eager)")
    p.add_argument("--compile-mode", default="default", choices=["default", "max-autotune", "reduce-overhead"],
                   help="torch.compile's mode, with --compile")
    twin.add_training_flags(p, precision="bf16", steps=60, batch_size=16, seq_len=1024, lr=6e-4, min_lr=6e-5, warmup_steps=715,
                            skip_steps=10, log_every=10)
    for name, value in GPT2_SHAPE.items():
        p.add_argument("--" + name.replace("_", "-"), type=int, default=value)
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    if args.compile_mode != "default" and not args.compile:
        sys.exit(f"--compile-mode {args.compile_mode} is torch.compile's: give --compile too")
    device = torch.device(args.device)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True  # as pick_device does for the C++ side
        torch.backends.cudnn.allow_tf32 = True
    ranks = twin.Ranks(args.backend)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    tokens, paths = read_train_tokens(args.data)
    seq_len = args.seq_len or args.block_size
    torch.manual_seed(args.seed)
    model = twin.Gpt(args.vocab_size, args.block_size, args.n_layer, args.n_head, args.n_embd, dropout=0.0)
    model.to(device)
    forward = ranks.wrap(model, args.bucket_mb)
    if args.compile:
        forward = torch.compile(forward, mode=None if args.compile_mode == "default" else args.compile_mode)
    mode = f"torch.compile mode={args.compile_mode}" if args.compile else "eager"
    ranks.say(ranks.header() + f" | {device} | {args.precision} | {mode}")
    ranks.say(f"data: {len(paths)} shard(s) in {args.data} | {tokens.numel()} tokens")
    ranks.say(f"model: {model.summary()}")
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    extra = {"mode": mode, "precision": args.precision, "device": str(device)}
    if device.type == "cuda":
        # The peak is known only after the loop; train() prints RESULT, so it is added by a second line.
        twin.train(args, forward, model, ranks.loader(tokens, args.batch_size, seq_len), ranks, seq_len, **extra)
        ranks.say("MEMORY " + json.dumps({"peak_memory_mib": torch.cuda.max_memory_allocated(device) / 2**20,
                                           "gpu": torch.cuda.get_device_name(device)}))
    else:
        twin.train(args, forward, model, ranks.loader(tokens, args.batch_size, seq_len), ranks, seq_len, **extra)
    ranks.close()


if __name__ == "__main__":
    main()
