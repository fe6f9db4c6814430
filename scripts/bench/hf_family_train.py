#!/usr/bin/env python3
"""The PyTorch side of scripts/bench_gpt2_cpu.sh --preset for a family member (nanochat-dN, llama-small):
transformers' own model class (NanoChatForCausalLM, LlamaForCausalLM, ...) loaded from the Hugging Face
folder that `mygpt-ddp export` wrote of our initial weights, trained on the same llm.c shards as
`mygpt-ddp train SHARDS --init-from FOLDER`:

  python scripts/bench/hf_family_train.py --init FOLDER --data SHARDS --threads 2 [--compile] ...

So the architecture is transformers' reading of the folder, not ours. The loss is the mean
cross-entropy of its logits (soft-capped by the model where its config says so) against the next
tokens, in fp32, as our fused loss computes it. Everything else (rank-strided loader, LR schedule,
AdamW with dim >= 2 decayed, clipping, the timed step, metrics, RESULT line) is pytorch_gpt_train.py's.
"""
import argparse
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pytorch_gpt_train as twin  # noqa: E402
from pytorch_gpt2_cpu import read_train_tokens  # noqa: E402


class CausalLmLoss(nn.Module):
    """A transformers causal LM with the `loss(idx, targets)` that twin.GptLoss (and DDP) call."""

    def __init__(self, hf_model):
        super().__init__()
        self.hf = hf_model

    def loss(self, idx, targets):
        logits = self.hf(input_ids=idx, use_cache=False).logits
        return F.cross_entropy(logits.reshape(-1, logits.size(-1)).float(), targets.reshape(-1))

    def summary(self):
        c = self.hf.config
        return (f"{type(self.hf).__name__}: {c.num_hidden_layers} layers, {c.num_attention_heads} heads "
                f"({c.num_key_value_heads} kv), {c.hidden_size} wide, vocab {c.vocab_size}, attention "
                f"{self.hf.config._attn_implementation} | {sum(p.numel() for p in self.parameters())} parameters")


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--init", required=True, help="Hugging Face folder of the initial weights (mygpt-ddp export)")
    p.add_argument("--data", required=True, help="directory of llm.c train_*.bin shards, or one shard")
    p.add_argument("--attention", default="sdpa", help="transformers' attn_implementation (ours uses SDPA too)")
    twin.add_training_flags(p, steps=6, batch_size=1, seq_len=256, lr=6e-4, min_lr=6e-5, warmup_steps=0,
                            skip_steps=2, log_every=1)
    p.add_argument("--compile", action="store_true", help="torch.compile the loss module (inductor's C++ code)")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    from transformers import AutoModelForCausalLM

    ranks = twin.Ranks(args.backend)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    tokens, paths = read_train_tokens(args.data)
    hf = AutoModelForCausalLM.from_pretrained(args.init, dtype=torch.float32, attn_implementation=args.attention)
    model = CausalLmLoss(hf)
    if args.seq_len > hf.config.max_position_embeddings:
        sys.exit(f"--seq-len {args.seq_len} exceeds the model's {hf.config.max_position_embeddings} positions")
    ranks.say(ranks.header())
    ranks.say(f"data: {len(paths)} shard(s) in {args.data} | {tokens.numel()} tokens")
    ranks.say(f"model: {model.summary()} | {'torch.compile' if args.compile else 'eager'}")
    forward = ranks.wrap(model, args.bucket_mb)
    if args.compile:
        forward = torch.compile(forward)
    twin.train(args, forward, model, ranks.loader(tokens, args.batch_size, args.seq_len), ranks, args.seq_len,
               mode="compile" if args.compile else "eager")
    ranks.close()


if __name__ == "__main__":
    main()
