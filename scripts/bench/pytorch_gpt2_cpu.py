#!/usr/bin/env python3
"""The Python PyTorch twin of `mygpt-ddp train --preset gpt2` on CPU token shards, for
scripts/bench_gpt2_cpu.sh. One process, or DDP over gloo when started by torchrun:

  python  scripts/bench/pytorch_gpt2_cpu.py --data SHARDS --threads 2 ...
  torchrun --standalone --nproc_per_node 2 scripts/bench/pytorch_gpt2_cpu.py --data SHARDS --threads 1 ...

Everything but the data comes from pytorch_gpt_train.py: the model, the rank-strided loader, the LR
schedule, the optimizer and the timed training loop (DDP when started by torchrun). What this file adds
is what `--preset gpt2` on token data changes, mirroring:
  model/gpt_config.cpp            gpt2: 12 layers, 12 heads, 768 wide, block 1024, vocab 50304
                                  (padded), no dropout, biases
  launcher/recipe.cpp             the gpt2 recipe's lr 6e-4, min lr 6e-5, 715 warmup steps (the
                                  flags here default to them)
  dataloader/token_stream.cpp     llm.c .bin shards (256 x int32 header, uint16 tokens) of the
                                  directory's train_* files, in name order, as one stream
A step line is printed after every step (--log-every 1): step_cpu_monitor.py watches for them.

The last line of (rank 0's) output is machine-readable:
  RESULT {"median_tok_per_sec": ..., "median_dt_ms": ..., ...}
"""
import argparse
import glob
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pytorch_gpt_train as twin  # noqa: E402  (model, loaders, LR schedule, optimizer, training loop)
from llmc_shard import read_llmc_shard  # noqa: E402

GPT2_SHAPE = {"n_layer": 12, "n_head": 12, "n_embd": 768, "block_size": 1024, "vocab_size": 50304}


def read_train_tokens(spec):
    paths = sorted(glob.glob(os.path.join(spec, "*train*.bin"))) if os.path.isdir(spec) else [spec]
    if not paths:
        sys.exit(f"no train_*.bin shards in {spec}")
    tokens = np.concatenate([read_llmc_shard(path) for path in paths])
    return torch.from_numpy(tokens.astype(np.int64)), paths

def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", required=True, help="directory of llm.c train_*.bin shards, or one shard")
    twin.add_training_flags(p, steps=6, batch_size=1, seq_len=256, lr=6e-4, min_lr=6e-5, warmup_steps=715,
                            skip_steps=2, log_every=1)
    for name, value in GPT2_SHAPE.items():
        p.add_argument("--" + name.replace("_", "-"), type=int, default=value)
    p.add_argument("--compile", action="store_true", help="torch.compile the model (inductor's C++ code; default: eager)")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    ranks = twin.Ranks(args.backend)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    tokens, paths = read_train_tokens(args.data)
    seq_len = args.seq_len or args.block_size
    if seq_len > args.block_size:
        sys.exit(f"--seq-len {seq_len} exceeds the block size {args.block_size}")
    torch.manual_seed(args.seed)
    model = twin.Gpt(args.vocab_size, args.block_size, args.n_layer, args.n_head, args.n_embd, dropout=0.0)
    ranks.say(ranks.header())
    ranks.say(f"data: {len(paths)} shard(s) in {args.data} | {tokens.numel()} tokens")
    ranks.say(f"model: {model.summary()} | {'torch.compile' if args.compile else 'eager'}")
    forward = ranks.wrap(model, args.bucket_mb)
    if args.compile:
        forward = torch.compile(forward)  # around DDP, as PyTorch's DDP notes advise
    twin.train(args, forward, model, ranks.loader(tokens, args.batch_size, seq_len), ranks, seq_len,
               mode="compile" if args.compile else "eager")
    ranks.close()


if __name__ == "__main__":
    main()
