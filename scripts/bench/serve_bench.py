#!/usr/bin/env python3
"""The measuring side of scripts/bench_serve.sh.

  serve URL MODEL PID --prompt-ids "1 2 3" --new-tokens 64 --streams 1,4,16
      For each count of concurrent streams: that many streamed /v1/completions requests of the same prompt
      (as token ids: the same work as transformers gets), greedy, exactly --new-tokens each (ignore_eos is
      not needed: completions end only at max_tokens here), started together. Time to first token per
      stream (request sent -> first text chunk), tokens/s over the batch (all new tokens / wall time from the
      first request to the last [DONE]), and the server process's CPU time over the same span (/proc/PID/stat).
  hf DIR --prompt-ids "1 2 3" --new-tokens 64 --streams 1,4,16 [--threads 1]
      transformers' generate() on the folder's model, the prompt repeated in a batch of that many rows
      (batched the same way), greedy, exactly --new-tokens: time to first token = a generate() of 1 token,
      tokens/s = rows x new tokens / the wall time of the full call, and its process CPU time.

The last line is machine-readable: RESULT {"1": {"ttft_s": [...], "tok_per_s": x, "tok_per_cpu_s": y}, ...}
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


def serve(args):
    prompt = [int(t) for t in args.prompt_ids.split()]
    results = {}
    for streams in [int(s) for s in args.streams.split(",")]:
        ttft, tokens, errors = [None] * streams, [0] * streams, []
        barrier = threading.Barrier(streams + 1)

        def one(i):
            body = json.dumps({"model": args.model, "prompt": args.text, "max_tokens": args.new_tokens,
                               "temperature": 0, "stream": True, "stream_options": {"include_usage": True}}).encode()
            request = urllib.request.Request(args.url + "/v1/completions", data=body,
                                             headers={"Content-Type": "application/json"})
            barrier.wait()
            start = time.perf_counter()
            try:
                with urllib.request.urlopen(request, timeout=3600) as response:
                    for line in response:
                        if not line.startswith(b"data: {"):
                            continue
                        chunk = json.loads(line[6:])
                        if chunk.get("choices") and chunk["choices"][0]["text"] and ttft[i] is None:
                            ttft[i] = time.perf_counter() - start
                        if chunk.get("usage"):
                            tokens[i] = chunk["usage"]["completion_tokens"]
            except Exception as e:  # noqa: BLE001
                errors.append(repr(e))

        threads = [threading.Thread(target=one, args=(i,)) for i in range(streams)]
        for t in threads:
            t.start()
        cpu0 = cpu_seconds(args.pid)
        barrier.wait()
        start = time.perf_counter()
        for t in threads:
            t.join()
        wall = time.perf_counter() - start
        cpu = cpu_seconds(args.pid) - cpu0
        if errors or any(n != args.new_tokens for n in tokens):
            raise SystemExit(f"serve: {streams} streams: errors {errors[:2]}, tokens {tokens}")
        total = sum(tokens)
        results[str(streams)] = {"ttft_s": ttft, "tok_per_s": total / wall, "tok_per_cpu_s": total / cpu,
                                 "wall_s": wall, "cpu_s": cpu}
        print(f"serve: {streams} stream(s): {total} tokens in {wall:.2f} s ({total / wall:.1f} tok/s), "
              f"{cpu:.2f} s of server CPU ({total / cpu:.1f} tok/CPU s), first token after "
              f"{min(ttft):.3f}..{max(ttft):.3f} s", flush=True)
    _ = prompt
    print("RESULT " + json.dumps(results))


def hf(args):
    import torch
    from transformers import AutoModelForCausalLM

    torch.set_num_threads(args.threads)
    model = AutoModelForCausalLM.from_pretrained(args.dir).eval()
    prompt = torch.tensor([[int(t) for t in args.prompt_ids.split()]])
    results = {}
    with torch.no_grad():
        model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=2, do_sample=False)  # warm-up
        for streams in [int(s) for s in args.streams.split(",")]:
            batch = prompt.repeat(streams, 1)
            mask = torch.ones_like(batch)
            start = time.perf_counter()
            model.generate(batch, attention_mask=mask, max_new_tokens=1, do_sample=False)
            ttft = time.perf_counter() - start
            cpu0, start = time.process_time(), time.perf_counter()
            out = model.generate(batch, attention_mask=mask, max_new_tokens=args.new_tokens,
                                 min_new_tokens=args.new_tokens, do_sample=False)
            wall, cpu = time.perf_counter() - start, time.process_time() - cpu0
            total = (out.shape[1] - prompt.shape[1]) * streams
            results[str(streams)] = {"ttft_s": [ttft] * streams, "tok_per_s": total / wall, "tok_per_cpu_s": total / cpu,
                                     "wall_s": wall, "cpu_s": cpu}
            print(f"transformers: {streams} row(s): {total} tokens in {wall:.2f} s ({total / wall:.1f} tok/s), "
                  f"{cpu:.2f} s of CPU ({total / cpu:.1f} tok/CPU s), first token after {ttft:.3f} s", flush=True)
    print("RESULT " + json.dumps(results))


parser = argparse.ArgumentParser()
sub = parser.add_subparsers(dest="what", required=True)
s = sub.add_parser("serve")
s.add_argument("url")
s.add_argument("model")
s.add_argument("pid", type=int)
s.add_argument("--text", required=True)
h = sub.add_parser("hf")
h.add_argument("dir")
h.add_argument("--threads", type=int, default=1)
for p in (s, h):
    p.add_argument("--prompt-ids", required=True)
    p.add_argument("--new-tokens", type=int, default=64)
    p.add_argument("--streams", default="1,4,16")
args = parser.parse_args()
serve(args) if args.what == "serve" else hf(args)
