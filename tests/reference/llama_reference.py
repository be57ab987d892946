#!/usr/bin/python3
"""PyTorch reference for titan's Llama 3 model, after TorchTitan's torchtitan/models/llama3.

Usage: /usr/bin/python3 llama_reference.py [--autocast-bf16 | --bf16-operands] CASE_DIR ...

With --autocast-bf16 the forward runs under torch.autocast("cpu", dtype=torch.bfloat16), as
TorchTitan trains with mixed_precision_param = "bfloat16" without FSDP: matmuls take and give
bf16, the parameters and their gradients stay f32. With --bf16-operands every linear layer rounds
its input, its weight and (in the backward) its output's gradient to bf16 and multiplies in f32,
which is what titan's bf16 matmuls compute, and attention rounds its operands as titan's bf16
attention does (Bf16OperandAttention); everything else stays f32.

Each CASE_DIR holds what the C++ test wrote:
  config.txt   "key value" lines: dim n_layers n_heads n_kv_heads vocab_size hidden_dim
               norm_eps rope_theta tie_embeddings batch seq_len
  params.txt   one parameter a line: "name d0 d1 ..."; params.bin holds them as f32, in order
  tokens.bin, targets.bin   int32 [batch * seq_len]
and receives logits.bin (f32 [batch * seq_len, vocab]), loss.bin (one f32) and grads.bin
(f32, in params.txt order).
"""
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F


def read_config(case):
    config = {}
    with open(os.path.join(case, "config.txt")) as f:
        for line in f:
            key, value = line.split()
            config[key] = float(value) if "." in value or "e" in value else int(value)
    return config


def read_params(case):
    flat = np.fromfile(os.path.join(case, "params.bin"), dtype=np.float32)
    params, offset = {}, 0
    with open(os.path.join(case, "params.txt")) as f:
        for line in f:
            name, *shape = line.split()
            shape = [int(d) for d in shape]
            count = int(np.prod(shape))
            tensor = torch.from_numpy(flat[offset:offset + count].copy()).reshape(shape)
            params[name] = tensor.requires_grad_(True)
            offset += count
    return params


def to_bf16(x):
    return x.to(torch.bfloat16).to(torch.float32)


class Bf16OperandLinear(torch.autograd.Function):
    """x . w^T on operands rounded to bf16, products summed in f32; the backward rounds the
    incoming gradient too, as titan's bf16 GEMMs take it."""

    @staticmethod
    def forward(ctx, x, w):
        xr, wr = to_bf16(x), to_bf16(w)
        ctx.save_for_backward(xr, wr)
        return xr @ wr.t()

    @staticmethod
    def backward(ctx, grad):
        xr, wr = ctx.saved_tensors
        g = to_bf16(grad)
        grad_w = g.reshape(-1, g.shape[-1]).t() @ xr.reshape(-1, xr.shape[-1])
        return g @ wr, grad_w


def causal_attention(q, k, v):
    """softmax(q k^T / sqrt(hd)) v under the causal mask; q, k, v are [batch, heads, t, hd]."""
    t = q.shape[-2]
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    mask = torch.ones(t, t, dtype=torch.bool).tril()
    return scores.masked_fill(~mask, float("-inf")).softmax(-1) @ v


class Bf16OperandAttention(torch.autograd.Function):
    """causal_attention as titan's bf16 attention computes it: q, k and v rounded to bf16, the
    scores and the softmax in f32, the probabilities (before their division by the f32 sum)
    rounded to bf16 for p v; the backward rounds the incoming gradient, p and ds for its
    products, and takes D = dout . out with dout rounded."""

    @staticmethod
    def scores(q, k):
        t = q.shape[-2]
        s = (q @ k.transpose(-2, -1)) * (1 / math.sqrt(q.shape[-1]))
        return s.masked_fill(~torch.ones(t, t, dtype=torch.bool).tril(), float("-inf"))

    @staticmethod
    def forward(ctx, q, k, v):
        qr, kr, vr = to_bf16(q), to_bf16(k), to_bf16(v)
        s = Bf16OperandAttention.scores(qr, kr)
        m = s.amax(-1, keepdim=True)
        e = torch.exp(s - m)
        total = e.sum(-1, keepdim=True)
        out = (to_bf16(e) @ vr) * (1 / total)
        ctx.save_for_backward(qr, kr, vr, out, m + torch.log(total))
        return out

    @staticmethod
    def backward(ctx, grad):
        qr, kr, vr, out, lse = ctx.saved_tensors
        g = to_bf16(grad)
        p = torch.exp(Bf16OperandAttention.scores(qr, kr) - lse)
        ds = to_bf16(p * (g @ vr.transpose(-2, -1) - (g * out).sum(-1, keepdim=True)))
        scale = 1 / math.sqrt(qr.shape[-1])
        return (ds @ kr) * scale, (ds.transpose(-2, -1) @ qr) * scale, to_bf16(p).transpose(-2, -1) @ g


LINEAR = F.linear
ATTEND = causal_attention


def linear(x, w):
    return LINEAR(x, w)


def rope_frequencies(head_dim, seq_len, theta):
    """Llama 3 scaled frequencies (factor 8, low 1, high 4, original context 8192)."""
    freqs = 1.0 / (theta ** (torch.arange(0, head_dim, 2)[: head_dim // 2].float() / head_dim))
    scale, low_factor, high_factor, old_context = 8.0, 1.0, 4.0, 8192.0
    low_wavelen, high_wavelen = old_context / low_factor, old_context / high_factor
    scaled = []
    for freq in freqs.tolist():
        wavelen = 2 * math.pi / freq
        if wavelen < high_wavelen:
            scaled.append(freq)
        elif wavelen > low_wavelen:
            scaled.append(freq / scale)
        else:
            smooth = (old_context / wavelen - low_factor) / (high_factor - low_factor)
            scaled.append((1 - smooth) * freq / scale + smooth * freq)
    freqs = torch.tensor(scaled, dtype=torch.float32)
    angles = torch.outer(torch.arange(seq_len), freqs).float()
    return torch.polar(torch.ones_like(angles), angles)


def apply_rotary(x, freqs_cis):
    pairs = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    rotated = torch.view_as_real(pairs * freqs_cis[None, :, None, :]).flatten(3)
    return rotated.type_as(x)


def rms_norm(x, weight, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def attention(x, p, prefix, c, freqs_cis):
    b, t, _ = x.shape
    hd = c["dim"] // c["n_heads"]
    q = linear(x, p[prefix + "wq.weight"]).view(b, t, c["n_heads"], hd)
    k = linear(x, p[prefix + "wk.weight"]).view(b, t, c["n_kv_heads"], hd)
    v = linear(x, p[prefix + "wv.weight"]).view(b, t, c["n_kv_heads"], hd)
    q, k = apply_rotary(q, freqs_cis), apply_rotary(k, freqs_cis)
    repeats = c["n_heads"] // c["n_kv_heads"]
    k = k.repeat_interleave(repeats, dim=2)  # TorchTitan's repeat_kv
    v = v.repeat_interleave(repeats, dim=2)
    q, k, v = (z.transpose(1, 2) for z in (q, k, v))
    out = ATTEND(q, k, v).transpose(1, 2).reshape(b, t, -1)
    return linear(out, p[prefix + "wo.weight"])


def feed_forward(x, p, prefix):
    gate = F.silu(linear(x, p[prefix + "w1.weight"])) * linear(x, p[prefix + "w3.weight"])
    return linear(gate, p[prefix + "w2.weight"])


def forward(c, p, tokens, targets):
    """Logits [batch * seq_len, vocab] and the mean cross-entropy loss of int64 tokens and
    targets, each [batch, seq_len]."""
    n = tokens.numel()
    freqs_cis = rope_frequencies(c["dim"] // c["n_heads"], c["seq_len"], c["rope_theta"])
    eps = c["norm_eps"]

    h = p["tok_embeddings.weight"][tokens]
    for layer in range(c["n_layers"]):
        prefix = f"layers.{layer}."
        h = h + attention(rms_norm(h, p[prefix + "attention_norm.weight"], eps), p,
                          prefix + "attention.", c, freqs_cis)
        h = h + feed_forward(rms_norm(h, p[prefix + "ffn_norm.weight"], eps), p,
                             prefix + "feed_forward.")
    output = p["tok_embeddings.weight"] if c["tie_embeddings"] else p["output.weight"]
    logits = linear(rms_norm(h, p["norm.weight"], eps), output).view(n, -1)
    return logits, F.cross_entropy(logits, targets.reshape(n))


def read_ints(path, shape):
    return torch.from_numpy(np.fromfile(path, dtype=np.int32).astype(np.int64)).view(*shape)


def run_case(case, autocast_bf16):
    c = read_config(case)
    p = read_params(case)
    shape = (c["batch"], c["seq_len"])
    tokens = read_ints(os.path.join(case, "tokens.bin"), shape)
    targets = read_ints(os.path.join(case, "targets.bin"), shape)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast_bf16):
        logits, loss = forward(c, p, tokens, targets)
    loss.backward()

    logits.detach().float().numpy().astype(np.float32).tofile(os.path.join(case, "logits.bin"))
    np.array([loss.item()], dtype=np.float32).tofile(os.path.join(case, "loss.bin"))
    grads = [p[name].grad.reshape(-1) for name in p]
    torch.cat(grads).numpy().astype(np.float32).tofile(os.path.join(case, "grads.bin"))


def main():
    global LINEAR, ATTEND
    args = sys.argv[1:]
    autocast_bf16 = bool(args) and args[0] == "--autocast-bf16"
    if args and args[0] == "--bf16-operands":
        LINEAR, ATTEND = Bf16OperandLinear.apply, Bf16OperandAttention.apply
    cases = args[1:] if args and args[0].startswith("--") else args
    if not cases:
        sys.exit(__doc__)
    torch.manual_seed(0)
    for case in cases:
        run_case(case, autocast_bf16)


if __name__ == "__main__":
    main()
