#!/usr/bin/env python3
"""The torch.distributed (gloo) twin of bench/allreduce_bench.cpp, for side-by-side benchmarks.

Run it under torchrun, one process per rank:
  torchrun --standalone --nproc_per_node 2 scripts/bench/pytorch_allreduce.py --preset gpt2 --reps 10

Variants, timed like the C++ side (ranks start together after a barrier, a repetition counts the
slowest rank, the median over --reps after --warmup untimed ones):
  ddp-buckets  what our GradientSynchronizer does, in torch.distributed: the gradients of GPT-2's
               parameters (random values; the model from pytorch_gpt_train.py) packed in reverse
               order into buckets that close once they reach --bucket-mb, every bucket's all_reduce
               started (async_op=True), then each waited on, divided by the world size and copied back
  flat         all_reduce on one flat float tensor of the same bytes, then divided by the world size
               (gloo has no AVG), as MpiCommunicator::all_reduce(Average)
  raw          all_reduce(SUM) on the same flat tensor: gloo's floor
Rank 0 prints one `RESULT {json}` line per variant, with the same keys as the C++ benchmark.
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pytorch_gpt_train as twin  # noqa: E402  (the shared model)

# model/gpt_config.cpp's GPT-2 presets (padded BPE vocabulary): n_layer, n_head, n_embd.
GPT2_PRESETS = {"gpt2": (12, 12, 768), "gpt2-medium": (24, 16, 1024)}


def plan_buckets(params, bucket_bytes):
    """trainer/gradient_sync.cpp plan_gradient_buckets: reverse order, close a bucket at bucket_bytes."""
    buckets, size = [], 0
    for k in reversed(range(len(params))):
        if not buckets or size >= bucket_bytes:
            buckets.append([])
            size = 0
        buckets[-1].append(k)
        size += params[k].numel() * params[k].element_size()
    return buckets


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--preset", default="gpt2", choices=sorted(GPT2_PRESETS))
    p.add_argument("--bucket-mb", default="25", help="comma-separated bucket sizes in MiB")
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--backend", default="gloo")
    args = p.parse_args(argv)

    dist.init_process_group(args.backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(args.threads)

    n_layer, n_head, n_embd = GPT2_PRESETS[args.preset]
    with torch.no_grad():
        model = twin.Gpt(50304, 1024, n_layer, n_head, n_embd, 0.0)
    params = list(model.parameters())
    torch.manual_seed(1000 + rank)
    grads = [torch.randn_like(q) for q in params]
    numel = sum(q.numel() for q in params)
    nbytes = numel * 4

    def timed(call):
        seconds = []
        for r in range(args.warmup + args.reps):
            dist.barrier()
            t0 = time.perf_counter()
            call()
            elapsed = torch.tensor([time.perf_counter() - t0], dtype=torch.double)
            dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
            if r >= args.warmup:
                seconds.append(elapsed.item())
        return seconds

    results = []
    for mb in (float(x) for x in args.bucket_mb.split(",")):
        plan = plan_buckets(params, int(mb * (1 << 20)))
        flats = [torch.empty(sum(params[k].numel() for k in b)) for b in plan]

        def bucketed():
            works = []
            for b, flat in zip(plan, flats):
                offset = 0
                for k in b:
                    n = grads[k].numel()
                    flat[offset:offset + n].copy_(grads[k].view(-1))
                    offset += n
                works.append(dist.all_reduce(flat, async_op=True))
            for b, flat, work in zip(plan, flats, works):
                work.wait()
                flat.div_(world)
                offset = 0
                for k in b:
                    n = grads[k].numel()
                    grads[k].view(-1).copy_(flat[offset:offset + n])
                    offset += n

        results.append(("ddp-buckets", mb, len(plan), timed(bucketed)))
        del flats
    del grads
    flat = torch.randn(numel)

    def averaged():
        dist.all_reduce(flat)
        flat.div_(world)

    results.append(("flat", 0, 1, timed(averaged)))
    results.append(("raw", 0, 1, timed(lambda: dist.all_reduce(flat))))

    if rank == 0:
        for variant, mb, buckets, seconds in results:
            med = statistics.median(seconds)
            print("RESULT " + json.dumps({
                "variant": variant, "bucket_mb": mb, "buckets": buckets, "bytes": nbytes, "ranks": world,
                "threads": torch.get_num_threads(), "reps": args.reps, "median_s": med,
                "min_s": min(seconds), "max_s": max(seconds), "algbw_gbs": nbytes / med / 1e9,
                "busbw_gbs": nbytes / med / 1e9 * 2 * (world - 1) / world, "seconds": seconds, "backend": args.backend,
                "torch": torch.__version__}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
