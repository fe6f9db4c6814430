#!/usr/bin/env python3
"""The Python PyTorch twin of `mygpt-ddp train` on one CPU process, for side-by-side benchmarks.

It mirrors, line for line where it matters, the C++ code it is compared with:
  model/gpt.cpp, model/gpt_config.cpp   GPT-2: token + position embeddings, pre-LN blocks, causal
                                        scaled_dot_product_attention, tanh-GELU MLP, final LayerNorm,
                                        output head tied to the token embedding, GPT-2 init
  dataloader/char_tokenizer.cpp,        character tokenizer (sorted unique code points), last
  dataloader/token_source.cpp           val-fraction held out (unused here: no validation)
  dataloader/batch_loader.cpp           sequential consecutive B*T(+1) chunks, cyclic stream
  trainer/trainer.cpp                   grads set to None, loss/A per micro-batch, clip_grad_norm_,
                                        LR schedule, AdamW step, loss.item() per step
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
import json
import math
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

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

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class Gpt(nn.Module):
    def __init__(self, vocab_size, block_size, n_layer, n_head, n_embd, dropout, bias=True):
        super().__init__()
        if n_embd % n_head != 0:
            raise ValueError(f"n_head ({n_head}) does not divide n_embd ({n_embd})")
        self.block_size = block_size
        self.n_layer = n_layer
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


def lr_at(step, max_lr, min_lr, warmup_steps, decay_steps):
    if step < warmup_steps:
        return max_lr * (step + 1) / warmup_steps
    if step >= decay_steps:
        return min_lr
    progress = (step - warmup_steps) / (decay_steps - warmup_steps)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * progress)) * (max_lr - min_lr)


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
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--seq-len", type=int, default=0, help="0 means the model's block size")
    p.add_argument("--grad-accum", type=int, default=1)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--min-lr", type=float, default=1e-4)
    p.add_argument("--warmup-steps", type=int, default=100)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--grad-clip", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--threads", type=int, default=0, help="intra-op CPU threads; 0 leaves torch's default")
    p.add_argument("--log-every", type=int, default=10)
    p.add_argument("--skip-steps", type=int, default=5, help="warm-up steps left out of the median")
    p.add_argument("--metrics", help="write one JSON line per step here (same keys as metrics.jsonl)")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    device = torch.device("cpu")

    with open(args.data, encoding="utf-8") as f:
        text = f.read()
    chars, ids = char_tokenize(text)
    n_train = int(len(ids) * (1.0 - args.val_fraction))
    train_tokens = torch.tensor(ids[:n_train], dtype=torch.long)

    n_layer, n_head, n_embd, block_size, dropout = PRESETS[args.preset]
    n_layer = args.n_layer or n_layer
    n_head = args.n_head or n_head
    n_embd = args.n_embd or n_embd
    block_size = args.block_size or block_size
    dropout = dropout if args.dropout is None else args.dropout
    seq_len = args.seq_len or block_size
    if seq_len > block_size:
        sys.exit(f"--seq-len {seq_len} exceeds the model's block size {block_size}")

    torch.manual_seed(args.seed)
    model = Gpt(len(chars), block_size, n_layer, n_head, n_embd, dropout).to(device)
    params = list(model.parameters())
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                                   {"params": no_decay, "weight_decay": 0.0}],
                                  lr=args.lr, betas=(0.9, 0.95), eps=1e-8, fused=True)
    loader = SequentialBatchLoader(train_tokens, args.batch_size, seq_len)
    max_norm = args.grad_clip if args.grad_clip > 0 else math.inf

    print(f"torch {torch.__version__} | threads {torch.get_num_threads()} | device cpu")
    print(f"data: {args.data} | {len(text)} characters | vocab {len(chars)} | train {n_train} tokens")
    print(f"model: {n_layer} layers, {n_head} heads, {n_embd} wide, block {block_size} | "
          f"{sum(p.numel() for p in params)} parameters")
    tokens_per_step = args.batch_size * seq_len * args.grad_accum
    print(f"batch: {args.batch_size} x {seq_len} tokens x {args.grad_accum} accumulation = {tokens_per_step} tokens per step")
    metrics = open(args.metrics, "w") if args.metrics else None

    def train_step(step):
        model.train()
        lr = lr_at(step, args.lr, args.min_lr, args.warmup_steps, args.steps)
        for group in optimizer.param_groups:
            group["lr"] = lr
        optimizer.zero_grad(set_to_none=True)
        loss_sum = torch.zeros((), dtype=torch.float, device=device)
        for _ in range(args.grad_accum):
            x, y = loader.next()
            loss = model.loss(x, y) / float(args.grad_accum)
            loss_sum += loss.detach()
            loss.backward()
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
            print(f"step {step:5d} | loss: {loss:.6f} | lr {lr:.4e} | norm: {grad_norm:.4f} | "
                  f"dt: {dt * 1000:.2f}ms | tok/sec: {tok_per_sec:.2f}", flush=True)
        if metrics:
            metrics.write(json.dumps({"step": step, "loss": loss, "lr": lr, "grad_norm": grad_norm,
                                      "dt_ms": dt * 1000, "tok_per_sec": tok_per_sec}) + "\n")
    if metrics:
        metrics.close()

    result = {
        "median_tok_per_sec": statistics.median(rates) if rates else None,
        "steps_timed": len(rates),
        "first_loss": losses[0],
        "last_loss": losses[-1],
        "ln_vocab": math.log(len(chars)),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
    }
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
