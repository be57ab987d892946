#!/usr/bin/python3
"""titan's model kernels and forward/backward next to PyTorch, in one run.

Usage: /usr/bin/python3 bench/model_bench.py build/bin/titan_model_bench [--threads N]

Runs the C++ bench (which times the same shapes) and the PyTorch equivalents on the same
thread count, and prints a Markdown table for docs/benchmarks.md.
"""
import argparse
import math
import os
import statistics
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "reference"))
import llama_reference as ref  # noqa: E402


def median_ms(work, repeats=5):
    work()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        work()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def forward_backward_ms(make_inputs, fn, repeats=5):
    """Forward time, and backward time as (forward + backward) - forward."""
    inputs = make_inputs()
    forward = median_ms(lambda: fn(*inputs), repeats)

    def step():
        out = fn(*inputs)
        out.backward(torch.ones_like(out))
    total = median_ms(step, repeats)
    return forward, total - forward


def leaf(*shape, scale=1.0):
    return (torch.randn(*shape) * scale).requires_grad_(True)


def torch_kernels():
    b, t, d, f, v, heads, kv_heads, hd = 4, 512, 512, 1536, 8192, 8, 4, 64
    n = b * t
    rows = {}
    rows["matmul 2048x512x1536"] = forward_backward_ms(
        lambda: (leaf(n, d), leaf(f, d, scale=0.02)), F.linear)
    rows["rmsnorm 2048x512"] = forward_backward_ms(
        lambda: (leaf(n, d), leaf(d)), lambda x, w: ref.rms_norm(x, w, 1e-5))
    freqs = ref.rope_frequencies(hd, t, 500000.0)
    rows["rope 4x512x8x64"] = forward_backward_ms(
        lambda: (leaf(b, t, heads, hd),), lambda x: ref.apply_rotary(x, freqs))

    def attention(q, k, v_):
        k = k.repeat_interleave(heads // kv_heads, dim=2)
        v_ = v_.repeat_interleave(heads // kv_heads, dim=2)
        q, k, v_ = (z.transpose(1, 2) for z in (q, k, v_))
        scores = (q @ k.transpose(-2, -1) / math.sqrt(hd))
        scores = scores.masked_fill(~torch.ones(t, t, dtype=torch.bool).tril(), float("-inf"))
        return scores.softmax(-1) @ v_
    rows["attention 4x512 h8 kv4 d64"] = forward_backward_ms(
        lambda: (leaf(b, t, heads, hd), leaf(b, t, kv_heads, hd), leaf(b, t, kv_heads, hd)),
        attention)
    rows["swiglu 2048x1536"] = forward_backward_ms(
        lambda: (leaf(n, f), leaf(n, f)), lambda a, g: F.silu(a) * g)
    targets = torch.arange(n) * 31 % v
    rows["cross_entropy 2048x8192"] = forward_backward_ms(
        lambda: (leaf(n, v),), lambda x: F.cross_entropy(x, targets))
    tokens = torch.arange(n) * 31 % v
    rows["embedding 2048x512 v8192"] = forward_backward_ms(
        lambda: (leaf(v, d),), lambda table: table[tokens])
    return rows


def torch_model(dim, n_layers, n_heads, n_kv_heads, vocab, hidden, b, t):
    c = dict(dim=dim, n_layers=n_layers, n_heads=n_heads, n_kv_heads=n_kv_heads,
             vocab_size=vocab, norm_eps=1e-5)
    kv = n_kv_heads * dim // n_heads
    p = {"tok_embeddings.weight": leaf(vocab, dim)}
    for layer in range(n_layers):
        pre = f"layers.{layer}."
        shapes = {"attention_norm": (dim,), "attention.wq": (dim, dim), "attention.wk": (kv, dim),
                  "attention.wv": (kv, dim), "attention.wo": (dim, dim), "ffn_norm": (dim,),
                  "feed_forward.w1": (hidden, dim), "feed_forward.w2": (dim, hidden),
                  "feed_forward.w3": (hidden, dim)}
        for name, shape in shapes.items():
            p[pre + name + ".weight"] = leaf(*shape, scale=0.02)
    p["norm.weight"] = leaf(dim)
    p["output.weight"] = leaf(vocab, dim, scale=dim ** -0.5)
    tokens = torch.arange(b * t).view(b, t) * 37 % vocab
    targets = (torch.arange(b * t) * 53 + 1) % vocab
    freqs = ref.rope_frequencies(dim // n_heads, t, 500000.0)

    def forward():
        h = p["tok_embeddings.weight"][tokens]
        for layer in range(n_layers):
            pre = f"layers.{layer}."
            h = h + ref.attention(ref.rms_norm(h, p[pre + "attention_norm.weight"], 1e-5), p,
                                  pre + "attention.", c, freqs)
            h = h + ref.feed_forward(ref.rms_norm(h, p[pre + "ffn_norm.weight"], 1e-5), p,
                                     pre + "feed_forward.")
        logits = F.linear(ref.rms_norm(h, p["norm.weight"], 1e-5), p["output.weight"])
        return F.cross_entropy(logits.view(b * t, -1), targets)

    fwd = median_ms(forward, 3)
    total = median_ms(lambda: forward().backward(), 3)
    return fwd, total - fwd


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("titan_bench")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    args = parser.parse_args()
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads),
               OPENBLAS_NUM_THREADS=str(args.threads))
    titan_out = subprocess.run([args.titan_bench], env=env, check=True, capture_output=True,
                               text=True).stdout
    titan = {}
    for line in titan_out.strip().splitlines():
        name, fwd, bwd = line.split("\t")
        titan[name] = (float(fwd), float(bwd))

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    theirs = torch_kernels()
    theirs["model debugmodel b4 t512"] = torch_model(256, 6, 16, 16, 2048, 768, 4, 512)
    theirs["model 34M b4 t512"] = torch_model(512, 8, 8, 4, 8192, 1536, 4, 512)

    print(f"threads: {args.threads}, torch {torch.__version__}; median ms\n")
    print("| what | titan fwd | torch fwd | titan bwd | torch bwd |")
    print("|---|---:|---:|---:|---:|")
    for name, (fwd, bwd) in titan.items():
        tf, tb = theirs.get(name, (float("nan"), float("nan")))
        print(f"| {name} | {fwd:.2f} | {tf:.2f} | {bwd:.2f} | {tb:.2f} |")


if __name__ == "__main__":
    main()
