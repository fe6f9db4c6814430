"""The Hugging Face side of tests/test_hf_gpt2.cpp: transformers and safetensors as references.

  make DIR [--sharded-copy DIR2] --vocab V --seed S --tokens "1,2,3;4,5,6"
      A random GPT2LMHeadModel (2 layers, 2 heads, width 32, 64 positions) with weights large enough
      that a mapping mistake moves the loss, saved with save_pretrained (DIR2: sharded in small shards).
  loss DIR [DIR ...] --tokens "..."
      Each folder loaded with GPT2LMHeadModel.from_pretrained.
  dtypes OUT_FILE --check OUR_FILE
      Writes one tensor of every dtype with safetensors.torch.save_file and reads back OUR_FILE.
  greedy DIR --tokens "..." --max-new-tokens N
      GPT2LMHeadModel.generate (greedy, with its KV cache) from the folder's model on each row of prompts.

Prints one JSON line: per model {"loss", "token_losses"} (labels = input ids, transformers shifts them),
for dtypes the tensors read from OUR_FILE as {name: {"dtype", "shape", "values"}}, or for greedy
{"ids": rows of prompt + new token ids}.
"""
import argparse
import json
import os

# Offline and quiet: the tests make their models locally, and parse stdout.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import torch  # noqa: E402


def parse_tokens(text):
    return torch.tensor([[int(t) for t in row.split(",")] for row in text.split(";")], dtype=torch.long)


def losses(model, tokens):
    model.eval()
    with torch.no_grad():
        out = model(input_ids=tokens, labels=tokens)
        logits = out.logits[:, :-1].reshape(-1, out.logits.size(-1))
        per_token = torch.nn.functional.cross_entropy(logits, tokens[:, 1:].reshape(-1), reduction="none")
    return {"loss": out.loss.item(), "token_losses": per_token.tolist()}


def make(args):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(args.seed)
    config = GPT2Config(n_layer=2, n_head=2, n_embd=32, n_positions=64, vocab_size=args.vocab)
    model = GPT2LMHeadModel(config)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("ln_1.weight") or name.endswith("ln_2.weight") or name.endswith("ln_f.weight"):
                p.copy_(1.0 + 0.3 * torch.randn_like(p))
            else:
                p.copy_(0.3 * torch.randn_like(p))
    model.save_pretrained(args.dir)
    if args.sharded_copy:
        model.save_pretrained(args.sharded_copy, max_shard_size="40KB")
    print(json.dumps([losses(model, parse_tokens(args.tokens))]))


def loss(args):
    from transformers import GPT2LMHeadModel

    tokens = parse_tokens(args.tokens)
    print(json.dumps([losses(GPT2LMHeadModel.from_pretrained(d), tokens) for d in args.dirs]))


def greedy(args):
    from transformers import GPT2LMHeadModel

    model = GPT2LMHeadModel.from_pretrained(args.dir).eval()
    prompts = parse_tokens(args.tokens)
    # No end-of-text stop (the small test vocabularies lack GPT-2's id 50256): exactly N new tokens.
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 0
    with torch.no_grad():
        out = model.generate(prompts, attention_mask=torch.ones_like(prompts), do_sample=False,
                             max_new_tokens=args.max_new_tokens, min_new_tokens=args.max_new_tokens, use_cache=True)
    print(json.dumps({"ids": out.tolist()}))


DTYPES = {
    "F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
    "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
}


def dtypes(args):
    from safetensors.torch import load_file, save_file

    tensors = {f"t_{name}": (torch.arange(6) - 2).to(dtype).reshape(2, 3) for name, dtype in DTYPES.items()}
    tensors["t_U8"] = torch.arange(6, dtype=torch.uint8).reshape(2, 3)
    tensors["t_BOOL"] = torch.tensor([True, False, True])
    save_file(tensors, args.out_file, metadata={"origin": "safetensors"})
    ours = load_file(args.check)
    print(json.dumps({name: {"dtype": str(t.dtype), "shape": list(t.shape), "values": t.double().flatten().tolist()}
                      for name, t in ours.items()}))


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("make")
    p.add_argument("dir")
    p.add_argument("--sharded-copy")
    p.add_argument("--vocab", type=int, required=True)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--tokens", required=True)
    p.set_defaults(run=make)
    p = sub.add_parser("loss")
    p.add_argument("dirs", nargs="+")
    p.add_argument("--tokens", required=True)
    p.set_defaults(run=loss)
    p = sub.add_parser("dtypes")
    p.add_argument("out_file")
    p.add_argument("--check", required=True)
    p.set_defaults(run=dtypes)
    p = sub.add_parser("greedy")
    p.add_argument("dir")
    p.add_argument("--tokens", required=True)
    p.add_argument("--max-new-tokens", type=int, required=True)
    p.set_defaults(run=greedy)
    args = parser.parse_args()
    args.run(args)


if __name__ == "__main__":
    main()
