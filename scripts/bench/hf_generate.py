#!/usr/bin/env python3
"""The transformers side of scripts/bench_generate.sh: greedy generate() speed of the folder's model
(AutoModelForCausalLM: GPT2LMHeadModel, or the class an exported family member names, e.g. NanoChatForCausalLM).

  make DIR [--seed 1] [--n-layer 12 --n-head 12 --n-embd 768 --n-positions 1024 --vocab-size 50257]
      A randomly initialized GPT-2 (124M shape by default) saved with save_pretrained (safetensors):
      `mygpt-ddp generate --checkpoint DIR --vocab GPT2_VOCAB` reads the same weights.
  run DIR --prompt-ids "1 2 3" --new-tokens 200 [--reps 3] [--threads 1]
      One untimed warm-up generate() of a few tokens, then --reps timed greedy generate() calls with
      the KV cache (transformers' default), each exactly --new-tokens new tokens (no end-of-text stop).

The last line of `run` is machine-readable:
  RESULT {"tok_per_s": [one per rep], "tok_per_cpu_s": [new tokens per second of process CPU time], "ids": [prompt + new ids of the last rep], "torch": ..., "transformers": ...}
"""
import argparse
import json
import os
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import torch  # noqa: E402


def make(args):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(args.seed)
    config = GPT2Config(n_layer=args.n_layer, n_head=args.n_head, n_embd=args.n_embd,
                        n_positions=args.n_positions, vocab_size=args.vocab_size)
    GPT2LMHeadModel(config).save_pretrained(args.dir)


def run(args):
    import transformers
    from transformers import AutoModelForCausalLM

    torch.set_num_threads(args.threads)
    model = AutoModelForCausalLM.from_pretrained(args.dir, dtype=torch.float32).eval()
    model.generation_config.eos_token_id = None  # exactly --new-tokens tokens, as ours
    model.generation_config.pad_token_id = 0
    prompt = torch.tensor([[int(t) for t in args.prompt_ids.split()]], dtype=torch.long)

    def generate(new_tokens):
        with torch.inference_mode():
            return model.generate(prompt, attention_mask=torch.ones_like(prompt), do_sample=False,
                                  max_new_tokens=new_tokens, min_new_tokens=new_tokens, use_cache=True)

    generate(4)
    rates, cpu_rates, out = [], [], None
    for _ in range(args.reps):
        start, cpu_start = time.perf_counter(), time.process_time()
        out = generate(args.new_tokens)
        rates.append(args.new_tokens / (time.perf_counter() - start))
        cpu_rates.append(args.new_tokens / (time.process_time() - cpu_start))
        print(f"transformers: {args.new_tokens} tokens at {rates[-1]:.2f} tok/s, {cpu_rates[-1]:.2f} per CPU second",
              flush=True)
    print("RESULT " + json.dumps({"tok_per_s": rates, "tok_per_cpu_s": cpu_rates, "ids": out[0].tolist(),
                                  "torch": torch.__version__, "transformers": transformers.__version__}))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("make")
    p.add_argument("dir")
    p.add_argument("--seed", type=int, default=1)
    for name, value in (("n-layer", 12), ("n-head", 12), ("n-embd", 768), ("n-positions", 1024),
                        ("vocab-size", 50257)):
        p.add_argument("--" + name, type=int, default=value)
    p.set_defaults(run=make)
    p = sub.add_parser("run")
    p.add_argument("dir")
    p.add_argument("--prompt-ids", required=True)
    p.add_argument("--new-tokens", type=int, default=200)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    p.set_defaults(run=run)
    args = parser.parse_args()
    args.run(args)


if __name__ == "__main__":
    main()
