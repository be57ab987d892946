#!/usr/bin/python3
"""PyTorch reference of titan's mixture-of-experts kernels (titan/compute_kernels.inc) for
moe_reference_test.cc: the router as TorchTitan's TokenChoiceTopKRouter computes it in f32 (the
top-k taken by a stable descending sort, so that ties go to the lower index as titan's kernel
says, and in that order), its gradient by autograd in f64, the permutation as a stable sort by
expert, and dispatch, combine and their gradients by autograd in f64.

Usage: /usr/bin/python3 moe_reference.py DIR

Every folder in DIR is a case: case.txt ("key value" lines: n, experts, k, d, score (softmax or
sigmoid), normalize (0 or 1), scale, groups, groups_chosen, bias (0 or 1)) and the inputs
logits.bin f32 [n, experts], bias.bin f32 [experts], d_weights.bin f32 [n, k], x.bin f32 [n, d],
x_bf16.bin (bf16 bits) [n, d], d_rows.bin f32 [m, d], dx.bin f32 [n, d], y.bin f32 [m, d],
combine_weights.bin f32 [n, k], out.bin f32 [n, d], d_out.bin f32 [n, d] (m = n k). It receives
experts.bin i32 [n, k], weights.bin f32 [n, k], d_logits.bin f32 [n, experts], counts.bin i32
[experts], slots.bin i32 [m], rows.bin f32 [m, d], rows_bf16.bin [m, d], dx_after.bin (dx plus
the dispatch's gradient), out_after.bin (out plus the combine), d_y.bin f32 [m, d] and
d_combine_weights.bin f32 [n, k].
"""
import os
import sys

import numpy as np
import torch


def descending(values):
    """The indices of values' last dimension, largest first, ties to the lower index."""
    return torch.sort(values, dim=-1, descending=True, stable=True).indices


def scores_of(logits, score):
    return torch.sigmoid(logits) if score == "sigmoid" else torch.softmax(logits, dim=1)


def route(logits, bias, c):
    """TorchTitan's TokenChoiceTopKRouter.forward after the gate, in f32."""
    n, e, k = logits.shape[0], c["experts"], c["k"]
    scores = scores_of(logits, c["score"])
    choice = scores if bias is None else scores + bias
    if c["groups"] > 1:
        grouped = choice.view(n, c["groups"], e // c["groups"])
        group_scores = grouped.topk(min(2, e // c["groups"]), dim=-1).values.sum(dim=-1)
        kept = descending(group_scores)[:, :c["groups_chosen"]]
        masked = torch.ones_like(group_scores, dtype=torch.bool).scatter_(1, kept, False)
        choice = grouped.masked_fill(masked.unsqueeze(-1), float("-inf")).view(n, e)
    experts = descending(choice)[:, :k]
    weights = scores.gather(1, experts)
    if c["normalize"]:
        weights = weights / (weights.sum(dim=-1, keepdim=True) + 1e-20)
    return experts, weights * c["scale"]


def route_backward(logits, experts, d_weights, c):
    """The gradient of the weights of the experts chosen, by autograd in f64."""
    lg = logits.double().requires_grad_()
    weights = scores_of(lg, c["score"]).gather(1, experts)
    if c["normalize"]:
        weights = weights / (weights.sum(dim=-1, keepdim=True) + 1e-20)
    (weights * c["scale"]).backward(d_weights.double())
    return lg.grad.float()


def run(case):
    c = {}
    with open(os.path.join(case, "case.txt")) as f:
        for line in f:
            key, value = line.split()
            c[key] = value if key == "score" else float(value)
    for key in ("n", "experts", "k", "d", "normalize", "groups", "groups_chosen", "bias"):
        c[key] = int(c[key])
    n, e, k, d = c["n"], c["experts"], c["k"], c["d"]
    m = n * k

    def load(name, shape, dtype=np.float32):
        data = np.fromfile(os.path.join(case, name), dtype=dtype).reshape(shape)
        return torch.from_numpy(data.copy())

    def save(name, tensor):
        tensor.detach().contiguous().numpy().tofile(os.path.join(case, name))

    logits = load("logits.bin", (n, e))
    bias = load("bias.bin", (e,)) if c["bias"] else None
    experts, weights = route(logits, bias, c)
    save("experts.bin", experts.int())
    save("weights.bin", weights)
    save("d_logits.bin", route_backward(logits, experts, load("d_weights.bin", (n, k)), c))

    flat = experts.reshape(-1)
    order = torch.sort(flat, stable=True).indices  # the assignment of each row
    slots = torch.empty(m, dtype=torch.int64)
    slots[order] = torch.arange(m)
    save("counts.bin", torch.bincount(flat, minlength=e).int())
    save("slots.bin", slots.int())

    token_of_row = order // k
    x = load("x.bin", (n, d)).double().requires_grad_()
    rows = x[token_of_row]
    save("rows.bin", rows.float())
    x_bf16 = load("x_bf16.bin", (n, d), np.int16).view(torch.bfloat16)
    save("rows_bf16.bin", x_bf16[token_of_row].view(torch.int16))
    rows.backward(load("d_rows.bin", (m, d)).double())
    save("dx_after.bin", (load("dx.bin", (n, d)).double() + x.grad).float())

    y = load("y.bin", (m, d)).double().requires_grad_()
    combine_weights = load("combine_weights.bin", (n, k)).double().requires_grad_()
    combined = (combine_weights.unsqueeze(-1) * y[slots].view(n, k, d)).sum(dim=1)
    save("out_after.bin", (load("out.bin", (n, d)).double() + combined).float())
    combined.backward(load("d_out.bin", (n, d)).double())
    save("d_y.bin", y.grad.float())
    save("d_combine_weights.bin", combine_weights.grad.float())


def main(folder):
    for name in sorted(os.listdir(folder)):
        if os.path.isdir(os.path.join(folder, name)):
            run(os.path.join(folder, name))


if __name__ == "__main__":
    main(sys.argv[1])
