#!/usr/bin/env python3
"""PyTorch DistributedDataParallel twin of `mpirun -np N mygpt-ddp train` on CPU, for benchmarks.

Run it under torchrun, one process per rank:
  torchrun --standalone --nproc_per_node 2 scripts/bench/pytorch_ddp_train.py --data FILE --threads 1 ...

It is scripts/bench/pytorch_gpt_train.py (the same flags, model, data, schedule, optimizer and timed
loop) with the process group required: --bucket-mb sets DDP's bucket_cap_mb (default 25, as our
trainer/gradient_sync.cpp), --backend the torch.distributed backend (default gloo). Tokens per step
count every rank's tokens; rank 0 times the step, prints and writes --metrics.

The last line of rank 0's output is machine-readable:
  RESULT {"median_tok_per_sec": ..., ...}
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pytorch_gpt_train as twin  # noqa: E402  (everything but the requirement of a process group)

if __name__ == "__main__":
    twin.main(require_ranks=True)
