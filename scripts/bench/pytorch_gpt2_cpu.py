#!/usr/bin/env python3
"""The Python PyTorch twin of `mygpt-ddp train --preset gpt2` on CPU token shards, for
scripts/bench_gpt2_cpu.sh. One process, or DDP over gloo when started by torchrun:

  python  scripts/bench/pytorch_gpt2_cpu.py --data SHARDS --threads 2 ...
  torchrun --standalone --nproc_per_node 2 scripts/bench/pytorch_gpt2_cpu.py --data SHARDS --threads 1 ...

Everything but the data comes from the other twins: the model, the sequential loader and the LR
schedule from pytorch_gpt_train.py, the DDP wrapper and the rank-strided loader from
pytorch_ddp_train.py. What this file adds is what `--preset gpt2` on token data changes, mirroring:
  model/gpt_config.cpp            gpt2: 12 layers, 12 heads, 768 wide, block 1024, vocab 50304
                                  (padded), no dropout, biases
  launcher/recipe.cpp             the gpt2 recipe's lr 6e-4, min lr 6e-5, 715 warmup steps (the
                                  flags here default to them)
  dataloader/token_stream.cpp     llm.c .bin shards (256 x int32 header, uint16 tokens) of the
                                  directory's train_* files, in name order, as one stream
The training step is the one the other twins time (grads to None, loss/A per micro-batch, DDP sync
on the last micro-batch only, loss averaged over ranks, clip, fused AdamW, loss.item()).

The last line of (rank 0's) output is machine-readable:
  RESULT {"median_tok_per_sec": ..., "median_dt_ms": ..., ...}
"""
import argparse
import contextlib
import glob
import json
import math
import os
import statistics
import sys
import time

import numpy as np
import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pytorch_gpt_train as twin  # noqa: E402  (model, sequential loader, LR schedule)
import pytorch_ddp_train as ddp_twin  # noqa: E402  (DDP wrapper, rank-strided loader)

GPT2_SHAPE = {"n_layer": 12, "n_head": 12, "n_embd": 768, "block_size": 1024, "vocab_size": 50304}


def read_train_tokens(spec):
    paths = sorted(glob.glob(os.path.join(spec, "*train*.bin"))) if os.path.isdir(spec) else [spec]
    if not paths:
        sys.exit(f"no train_*.bin shards in {spec}")
    parts = []
    for path in paths:
        header = np.fromfile(path, dtype=np.int32, count=256)
        if header[0] != 20240520:
            sys.exit(f"{path}: not an llm.c shard (magic {header[0]})")
        tokens = np.fromfile(path, dtype=np.uint16, offset=256 * 4)
        if len(tokens) != header[2]:
            sys.exit(f"{path}: header says {header[2]} tokens, file holds {len(tokens)}")
        parts.append(tokens)
    return torch.from_numpy(np.concatenate(parts).astype(np.int64)), paths


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", required=True, help="directory of llm.c train_*.bin shards, or one shard")
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--batch-size", type=int, default=1)
    p.add_argument("--seq-len", type=int, default=256)
    p.add_argument("--grad-accum", type=int, default=1)
    p.add_argument("--lr", type=float, default=6e-4)
    p.add_argument("--min-lr", type=float, default=6e-5)
    p.add_argument("--warmup-steps", type=int, default=715)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--grad-clip", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--threads", type=int, default=0, help="intra-op CPU threads per process; 0 leaves torch's default")
    p.add_argument("--skip-steps", type=int, default=2, help="warm-up steps left out of the median")
    p.add_argument("--bucket-mb", type=float, default=25.0, help="DDP bucket_cap_mb")
    p.add_argument("--metrics", help="rank 0 writes one JSON line per step here (same keys as metrics.jsonl)")
    for name, value in GPT2_SHAPE.items():
        p.add_argument("--" + name.replace("_", "-"), type=int, default=value)
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    distributed = "WORLD_SIZE" in os.environ
    if distributed:
        dist.init_process_group("gloo")
    rank, world = (dist.get_rank(), dist.get_world_size()) if distributed else (0, 1)
    if args.threads > 0:
        torch.set_num_threads(args.threads)

    def say(line):
        if rank == 0:
            print(line, flush=True)

    tokens, paths = read_train_tokens(args.data)
    if args.seq_len > args.block_size:
        sys.exit(f"--seq-len {args.seq_len} exceeds the block size {args.block_size}")
    torch.manual_seed(args.seed)
    model = twin.Gpt(args.vocab_size, args.block_size, args.n_layer, args.n_head, args.n_embd, dropout=0.0)
    params = list(model.parameters())
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                                   {"params": no_decay, "weight_decay": 0.0}],
                                  lr=args.lr, betas=(0.9, 0.95), eps=1e-8, fused=True)
    if distributed:
        forward = torch.nn.parallel.DistributedDataParallel(ddp_twin.GptLoss(model), bucket_cap_mb=args.bucket_mb)
        loader = ddp_twin.ShardedBatchLoader(tokens, args.batch_size, args.seq_len, rank, world)
    else:
        forward = ddp_twin.GptLoss(model)
        loader = twin.SequentialBatchLoader(tokens, args.batch_size, args.seq_len)
    max_norm = args.grad_clip if args.grad_clip > 0 else math.inf
    tokens_per_step = args.batch_size * args.seq_len * args.grad_accum * world

    say(f"torch {torch.__version__} | {world} process(es){', DDP over gloo' if distributed else ''} | "
        f"threads {torch.get_num_threads()} per process")
    say(f"data: {len(paths)} shard(s) in {args.data} | {tokens.numel()} tokens")
    say(f"model: {args.n_layer} layers, {args.n_head} heads, {args.n_embd} wide, block {args.block_size}, "
        f"vocab {args.vocab_size} | {sum(p.numel() for p in params)} parameters")
    say(f"batch: {args.batch_size} x {args.seq_len} tokens x {args.grad_accum} accumulation x {world} = "
        f"{tokens_per_step} tokens per step")
    metrics = open(args.metrics, "w") if args.metrics and rank == 0 else None

    def train_step(step):
        forward.train()
        lr = twin.lr_at(step, args.lr, args.min_lr, args.warmup_steps, args.steps)
        for group in optimizer.param_groups:
            group["lr"] = lr
        optimizer.zero_grad(set_to_none=True)
        loss_sum = torch.zeros((), dtype=torch.float)
        for micro in range(args.grad_accum):
            x, y = loader.next()
            last = micro == args.grad_accum - 1
            with contextlib.nullcontext() if last or not distributed else forward.no_sync():
                loss = forward(x, y) / float(args.grad_accum)
                loss_sum += loss.detach()
                loss.backward()
        if distributed:
            dist.all_reduce(loss_sum)  # gloo has no AVG: sum, then divide
            loss_sum /= world
        grad_norm = torch.nn.utils.clip_grad_norm_(params, max_norm)
        optimizer.step()
        return loss_sum.item(), grad_norm.item(), lr

    dts, losses = [], []
    for step in range(args.steps):
        t0 = time.perf_counter()
        loss, grad_norm, lr = train_step(step)
        dt = time.perf_counter() - t0
        losses.append(loss)
        if step >= args.skip_steps:
            dts.append(dt)
        say(f"step {step:5d} | loss: {loss:.6f} | lr {lr:.4e} | norm: {grad_norm:.4f} | "
            f"dt: {dt * 1000:.2f}ms | tok/sec: {tokens_per_step / dt:.2f}")
        if metrics:
            metrics.write(json.dumps({"step": step, "loss": loss, "lr": lr, "grad_norm": grad_norm,
                                      "dt_ms": dt * 1000, "tok_per_sec": tokens_per_step / dt}) + "\n")
    if metrics:
        metrics.close()
    say("RESULT " + json.dumps({
        "median_dt_ms": statistics.median(dts) * 1000 if dts else None,
        "median_tok_per_sec": tokens_per_step / statistics.median(dts) if dts else None,
        "steps_timed": len(dts), "first_loss": losses[0], "last_loss": losses[-1],
        "torch": torch.__version__, "threads": torch.get_num_threads(), "world_size": world,
    }))
    if distributed:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
