#!/usr/bin/python3
"""bench/moe_step.py: its PyTorch MoE (TorchTitan's router, permutation, for-loop over experts
and weighted combine) computes what tests/reference/qwen3_reference.py's mixture of experts
computes, the one titan's model is tested against, in its output and its gradients; and the
benchmark runs end to end on the tiny config, every table filled.

Usage: bench_moe_step_test.py SOURCE_DIR TITAN_TRAIN_BENCH
"""
import os
import re
import subprocess
import sys

SOURCE, TITAN_BENCH = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(SOURCE, "bench"))
import moe_step  # noqa: E402

moe_step.import_torch()
torch, ref = moe_step.torch, moe_step.ref
NUMBER = r"[0-9][0-9,.]*"


def same_numbers_as_reference():
    torch.manual_seed(0)
    c = dict(experts=4, top_k=2, sigmoid=0, normalize=1, route_scale=1.0, shared_experts=0)
    d, f, e = 16, 8, c["experts"]
    p = {"moe.router.gate.weight": torch.randn(e, d), "moe.experts.w1": torch.randn(e, f, d),
         "moe.experts.w2": torch.randn(e, d, f), "moe.experts.w3": torch.randn(e, f, d)}
    x = torch.randn(3, 10, d)
    results = []
    for moe in (moe_step.torchtitan_moe, ref.moe):
        inputs = {name: value.clone().requires_grad_() for name, value in p.items()}
        inputs["x"] = x.clone().requires_grad_()
        out = moe(inputs["x"], inputs, "moe.", c)
        (out * torch.linspace(-1, 1, out.numel()).view(out.shape)).sum().backward()
        results.append((out, {name: value.grad for name, value in inputs.items()}))
    (ours, our_grads), (theirs, their_grads) = results
    assert torch.allclose(ours, theirs, rtol=1e-5, atol=1e-5), (ours - theirs).abs().max()
    for name in their_grads:
        assert torch.allclose(our_grads[name], their_grads[name], rtol=1e-4, atol=1e-4), name
    # Not vacuous: each expert got tokens, and the router's gradient is not zero.
    assert all(g.abs().sum() > 0 for g in our_grads.values())


def tiny_run_fills_every_table():
    done = subprocess.run(["/usr/bin/python3", os.path.join(SOURCE, "bench", "moe_step.py"),
                           TITAN_BENCH, "--configs", "tiny", "--steps", "1"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"exit {done.returncode}:\n{done.stdout}\n{done.stderr}"
    lines = done.stdout.splitlines()
    assert lines[0].startswith("CPU: "), lines[0]
    steps = [line for line in lines if re.fullmatch(
        rf"\| tiny \| (dense, 64 features|4 experts of 32, 2 per token) \| (f32|bf16) \| 12,288 "
        rf"\| {NUMBER} \| {NUMBER} \| {NUMBER} \| {NUMBER} \|", line)]
    assert len(steps) == 4, done.stdout
    overheads = [line for line in lines
                 if re.fullmatch(rf"\| tiny \| (f32|bf16) \| {NUMBER} \| {NUMBER} \|", line)]
    assert len(overheads) == 2, done.stdout
    loads = [line for line in lines if re.fullmatch(
        rf"\| tiny \| (f32|bf16) \| (dense|moe) \| (titan|PyTorch \(Debian .*\)) \| "
        rf"({NUMBER}|-) \| {NUMBER} \| {NUMBER} \|", line)]
    assert len(loads) == 8, done.stdout


same_numbers_as_reference()
tiny_run_fills_every_table()
print("2 passed, 0 failed")
