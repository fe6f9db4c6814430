#!/usr/bin/env python3
"""The Python PyTorch twin of `mygpt-ddp train` on one CPU process, for side-by-side benchmarks, and
the one implementation that every PyTorch twin (pytorch_ddp_train.py, pytorch_gpt2_cpu.py,
pytorch_allreduce.py) imports: the model, the loaders, the schedule, the optimizer and the timed
training loop, single-process or DDP.

It mirrors, line for line where it matters, the C++ code it is compared with:
  model/gpt.cpp, model/gpt_config.cpp,  GPT-2: token + position embeddings, pre-LN blocks, causal
  model/transformer_block.cpp           scaled_dot_product_attention, tanh-GELU MLP, final LayerNorm,
                                        output head tied to the token embedding, GPT-2 init
  tokenizer/char_tokenizer.cpp,        character tokenizer (sorted unique code points), last
  dataloader/token_source.cpp           val-fraction held out (unused here: no validation)
  dataloader/batch_loader.cpp           sequential consecutive B*T(+1) chunks, cyclic stream; with
                                        N ranks rank r reads chunk (position + r), then the
                                        position moves on by N chunks (ShardedBatchLoader)
  launcher/train_command.cpp            seed, then build the model on every rank; rank 0's weights
                                        win (our broadcast_model_state; DDP broadcasts them)
  trainer/trainer.cpp                   grads set to None, loss/A per micro-batch, gradient sync
                                        only on the last one (DDP.no_sync before it), the loss
                                        averaged over ranks, clip_grad_norm_, LR schedule, AdamW
                                        step, loss.item() per step
  trainer/gradient_sync.cpp             buckets all-reduced during backward (DDP's Reducer, gloo)
  trainer/adamw.cpp                     two groups (dim >= 2 decayed), betas (0.9, 0.95), eps 1e-8,
                                        ATen's fused AdamW kernel (fused=True)
  trainer/lr_schedule.cpp               linear warmup (step + 1) then cosine to min_lr at --steps

The random initialisation cannot be shared with the C++ side (different draw order), so compare loss
curves, not exact numbers. Timing covers the same span as the C++ trainer's dt: one whole
train_step (batch, forward, backward, clip, optimizer step, loss.item()).

The last line of output is machine-readable:
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
import torch.nn.functional as F
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel
from torch.utils.checkpoint import checkpoint

# model/gpt_config.cpp presets: n_layer, n_head, n_embd, block_size, dropout (character data: the
# tokenizer decides the vocabulary size).
PRESETS = {
    "shakespeare-char": (6, 6, 384, 256, 0.2),
    "small": (4, 4, 128, 128, 0.0),
    "tiny": (2, 2, 32, 32, 0.0),
}


class LayerNorm(nn.Module):
    def __init__(self, width, bias):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))
        self.bias = nn.Parameter(torch.zeros(width)) if bias else None

    def forward(self, x):
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, 1e-5)


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, dropout, bias):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd, bias=bias)
        self.c_proj = nn.Linear(n_embd, n_embd, bias=bias)
        self.resid_dropout = nn.Dropout(dropout)
        self.n_head = n_head
        self.dropout = dropout

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=None,
                                           dropout_p=self.dropout if self.training else 0.0, is_causal=True)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class Mlp(nn.Module):
    def __init__(self, n_embd, dropout, bias):
        super().__init__()
        self.c_fc = nn.Linear(n_embd, 4 * n_embd, bias=bias)
        self.c_proj = nn.Linear(4 * n_embd, n_embd, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(F.gelu(self.c_fc(x), approximate="tanh")))


class Block(nn.Module):
    def __init__(self, n_embd, n_head, dropout, bias):
        super().__init__()
        self.ln_1 = LayerNorm(n_embd, bias)
        self.attn = CausalSelfAttention(n_embd, n_head, dropout, bias)
        self.ln_2 = LayerNorm(n_embd, bias)
        self.mlp = Mlp(n_embd, dropout, bias)

    recompute = "none"  # --recompute: torch.utils.checkpoint around the MLP or the whole block

    def forward(self, x):
        if self.recompute == "block" and torch.is_grad_enabled():
            return checkpoint(self.plain_forward, x, use_reentrant=False)
        return self.plain_forward(x)

    def plain_forward(self, x):
        x = x + self.attn(self.ln_1(x))
        if self.recompute == "mlp" and torch.is_grad_enabled():
            return x + checkpoint(lambda h: self.mlp(self.ln_2(h)), x, use_reentrant=False)
        return x + self.mlp(self.ln_2(x))


class Gpt(nn.Module):
    def __init__(self, vocab_size, block_size, n_layer, n_head, n_embd, dropout, bias=True):
        super().__init__()
        if n_embd % n_head != 0:
            raise ValueError(f"n_head ({n_head}) does not divide n_embd ({n_embd})")
        self.block_size, self.n_layer, self.n_head, self.n_embd = block_size, n_layer, n_head, n_embd
        self.wte = nn.Embedding(vocab_size, n_embd)
        self.wpe = nn.Embedding(block_size, n_embd)
        self.drop = nn.Dropout(dropout)
        self.h = nn.ModuleList([Block(n_embd, n_head, dropout, bias) for _ in range(n_layer)])
        self.ln_f = LayerNorm(n_embd, bias)
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self):
        # GptImpl::reset_parameters: N(0, 0.02), residual writers (c_proj) N(0, 0.02/sqrt(2 n_layer)),
        # zero biases, unit LayerNorm gains.
        std = 0.02
        residual_std = std / math.sqrt(2.0 * self.n_layer)
        self.wte.weight.normal_(0.0, std)
        self.wpe.weight.normal_(0.0, std)
        for name, module in self.named_modules():
            if isinstance(module, nn.Linear):
                module.weight.normal_(0.0, residual_std if name.endswith("c_proj") else std)
                if module.bias is not None:
                    module.bias.zero_()
            elif isinstance(module, LayerNorm):
                module.weight.fill_(1.0)
                if module.bias is not None:
                    module.bias.zero_()

    def forward(self, idx):
        T = idx.size(1)
        if T > self.block_size:
            raise ValueError(f"sequence length {T} exceeds block size {self.block_size}")
        pos = torch.arange(T, dtype=torch.long, device=idx.device)
        x = self.drop(self.wte(idx) + self.wpe(pos))
        for block in self.h:
            x = block(x)
        x = self.ln_f(x)
        return F.linear(x, self.wte.weight)  # weight tying

    def loss(self, idx, targets):
        logits = self(idx)
        return F.cross_entropy(logits.view(-1, logits.size(-1)).float(), targets.reshape(-1))

    def summary(self):
        return (f"{self.n_layer} layers, {self.n_head} heads, {self.n_embd} wide, block {self.block_size}, "
                f"vocab {self.wte.num_embeddings} | {sum(p.numel() for p in self.parameters())} parameters")


class GptLoss(nn.Module):
    """DDP wraps forward(); ours returns the loss, as GptImpl::loss does."""

    def __init__(self, gpt):
        super().__init__()
        self.gpt = gpt

    def forward(self, idx, targets):
        return self.gpt.loss(idx, targets)


def char_tokenize(text):
    chars = sorted(set(text))  # code-point order, as CharTokenizer::from_text
    ids = {c: i for i, c in enumerate(chars)}
    return chars, [ids[c] for c in text]


class SequentialBatchLoader:
    """ShardedBatchLoader for one rank: consecutive chunks of B*T(+1) tokens from a cyclic stream."""

    def __init__(self, tokens, batch_size, seq_len):
        if tokens.numel() < batch_size * seq_len + 1:
            raise ValueError("data holds fewer tokens than one batch needs")
        self.tokens, self.B, self.T, self.position = tokens, batch_size, seq_len, 0

    def next(self):
        chunk = self.B * self.T
        n = self.tokens.numel()
        start = (self.position * chunk) % n
        if start + chunk + 1 <= n:
            buffer = self.tokens[start:start + chunk + 1].clone()
        else:  # the read runs past the end and continues at token 0
            idx = torch.arange(start, start + chunk + 1) % n
            buffer = self.tokens[idx]
        self.position += 1
        return buffer[:chunk].view(self.B, self.T), buffer[1:].view(self.B, self.T)


class ShardedBatchLoader(SequentialBatchLoader):
    """Rank r of W reads chunks r, r + W, r + 2W, ... of the same cyclic stream."""

    def __init__(self, tokens, batch_size, seq_len, rank, world_size):
        super().__init__(tokens, batch_size, seq_len)
        self.position, self.world_size = rank, world_size

    def next(self):
        batch = super().next()  # advances the position by one chunk
        self.position += self.world_size - 1
        return batch


def lr_at(step, max_lr, min_lr, warmup_steps, decay_steps):
    if step < warmup_steps:
        return max_lr * (step + 1) / warmup_steps
    if step >= decay_steps:
        return min_lr
    progress = (step - warmup_steps) / (decay_steps - warmup_steps)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * progress)) * (max_lr - min_lr)


def adamw(params, lr, weight_decay, zero=0):
    """trainer/adamw.cpp: matrices decayed, vectors not; betas (0.9, 0.95), eps 1e-8, fused kernel.
    zero=1 (--zero 1, trainer/sharded_adamw.cpp): torch's ZeroRedundancyOptimizer around the same AdamW."""
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    if zero:
        return ZeroRedundancyOptimizer(groups, optimizer_class=torch.optim.AdamW, lr=lr, betas=(0.9, 0.95), eps=1e-8,
                                       fused=True)
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95), eps=1e-8, fused=True)


class Ranks:
    """This process among the twin's processes: one of a torch.distributed group (under torchrun, or
    always when required), else the only one. Rank 0 alone prints and writes metrics."""

    def __init__(self, backend="gloo", required=False):
        self.distributed = required or "WORLD_SIZE" in os.environ
        if self.distributed:
            dist.init_process_group(backend)
        self.rank = dist.get_rank() if self.distributed else 0
        self.world = dist.get_world_size() if self.distributed else 1
        self.backend = backend

    def say(self, line):
        if self.rank == 0:
            print(line, flush=True)

    def header(self):
        ddp = f", DDP over {self.backend}" if self.distributed else ""
        return f"torch {torch.__version__} | {self.world} process(es){ddp} | threads {torch.get_num_threads()} per process"

    def wrap(self, model, bucket_mb):
        """The module the training step calls: DDP with bucket_cap_mb across ranks, else the loss alone."""
        loss = GptLoss(model)
        return DistributedDataParallel(loss, bucket_cap_mb=bucket_mb) if self.distributed else loss

    def loader(self, tokens, batch_size, seq_len):
        return ShardedBatchLoader(tokens, batch_size, seq_len, self.rank, self.world)

    def close(self):
        if self.distributed:
            dist.destroy_process_group()


def train(args, forward, model, loader, ranks, seq_len, **result_extra):
    """The timed loop every twin runs: args.steps optimizer steps of args.grad_accum micro-batches,
    each step timed whole (batch, forward, backward, sync, clip, AdamW, loss.item()) as the C++
    trainer's dt. Rank 0 prints a step line every args.log_every steps and the last, writes
    args.metrics (metrics.jsonl's keys) and ends with `RESULT {json}` (result_extra added)."""
    params = list(model.parameters())
    optimizer = adamw(params, args.lr, args.weight_decay, getattr(args, "zero", 0))
    Block.recompute = getattr(args, "recompute", "none")
    # --precision as mygpt-ddp's: autocast around forward with fp32 weights; fp16 with torch's GradScaler
    # (its defaults are mygpt-ddp's). The GPU twin (pytorch_gpt2_gpu.py) also sets the device.
    device = torch.device(getattr(args, "device", "cpu"))
    precision = getattr(args, "precision", "fp32")
    if precision not in ("fp32", "bf16", "fp16"):
        raise SystemExit(f"--precision must be fp32, bf16 or fp16, got {precision!r}")
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
    autocast = (lambda: torch.autocast(device_type=device.type, dtype=dtype)) if dtype else contextlib.nullcontext
    scaler = torch.amp.GradScaler(device.type, enabled=precision == "fp16")
    max_norm = args.grad_clip if args.grad_clip > 0 else math.inf
    tokens_per_step = args.batch_size * seq_len * args.grad_accum * ranks.world
    ranks.say(f"batch: {args.batch_size} x {seq_len} tokens x {args.grad_accum} accumulation x {ranks.world} "
              f"rank(s) = {tokens_per_step} tokens per step")
    metrics = open(args.metrics, "w") if args.metrics and ranks.rank == 0 else None

    def train_step(step):
        forward.train()
        lr = lr_at(step, args.lr, args.min_lr, args.warmup_steps, args.steps)
        for group in optimizer.param_groups:
            group["lr"] = lr
        optimizer.zero_grad(set_to_none=True)
        loss_sum = torch.zeros((), dtype=torch.float, device=device)
        for micro in range(args.grad_accum):
            x, y = loader.next()
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            last = micro == args.grad_accum - 1
            with contextlib.nullcontext() if last or not ranks.distributed else forward.no_sync():
                with autocast():
                    loss = forward(x, y) / float(args.grad_accum)
                loss_sum += loss.detach()
                scaler.scale(loss).backward()
        if ranks.distributed:
            dist.all_reduce(loss_sum)  # gloo has no AVG: sum, then divide
            loss_sum /= ranks.world
        scaler.unscale_(optimizer)
        grad_norm = torch.nn.utils.clip_grad_norm_(params, max_norm)
        scaler.step(optimizer)  # skipped where the gradients overflowed
        scaler.update()
        return loss_sum.item(), grad_norm.item(), lr

    dts, losses = [], []
    profile = getattr(args, "profile", "") if ranks.rank == 0 else ""
    # The same window as mygpt-ddp's (trainer/step_profiler.cpp): after 10 warm-up steps, or as late as fits.
    profile_first = max(0, min(10, args.steps - getattr(args, "profile_steps", 3)))
    profiler = None
    for step in range(args.steps):
        if profile and step == profile_first:
            activities = [torch.profiler.ProfilerActivity.CPU]
            if torch.cuda.is_available():
                activities.append(torch.profiler.ProfilerActivity.CUDA)
            profiler = torch.profiler.profile(activities=activities)
            profiler.start()
        t0 = time.perf_counter()
        loss, grad_norm, lr = train_step(step)
        dt = time.perf_counter() - t0
        if profiler is not None and step == profile_first + args.profile_steps - 1:
            profiler.stop()
            profiler.export_chrome_trace(profile)
            profiler = None
            ranks.say(f"profile: steps {profile_first}-{step} traced into {profile}")
        losses.append(loss)
        if step >= args.skip_steps:
            dts.append(dt)
        if step % args.log_every == 0 or step == args.steps - 1:
            ranks.say(f"step {step:5d} | loss: {loss:.6f} | lr {lr:.4e} | norm: {grad_norm:.4f} | "
                      f"dt: {dt * 1000:.2f}ms | tok/sec: {tokens_per_step / dt:.2f}")
        if metrics:
            record = {"step": step, "loss": loss, "lr": lr, "grad_norm": grad_norm, "dt_ms": dt * 1000,
                      "tok_per_sec": tokens_per_step / dt}
            if device.type == "cuda":  # as the C++ side's peak_mem_mib: the allocator's peak so far
                record["peak_mem_mib"] = torch.cuda.max_memory_allocated(device) / 2**20
            metrics.write(json.dumps(record) + "\n")
    if metrics:
        metrics.close()
    ranks.say("RESULT " + json.dumps({
        "median_tok_per_sec": statistics.median(tokens_per_step / dt for dt in dts) if dts else None,
        "median_dt_ms": statistics.median(dts) * 1000 if dts else None,
        "steps_timed": len(dts), "first_loss": losses[0], "last_loss": losses[-1],
        "torch": torch.__version__, "threads": torch.get_num_threads(), "world_size": ranks.world,
        **result_extra,
    }))


# The flags of train() and Ranks, named as mygpt-ddp train's; each twin chooses the defaults.
TRAINING_FLAGS = {
    "steps": 2000, "batch_size": 16, "seq_len": 0, "grad_accum": 1, "lr": 1e-3, "min_lr": 1e-4,
    "warmup_steps": 100, "weight_decay": 0.1, "grad_clip": 1.0, "seed": 1337, "threads": 0, "log_every": 10,
    "skip_steps": 5, "bucket_mb": 25.0, "backend": "gloo", "zero": 0, "recompute": "none", "precision": "fp32",
}
FLAG_HELP = {
    "seq_len": "0 means the model's block size",
    "threads": "intra-op CPU threads per process; 0 leaves torch's default",
    "skip_steps": "warm-up steps left out of the median",
    "bucket_mb": "DDP bucket_cap_mb (under torchrun)",
    "backend": "torch.distributed backend (under torchrun)",
    "zero": "1: torch's ZeroRedundancyOptimizer (under torchrun), as mygpt-ddp's --zero 1",
    "recompute": "none, mlp or block: torch.utils.checkpoint, as mygpt-ddp's --recompute",
    "precision": "fp32, bf16 or fp16 (autocast; fp16 with GradScaler), as mygpt-ddp's --precision",
}


def add_training_flags(p, **defaults):
    for name, value in (TRAINING_FLAGS | defaults).items():
        p.add_argument("--" + name.replace("_", "-"), type=type(value), default=value, help=FLAG_HELP.get(name))
    p.add_argument("--metrics", help="rank 0 writes one JSON line per step here (same keys as metrics.jsonl)")
    p.add_argument("--profile", default="", help="rank 0 writes a torch.profiler trace of --profile-steps steps "
                   "taken after the first 10 here, as mygpt-ddp train --profile (scripts/profile_summary.py)")
    p.add_argument("--profile-steps", type=int, default=3)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", required=True, help="UTF-8 text file (character tokenizer)")
    p.add_argument("--val-fraction", type=float, default=0.1)
    p.add_argument("--preset", default="small", choices=sorted(PRESETS))
    p.add_argument("--n-layer", type=int)
    p.add_argument("--n-head", type=int)
    p.add_argument("--n-embd", type=int)
    p.add_argument("--block-size", type=int)
    p.add_argument("--dropout", type=float)
    add_training_flags(p)
    return p.parse_args(argv)


def model_shape(args):
    """n_layer, n_head, n_embd, block_size, dropout: the preset's, with the flags given on top."""
    n_layer, n_head, n_embd, block_size, dropout = PRESETS[args.preset]
    return (args.n_layer or n_layer, args.n_head or n_head, args.n_embd or n_embd, args.block_size or block_size,
            dropout if args.dropout is None else args.dropout)


class CharRun:
    """What parse_args' flags make of a text file: the character vocabulary, the training tokens,
    the seeded model and the sequence length."""

    def __init__(self, args):
        with open(args.data, encoding="utf-8") as f:
            self.text = f.read()
        self.chars, ids = char_tokenize(self.text)
        self.n_train = int(len(ids) * (1.0 - args.val_fraction))
        self.train_tokens = torch.tensor(ids[:self.n_train], dtype=torch.long)
        n_layer, n_head, n_embd, block_size, dropout = model_shape(args)
        self.seq_len = args.seq_len or block_size
        if self.seq_len > block_size:
            sys.exit(f"--seq-len {self.seq_len} exceeds the model's block size {block_size}")
        torch.manual_seed(args.seed)
        self.model = Gpt(len(self.chars), block_size, n_layer, n_head, n_embd, dropout)

    def describe(self, args):
        return (f"data: {args.data} | {len(self.text)} characters | vocab {len(self.chars)} | "
                f"train {self.n_train} tokens")


def main(argv=None, require_ranks=False):
    """One process, or DDP when started by torchrun (or when require_ranks: pytorch_ddp_train.py)."""
    args = parse_args(argv)
    ranks = Ranks(args.backend, required=require_ranks)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    run = CharRun(args)
    ranks.say(ranks.header())
    ranks.say(run.describe(args))
    ranks.say(f"model: {run.model.summary()}" + (f" | DDP buckets {args.bucket_mb} MiB" if ranks.distributed else ""))
    train(args, ranks.wrap(run.model, args.bucket_mb), run.model,
          ranks.loader(run.train_tokens, args.batch_size, run.seq_len), ranks, run.seq_len,
          ln_vocab=math.log(len(run.chars)), backend=args.backend if ranks.distributed else None)
    ranks.close()


if __name__ == "__main__":
    main()
