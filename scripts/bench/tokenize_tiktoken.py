#!/usr/bin/env python3
"""tiktoken's GPT-2 encoding of one text file, timed, for scripts/bench_tokenizer.sh.

The encoding is built from the same encoder.json + vocab.bpe that `mygpt-ddp prepare --vocab DIR`
reads (checked against the SHA-256 that tiktoken pins for OpenAI's originals), with tiktoken's own
"gpt2" settings (pattern, <|endoftext|> = 50256), so nothing is downloaded. The whole file is one
string passed to encode_ordinary(), on the calling thread (tiktoken parallelises only its *_batch
calls), the way prepare encodes a plain-text file as one document.

With --compare SHARD (an llm.c .bin shard written by prepare from the same file) it also checks that
the shard holds <|endoftext|> followed by exactly these ids.

The last line of output is machine-readable:
  RESULT {"tokens": ..., "load_s": ..., "encode_s": ..., ...}
"""
import argparse
import json
import os
import sys
import time

import numpy as np
import tiktoken
from tiktoken.load import data_gym_to_mergeable_bpe_ranks
from tiktoken_ext import openai_public

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llmc_shard import read_llmc_shard  # noqa: E402  (numpy only: no torch import in a timed run)


def gpt2_encoding(vocab_dir):
    # tiktoken_ext.openai_public.gpt2() with local files in place of the download URLs.
    ranks = data_gym_to_mergeable_bpe_ranks(
        vocab_bpe_file=os.path.join(vocab_dir, "vocab.bpe"),
        encoder_json_file=os.path.join(vocab_dir, "encoder.json"),
        vocab_bpe_hash="1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5",
        encoder_json_hash="196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783",
    )
    return tiktoken.Encoding(name="gpt2", pat_str=openai_public.r50k_pat_str, mergeable_ranks=ranks,
                             special_tokens={openai_public.ENDOFTEXT: 50256}, explicit_n_vocab=50257)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--vocab", required=True, help="directory with encoder.json and vocab.bpe")
    p.add_argument("--input", required=True, help="text file (UTF-8)")
    p.add_argument("--repeat", type=int, default=1, help="encode the text this many times; the first is cold")
    p.add_argument("--compare", help="llm.c .bin shard from `mygpt-ddp prepare` of the same file")
    args = p.parse_args()

    wall0, cpu0 = time.perf_counter(), time.process_time()
    enc = gpt2_encoding(args.vocab)
    load_s = time.perf_counter() - wall0
    with open(args.input, "rb") as f:
        data = f.read()
    text = data.decode("utf-8")

    encode_s, encode_cpu_s, ids = [], [], None
    for _ in range(args.repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        ids = enc.encode_ordinary(text)
        encode_s.append(time.perf_counter() - t0)
        encode_cpu_s.append(time.process_time() - c0)
    result = {
        "tokens": len(ids), "bytes": len(data), "load_s": load_s, "encode_s": encode_s,
        "encode_cpu_s": encode_cpu_s, "mb_per_s_first": len(data) / 1e6 / encode_s[0],
        "tiktoken": tiktoken.__version__, "python": sys.version.split()[0],
    }
    if args.compare:
        shard = read_llmc_shard(args.compare)
        expected = np.concatenate([[50256], np.asarray(ids)]).astype(np.uint16)
        same = len(shard) == len(expected) and bool((shard == expected).all())
        result["shard_tokens"] = len(shard)
        result["ids_identical"] = same
        if not same:
            n = min(len(shard), len(expected))
            diff = np.nonzero(shard[:n] != expected[:n])[0]
            result["first_difference"] = int(diff[0]) if len(diff) else n
    result["process_wall_s"] = time.perf_counter() - wall0
    result["process_cpu_s"] = time.process_time() - cpu0
    print(f"tiktoken {tiktoken.__version__}: {len(ids)} tokens from {len(data)} bytes; load {load_s * 1e3:.0f} ms, "
          f"encode {' '.join(f'{s * 1e3:.0f}' for s in encode_s)} ms")
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
