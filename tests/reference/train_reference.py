#!/usr/bin/python3
"""PyTorch reference for titan's training loop: llama_reference.py's model trained with
torch.optim.AdamW (two parameter groups: with and without weight decay), TorchTitan's LR schedule
(linear warmup, stable phase, decay to min_lr_factor) through LambdaLR,
torch.nn.utils.clip_grad_norm_ and gradient accumulation over microbatches.

Usage: /usr/bin/python3 train_reference.py CASE_DIR

CASE_DIR holds config.txt, params.txt and params.bin as llama_reference.py reads them, and
  train.txt   "key value" lines: steps accumulation lr beta1 beta2 eps weight_decay
              warmup_steps decay_ratio decay_type min_lr_factor max_norm
  decay.txt   the names of the parameters that get weight decay, one a line
  tokens.bin, targets.bin   int32 [steps, accumulation, batch, seq_len]
and receives losses.bin and grad_norms.bin (f32 [steps]: the mean microbatch loss and the
gradient norm before clipping of each step).
"""
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import llama_reference  # noqa: E402


def read_train(case):
    train = {}
    with open(os.path.join(case, "train.txt")) as f:
        for line in f:
            key, value = line.split()
            train[key] = value
    return train


def lr_factor(step, steps, warmup, decay_ratio, decay_type, min_lr_factor):
    """TorchTitan's linear_warmup_stable_decay for LambdaLR's 0-based step."""
    warmup = min(warmup, steps)
    decay = min(int(math.floor(steps * decay_ratio + 0.5)), steps - warmup)
    stable = steps - warmup - decay
    if step < warmup:
        return (step + 1) / warmup
    if step < warmup + stable or decay == 0:
        return 1.0
    progress = min(1.0, (step + 1 - warmup - stable) / decay)
    factor = {"linear": 1 - progress, "sqrt": 1 - math.sqrt(progress),
              "cosine": 0.5 * (1 + math.cos(math.pi * progress)), "none": 1.0}[decay_type]
    return min_lr_factor + (1 - min_lr_factor) * factor


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    case = sys.argv[1]
    c = llama_reference.read_config(case)
    p = llama_reference.read_params(case)
    t = read_train(case)
    steps, accumulation = int(t["steps"]), int(t["accumulation"])
    with open(os.path.join(case, "decay.txt")) as f:
        decayed = set(f.read().split())
    groups = [
        {"params": [p[n] for n in p if n in decayed], "weight_decay": float(t["weight_decay"])},
        {"params": [p[n] for n in p if n not in decayed], "weight_decay": 0.0},
    ]
    optimizer = torch.optim.AdamW(groups, lr=float(t["lr"]),
                                  betas=(float(t["beta1"]), float(t["beta2"])),
                                  eps=float(t["eps"]))
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: lr_factor(s, steps, int(t["warmup_steps"]), float(t["decay_ratio"]),
                                       t["decay_type"], float(t["min_lr_factor"])))
    shape = (steps, accumulation, c["batch"], c["seq_len"])
    tokens = llama_reference.read_ints(os.path.join(case, "tokens.bin"), shape)
    targets = llama_reference.read_ints(os.path.join(case, "targets.bin"), shape)
    losses, norms = [], []
    for step in range(steps):
        optimizer.zero_grad()
        total = 0.0
        for micro in range(accumulation):
            _, loss = llama_reference.forward(c, p, tokens[step, micro], targets[step, micro])
            (loss / accumulation).backward()
            total += loss.item() / accumulation
        norm = torch.nn.utils.clip_grad_norm_(list(p.values()), float(t["max_norm"]))
        optimizer.step()
        schedule.step()
        losses.append(total)
        norms.append(norm.item())
    np.array(losses, dtype=np.float32).tofile(os.path.join(case, "losses.bin"))
    np.array(norms, dtype=np.float32).tofile(os.path.join(case, "grad_norms.bin"))


if __name__ == "__main__":
    torch.manual_seed(0)
    main()
