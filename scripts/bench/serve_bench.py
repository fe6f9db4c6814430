#!/usr/bin/env python3
"""The measuring side of scripts/bench_serve.sh: one count of concurrent streams per call, so that the
script can run the two sides in turn, count by count.

  serve URL MODEL PID --text PROMPT --new-tokens 32 --streams N [--warm-up]
      N streamed /v1/completions requests of the prompt, greedy, exactly --new-tokens each (a completion ends
      only at max_tokens here), started together (a barrier). Time to first token per stream (request sent ->
      first text chunk), tokens/s over the batch (all new tokens / wall time from the start to the last
      [DONE]), and the server process's CPU time over the same span (/proc/PID/stat: user + system).
      --warm-up first sends one short request, unmeasured (the server's first step allocates).
  hf DIR --prompt-ids "1 2 3" --new-tokens 32 --streams N --vocab GPT2_VOCAB [--threads 1]
      transformers' generate() on the folder's model, the prompt repeated in a batch of N rows (batched the
      same way), greedy, exactly --new-tokens (no end-of-text stop, as a completion): time to first token =
      the wall time of a generate() of 1 token of that batch, tokens/s = N x new tokens / the wall time of
      the full call, and the process's CPU time over it (user + system). The texts are the ids decoded by
      transformers' GPT2Tokenizer on GPT2_VOCAB (encoder.json, vocab.bpe).

The last line is machine-readable:
  RESULT {"streams": N, "ttft_s": [...], "tok_per_s": x, "tok_per_cpu_s": y, "wall_s": w, "cpu_s": c, "texts": [...]}
"""
import argparse
import json
import os
import threading
import time
import urllib.request

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def completion(args, max_tokens, stream):
    body = {"model": args.model, "prompt": args.text, "max_tokens": max_tokens, "temperature": 0, "stream": stream}
    if stream:
        body["stream_options"] = {"include_usage": True}
    return urllib.request.Request(args.url + "/v1/completions", data=json.dumps(body).encode(),
                                  headers={"Content-Type": "application/json"})


def serve(args):
    if args.warm_up:
        urllib.request.urlopen(completion(args, 2, False), timeout=600).read()
    n = args.streams
    ttft, tokens, texts, errors = [None] * n, [0] * n, [""] * n, []
    barrier = threading.Barrier(n + 1)

    def one(i):
        request = completion(args, args.new_tokens, True)
        barrier.wait()
        start = time.perf_counter()
        try:
            with urllib.request.urlopen(request, timeout=3600) as response:
                for line in response:
                    if not line.startswith(b"data: {"):
                        continue
                    chunk = json.loads(line[6:])
                    if chunk.get("error"):
                        errors.append(chunk["error"].get("message"))
                    for choice in chunk.get("choices") or []:
                        if choice["text"] and ttft[i] is None:
                            ttft[i] = time.perf_counter() - start
                        texts[i] += choice["text"]
                    if chunk.get("usage"):
                        tokens[i] = chunk["usage"]["completion_tokens"]
        except Exception as e:  # noqa: BLE001 - said below, with the counts
            errors.append(repr(e))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    cpu0 = cpu_seconds(args.pid)
    barrier.wait()
    start = time.perf_counter()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    cpu = cpu_seconds(args.pid) - cpu0
    if errors or any(k != args.new_tokens for k in tokens) or None in ttft:
        raise SystemExit(f"serve: {n} streams: errors {errors[:2]}, tokens {tokens}")
    total = sum(tokens)
    print(f"serve: {n} stream(s): {total} tokens in {wall:.2f} s ({total / wall:.1f} tok/s), {cpu:.2f} s of server CPU "
          f"({total / cpu:.1f} tok/CPU s), first token after {min(ttft):.3f}..{max(ttft):.3f} s", flush=True)
    print("RESULT " + json.dumps({"streams": n, "ttft_s": ttft, "tok_per_s": total / wall, "tok_per_cpu_s": total / cpu,
                                  "wall_s": wall, "cpu_s": cpu, "texts": texts}))


def hf(args):
    import torch
    from transformers import AutoModelForCausalLM, GPT2Tokenizer

    torch.set_num_threads(args.threads)
    model = AutoModelForCausalLM.from_pretrained(args.dir, dtype=torch.float32).eval()
    model.generation_config.eos_token_id = None  # exactly --new-tokens tokens, as a completion
    model.generation_config.pad_token_id = 0
    tokenizer = GPT2Tokenizer(os.path.join(args.vocab, "encoder.json"), os.path.join(args.vocab, "vocab.bpe"))
    prompt = torch.tensor([[int(t) for t in args.prompt_ids.split()]], dtype=torch.long)
    batch = prompt.repeat(args.streams, 1)

    def generate(new_tokens):
        with torch.inference_mode():
            return model.generate(batch, attention_mask=torch.ones_like(batch), do_sample=False, use_cache=True,
                                  max_new_tokens=new_tokens, min_new_tokens=new_tokens)

    generate(2)  # warm-up
    start = time.perf_counter()
    generate(1)
    ttft = time.perf_counter() - start
    cpu0, start = time.process_time(), time.perf_counter()
    out = generate(args.new_tokens)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu0
    total = (out.shape[1] - prompt.shape[1]) * args.streams
    texts = [tokenizer.decode(row[prompt.shape[1]:].tolist()) for row in out]
    print(f"transformers: {args.streams} row(s): {total} tokens in {wall:.2f} s ({total / wall:.1f} tok/s), {cpu:.2f} s "
          f"of CPU ({total / cpu:.1f} tok/CPU s), first token after {ttft:.3f} s", flush=True)
    print("RESULT " + json.dumps({"streams": args.streams, "ttft_s": [ttft] * args.streams, "tok_per_s": total / wall,
                                  "tok_per_cpu_s": total / cpu, "wall_s": wall, "cpu_s": cpu, "texts": texts}))


parser = argparse.ArgumentParser()
sub = parser.add_subparsers(dest="what", required=True)
s = sub.add_parser("serve")
s.add_argument("url")
s.add_argument("model")
s.add_argument("pid", type=int)
s.add_argument("--text", required=True)
s.add_argument("--warm-up", action="store_true")
h = sub.add_parser("hf")
h.add_argument("dir")
h.add_argument("--prompt-ids", required=True)
h.add_argument("--vocab", required=True)
h.add_argument("--threads", type=int, default=1)
for p in (s, h):
    p.add_argument("--new-tokens", type=int, default=32)
    p.add_argument("--streams", type=int, default=1)
args = parser.parse_args()
serve(args) if args.what == "serve" else hf(args)
