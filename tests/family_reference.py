"""The Hugging Face side of tests/test_model_family.cpp: transformers' NanoChat, Llama and Qwen3 as references.

  make KIND DIR --vocab V --seed S --tokens "1,2,3;4,5,6"
      A random model made by transformers itself (KIND: nanochat, llama or qwen3; 2 layers, width 64,
      4 query heads over 2 key/value heads, 64 positions), weights large enough that a mapping mistake moves
      the loss, saved with save_pretrained; prints its losses on the tokens.
  loss DIR --tokens "..."
      The folder loaded with AutoModelForCausalLM.from_pretrained (fp32, eager attention).
  greedy DIR --tokens "..." --max-new-tokens N
      generate() (greedy, with its KV cache) from the folder's model on each row of prompts.
  greedy-text DIR --prompt TEXT --max-new-tokens N
      The same from a text prompt, encoded by the folder's tokenizer.json with `tokenizers`.

Prints one JSON line: {"loss", "token_losses", "class"} (labels = input ids, transformers shifts them) or
{"ids": rows of prompt + new token ids}.
"""
import argparse
import json
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import torch  # noqa: E402

from hf_reference import parse_tokens  # noqa: E402  (run as a script: this folder is on sys.path)


def losses(model, tokens):
    model.eval()
    with torch.no_grad():
        out = model(input_ids=tokens, labels=tokens)
        logits = out.logits[:, :-1].reshape(-1, out.logits.size(-1)).float()
        per_token = torch.nn.functional.cross_entropy(logits, tokens[:, 1:].reshape(-1), reduction="none")
    return {"loss": out.loss.item(), "token_losses": per_token.tolist(), "class": type(model).__name__}


def load(directory):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(directory, dtype=torch.float32, attn_implementation="eager").eval()


def make(args):
    import transformers

    common = dict(vocab_size=args.vocab, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                  bos_token_id=None, eos_token_id=None, pad_token_id=None)
    if args.kind == "nanochat":
        config = transformers.NanoChatConfig(**common, final_logit_softcapping=15.0, tie_word_embeddings=False,
                                             rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
        model_class = transformers.NanoChatForCausalLM
    elif args.kind == "llama":
        config = transformers.LlamaConfig(**common, rms_norm_eps=1e-5, tie_word_embeddings=False,
                                          rope_parameters={"rope_type": "default", "rope_theta": 500000.0})
        model_class = transformers.LlamaForCausalLM
    else:
        config = transformers.Qwen3Config(**common, head_dim=16, rms_norm_eps=1e-6, tie_word_embeddings=True,
                                          rope_parameters={"rope_type": "default", "rope_theta": 1000000.0})
        model_class = transformers.Qwen3ForCausalLM
    torch.manual_seed(args.seed)
    model = model_class(config)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight") or name.endswith("layernorm.weight"):
                p.copy_(1.0 + 0.3 * torch.randn_like(p))
            else:
                p.copy_(0.3 * torch.randn_like(p))
    model.save_pretrained(args.dir)
    print(json.dumps(losses(load(args.dir), parse_tokens(args.tokens))))


def loss(args):
    print(json.dumps(losses(load(args.dir), parse_tokens(args.tokens))))


def greedy(args):
    model = load(args.dir)
    if args.prompt is not None:
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(os.path.join(args.dir, "tokenizer.json"))
        prompts = torch.tensor([tokenizer.encode(args.prompt, add_special_tokens=False).ids])
    else:
        prompts = parse_tokens(args.tokens)
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 0
    with torch.no_grad():
        out = model.generate(prompts, attention_mask=torch.ones_like(prompts), do_sample=False,
                             max_new_tokens=args.max_new_tokens, min_new_tokens=args.max_new_tokens, use_cache=True)
    print(json.dumps({"ids": out.tolist()}))


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("make")
    p.add_argument("kind", choices=["nanochat", "llama", "qwen3"])
    p.add_argument("dir")
    p.add_argument("--vocab", type=int, required=True)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--tokens", required=True)
    p.set_defaults(run=make)
    p = sub.add_parser("loss")
    p.add_argument("dir")
    p.add_argument("--tokens", required=True)
    p.set_defaults(run=loss)
    p = sub.add_parser("greedy")
    p.add_argument("dir")
    p.add_argument("--tokens", required=True)
    p.add_argument("--max-new-tokens", type=int, required=True)
    p.set_defaults(run=greedy, prompt=None)
    p = sub.add_parser("greedy-text")
    p.add_argument("dir")
    p.add_argument("--prompt", required=True)
    p.add_argument("--max-new-tokens", type=int, required=True)
    p.set_defaults(run=greedy)
    args = parser.parse_args()
    args.run(args)


if __name__ == "__main__":
    main()
