#!/usr/bin/env python3
"""PyTorch DistributedDataParallel twin of `mpirun -np N mygpt-ddp train` on CPU, for benchmarks.

Run it under torchrun, one process per rank:
  torchrun --standalone --nproc_per_node 2 scripts/bench/pytorch_ddp_train.py --data FILE --threads 1 ...

The model, the data, the LR schedule and the optimizer come from scripts/bench/pytorch_gpt_train.py
(the single-process twin; it takes the same flags); this file adds only what DDP changes, mirroring
our C++ code:
  launcher/train_command.cpp      seed, then build the model on every rank; rank 0's weights win
                                  (our broadcast_model_state; DDP broadcasts at construction)
  dataloader/batch_loader.cpp     ShardedBatchLoader: rank r reads chunk (position + r), then the
                                  position moves on by world_size chunks
  trainer/trainer.cpp             loss/A per micro-batch, gradient sync only on the last micro-batch
                                  (DDP.no_sync before it), the loss averaged over ranks (one more
                                  all-reduce), clip, AdamW (fused), loss.item()
  trainer/gradient_sync.cpp       25 MiB buckets all-reduced during backward (DDP's Reducer, gloo)
Tokens per step count every rank's tokens; rank 0 times the step, prints and writes --metrics.

The last line of rank 0's output is machine-readable:
  RESULT {"median_tok_per_sec": ..., ...}
"""
import argparse
import contextlib
import json
import math
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pytorch_gpt_train as twin  # noqa: E402  (the shared model, loader, schedule and flags)


class GptLoss(nn.Module):
    """DDP wraps forward(); ours returns the loss, as GptImpl::loss does."""

    def __init__(self, gpt):
        super().__init__()
        self.gpt = gpt

    def forward(self, idx, targets):
        return self.gpt.loss(idx, targets)


class ShardedBatchLoader(twin.SequentialBatchLoader):
    """Rank r of W reads chunks r, r + W, r + 2W, ... of the same cyclic stream."""

    def __init__(self, tokens, batch_size, seq_len, rank, world_size):
        super().__init__(tokens, batch_size, seq_len)
        self.position, self.world_size = rank, world_size

    def next(self):
        batch = super().next()  # advances the position by one chunk
        self.position += self.world_size - 1
        return batch


def main(argv=None):
    extra = argparse.ArgumentParser(add_help=False)
    extra.add_argument("--bucket-mb", type=float, default=25.0, help="DDP bucket_cap_mb")
    extra.add_argument("--backend", default="gloo")
    ddp_args, rest = extra.parse_known_args(argv)
    args = twin.parse_args(rest)

    dist.init_process_group(ddp_args.backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    if args.threads > 0:
        torch.set_num_threads(args.threads)

    with open(args.data, encoding="utf-8") as f:
        text = f.read()
    chars, ids = twin.char_tokenize(text)
    n_train = int(len(ids) * (1.0 - args.val_fraction))
    train_tokens = torch.tensor(ids[:n_train], dtype=torch.long)

    n_layer, n_head, n_embd, block_size, dropout = twin.PRESETS[args.preset]
    n_layer = args.n_layer or n_layer
    n_head = args.n_head or n_head
    n_embd = args.n_embd or n_embd
    block_size = args.block_size or block_size
    dropout = dropout if args.dropout is None else args.dropout
    seq_len = args.seq_len or block_size
    if seq_len > block_size:
        sys.exit(f"--seq-len {seq_len} exceeds the model's block size {block_size}")

    torch.manual_seed(args.seed)
    model = twin.Gpt(len(chars), block_size, n_layer, n_head, n_embd, dropout)
    ddp = DistributedDataParallel(GptLoss(model), bucket_cap_mb=ddp_args.bucket_mb)
    params = list(model.parameters())
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                                   {"params": no_decay, "weight_decay": 0.0}],
                                  lr=args.lr, betas=(0.9, 0.95), eps=1e-8, fused=True)
    loader = ShardedBatchLoader(train_tokens, args.batch_size, seq_len, rank, world)
    max_norm = args.grad_clip if args.grad_clip > 0 else math.inf
    tokens_per_step = args.batch_size * seq_len * args.grad_accum * world

    def say(line):
        if rank == 0:
            print(line, flush=True)

    say(f"torch {torch.__version__} | {world} ranks, backend {ddp_args.backend} | threads {torch.get_num_threads()} per rank")
    say(f"model: {n_layer} layers, {n_head} heads, {n_embd} wide, block {block_size} | "
        f"{sum(p.numel() for p in params)} parameters | DDP buckets {ddp_args.bucket_mb} MiB")
    say(f"batch: {args.batch_size} x {seq_len} tokens x {args.grad_accum} accumulation x {world} ranks = "
        f"{tokens_per_step} tokens per step")
    metrics = open(args.metrics, "w") if args.metrics and rank == 0 else None

    def train_step(step):
        ddp.train()
        lr = twin.lr_at(step, args.lr, args.min_lr, args.warmup_steps, args.steps)
        for group in optimizer.param_groups:
            group["lr"] = lr
        optimizer.zero_grad(set_to_none=True)
        loss_sum = torch.zeros((), dtype=torch.float)
        for micro in range(args.grad_accum):
            x, y = loader.next()
            last = micro == args.grad_accum - 1
            with contextlib.nullcontext() if last else ddp.no_sync():
                loss = ddp(x, y) / float(args.grad_accum)
                loss_sum += loss.detach()
                loss.backward()
        dist.all_reduce(loss_sum)  # gloo has no AVG: sum, then divide
        loss_sum /= world
        grad_norm = torch.nn.utils.clip_grad_norm_(params, max_norm)
        optimizer.step()
        return loss_sum.item(), grad_norm.item(), lr

    rates, losses = [], []
    for step in range(args.steps):
        t0 = time.perf_counter()
        loss, grad_norm, lr = train_step(step)
        dt = time.perf_counter() - t0
        tok_per_sec = tokens_per_step / dt
        losses.append(loss)
        if step >= args.skip_steps:
            rates.append(tok_per_sec)
        if step % args.log_every == 0 or step == args.steps - 1:
            say(f"step {step:5d} | loss: {loss:.6f} | lr {lr:.4e} | norm: {grad_norm:.4f} | "
                f"dt: {dt * 1000:.2f}ms | tok/sec: {tok_per_sec:.2f}")
        if metrics:
            metrics.write(json.dumps({"step": step, "loss": loss, "lr": lr, "grad_norm": grad_norm,
                                      "dt_ms": dt * 1000, "tok_per_sec": tok_per_sec}) + "\n")
    if metrics:
        metrics.close()
    say("RESULT " + json.dumps({
        "median_tok_per_sec": statistics.median(rates) if rates else None,
        "steps_timed": len(rates), "first_loss": losses[0], "last_loss": losses[-1],
        "ln_vocab": math.log(len(chars)), "torch": torch.__version__, "threads": torch.get_num_threads(),
        "world_size": world, "backend": ddp_args.backend,
    }))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
