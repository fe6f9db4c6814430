#!/usr/bin/env python3
"""The transformers side of scripts/bench_load.sh: time to the first generated token in a fresh process.

  DIR --prompt-ids "1 2 3" [--threads 1]
      GPT2LMHeadModel.from_pretrained(DIR) and one greedy token (generate, KV cache), timed from the
      process's start: the import of torch and transformers, the load and the token, each reported.

The last line is machine-readable:
  RESULT {"import_s": ..., "load_s": ..., "token_s": ..., "id": the new token, "transformers": ...}
"""
import time

START = time.perf_counter()  # the imports below are part of the time to the first token

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import GPT2LMHeadModel  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("dir")
    parser.add_argument("--prompt-ids", required=True)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    imported = time.perf_counter()
    model = GPT2LMHeadModel.from_pretrained(args.dir).eval()
    loaded = time.perf_counter()
    prompt = torch.tensor([[int(t) for t in args.prompt_ids.split()]], dtype=torch.long)
    with torch.inference_mode():
        out = model.generate(prompt, attention_mask=torch.ones_like(prompt), do_sample=False, max_new_tokens=1,
                             min_new_tokens=1, pad_token_id=0, use_cache=True)
    done = time.perf_counter()
    print("RESULT " + json.dumps({"import_s": imported - START, "load_s": loaded - imported, "token_s": done - loaded,
                                  "id": int(out[0, -1]), "transformers": transformers.__version__}))


if __name__ == "__main__":
    main()
