#!/usr/bin/python3
"""PyTorch reference for titan's optimizer plugins: torch.optim.AdamW, Adam or SGD run for
several steps on given gradients and learning rates, with two parameter groups (weight decay
on the parameters the mask marks, none on the rest).

Usage: /usr/bin/python3 optimizer_reference.py CASE_DIR

CASE_DIR holds
  optimizer.txt  "key value" lines: name (adamw | adam | sgd), steps, n, and the
                 hyper-parameters (lr is per step, below): beta1 beta2 eps weight_decay
                 momentum dampening nesterov
  params.bin     f32 [n]       the initial parameters
  decay.bin      u8 [n]        1 where weight decay applies
  grads.bin      f32 [steps, n]
  lrs.bin        f64 [steps]   the learning rate of each step
and receives params_after.bin (f32 [n]).
"""
import os
import sys

import numpy as np
import torch


def main(case):
    config = {}
    with open(os.path.join(case, "optimizer.txt")) as f:
        for line in f:
            key, value = line.split()
            config[key] = value
    n, steps = int(config["n"]), int(config["steps"])
    params = np.fromfile(os.path.join(case, "params.bin"), dtype=np.float32)
    decay = np.fromfile(os.path.join(case, "decay.bin"), dtype=np.uint8).astype(bool)
    grads = np.fromfile(os.path.join(case, "grads.bin"), dtype=np.float32).reshape(steps, n)
    lrs = np.fromfile(os.path.join(case, "lrs.bin"), dtype=np.float64)

    with_decay = torch.nn.Parameter(torch.from_numpy(params[decay].copy()))
    without_decay = torch.nn.Parameter(torch.from_numpy(params[~decay].copy()))
    wd = float(config["weight_decay"])
    groups = [{"params": [with_decay], "weight_decay": wd},
              {"params": [without_decay], "weight_decay": 0.0}]
    name = config["name"]
    if name in ("adam", "adamw"):
        cls = torch.optim.AdamW if name == "adamw" else torch.optim.Adam
        optimizer = cls(groups, lr=float(lrs[0]), eps=float(config["eps"]),
                        betas=(float(config["beta1"]), float(config["beta2"])))
    elif name == "sgd":
        optimizer = torch.optim.SGD(groups, lr=float(lrs[0]), momentum=float(config["momentum"]),
                                    dampening=float(config["dampening"]),
                                    nesterov=config["nesterov"] == "1")
    else:
        sys.exit(f"unknown optimizer {name}")
    for step in range(steps):
        for group in optimizer.param_groups:
            group["lr"] = float(lrs[step])
        with_decay.grad = torch.from_numpy(grads[step][decay].copy())
        without_decay.grad = torch.from_numpy(grads[step][~decay].copy())
        optimizer.step()
    after = params.copy()
    after[decay] = with_decay.detach().numpy()
    after[~decay] = without_decay.detach().numpy()
    after.astype(np.float32).tofile(os.path.join(case, "params_after.bin"))


if __name__ == "__main__":
    main(sys.argv[1])
