"""The PyTorch side of tests/test_muon.cpp: Muon (for the blocks' matrices) and AdamW (for the rest)
written here from the algorithm's description, replaying the steps our C++ optimizer took.

  muon_reference.py RECORD

RECORD (torch.load-able, written by torch::pickle_save) holds the options, each parameter's initial
value, and for every step the gradients our optimizer was given and the parameters it produced. The
reference starts from the same parameters, takes the same gradients step by step (keeping its own
momentum and moments) and prints one JSON line: per step the largest absolute difference between its
parameters and ours, and the largest change of any parameter in that step (so a test can tell that the
comparison is not vacuous).
"""
import json
import sys

import torch

# Quintic Newton-Schulz coefficients of KellerJordan/Muon.
A, B, C = 3.4445, -4.7750, 2.0315


def orthogonalize(g, steps):
    """Approximately U V^T of g's SVD, for a batch of matrices (..., m, n), by Newton-Schulz."""
    x = g.clone()
    transposed = x.size(-2) > x.size(-1)
    if transposed:
        x = x.transpose(-2, -1)
    x = x / (x.flatten(-2).norm(dim=-1)[..., None, None] + 1e-7)
    for _ in range(steps):
        gram = x @ x.transpose(-2, -1)
        x = A * x + (B * gram + C * gram @ gram) @ x
    return x.transpose(-2, -1) if transposed else x


class ReferenceMuon:
    def __init__(self, params, blocks, lr, momentum, nesterov, ns_steps, weight_decay):
        self.params, self.blocks = params, blocks
        self.lr, self.momentum, self.nesterov = lr, momentum, nesterov
        self.ns_steps, self.weight_decay = ns_steps, weight_decay
        self.buffers = [torch.zeros_like(p) for p in params]

    @torch.no_grad()
    def step(self, grads):
        for p, k, g, buf in zip(self.params, self.blocks, grads, self.buffers):
            buf.mul_(self.momentum).add_(g, alpha=1 - self.momentum)
            direction = g * (1 - self.momentum) + buf * self.momentum if self.nesterov else buf
            rows, cols = p.size(0) // k, p.size(1)
            update = orthogonalize(direction.reshape(k, rows, cols), self.ns_steps).reshape(p.shape)
            update = update * max(1.0, rows / cols) ** 0.5
            p.mul_(1 - self.lr * self.weight_decay).sub_(self.lr * update)


def main():
    record = torch.load(sys.argv[1], weights_only=False)
    o = record["options"].tolist()
    muon_lr, momentum, nesterov, ns_steps, muon_wd, lr, beta1, beta2, eps, wd, steps = o
    groups = {g: [] for g in ("muon", "decay", "no_decay")}
    for group in groups:
        i = 0
        while f"{group}.{i}" in record:
            groups[group].append(record[f"{group}.{i}"].clone().requires_grad_(True))
            i += 1
    blocks = [int(b) for b in record["muon_blocks"].tolist()]
    muon = ReferenceMuon(groups["muon"], blocks, muon_lr, momentum, bool(nesterov), int(ns_steps), muon_wd)
    adamw = torch.optim.AdamW(
        [{"params": groups["decay"], "weight_decay": wd}, {"params": groups["no_decay"], "weight_decay": 0.0}],
        lr=lr, betas=(beta1, beta2), eps=eps, foreach=False)
    diffs, changes = [], []
    for s in range(int(steps)):
        before = {g: [p.detach().clone() for p in ps] for g, ps in groups.items()}
        for group in ("decay", "no_decay"):
            for i, p in enumerate(groups[group]):
                p.grad = record[f"grad.{s}.{group}.{i}"]
        adamw.step()
        muon.step([record[f"grad.{s}.muon.{i}"] for i in range(len(groups["muon"]))])
        diff = change = 0.0
        for group, ps in groups.items():
            for i, p in enumerate(ps):
                ours = record[f"after.{s}.{group}.{i}"]
                diff = max(diff, (p.detach() - ours).abs().max().item())
                change = max(change, (p.detach() - before[group][i]).abs().max().item())
        diffs.append(diff)
        changes.append(change)
    print(json.dumps({"max_diff": diffs, "max_change": changes}))


if __name__ == "__main__":
    main()
