#!/usr/bin/env python3
"""tiktoken's encode_ordinary_batch on a JSON-lines corpus with N threads, for
scripts/bench_prepare_threads.sh: the documents are read first (not timed), then encoded in one
encode_ordinary_batch(num_threads=N) call, timed by the wall clock. tiktoken is built from the same
encoder.json + vocab.bpe as `mygpt-ddp prepare` (tokenize_tiktoken.gpt2_encoding).

The last line of output is machine-readable:
  RESULT {"tokens": ..., "bytes": ..., "encode_s": ..., "threads": ...}
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tokenize_tiktoken import gpt2_encoding  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--vocab", required=True)
    p.add_argument("--input", required=True, help="JSON lines, one document per line in \"text\"")
    p.add_argument("--threads", type=int, required=True)
    args = p.parse_args()
    enc = gpt2_encoding(args.vocab)
    with open(args.input, encoding="utf-8") as f:
        docs = [json.loads(line)["text"] for line in f if line.strip()]
    n_bytes = os.path.getsize(args.input)
    t0 = time.perf_counter()
    batches = enc.encode_ordinary_batch(docs, num_threads=args.threads)
    encode_s = time.perf_counter() - t0
    tokens = sum(len(b) + 1 for b in batches)  # with one <|endoftext|> per document, as prepare writes
    print("RESULT " + json.dumps({"tokens": tokens, "bytes": n_bytes, "encode_s": encode_s, "threads": args.threads}))


if __name__ == "__main__":
    main()
