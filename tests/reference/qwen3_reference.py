#!/usr/bin/python3
"""PyTorch reference for titan's qwen3 family, dense and mixture of experts, after TorchTitan's
torchtitan/models/qwen3 and torchtitan/models/moe (and Hugging Face's Qwen3 and Qwen3-MoE).

Usage: /usr/bin/python3 qwen3_reference.py [--bf16-operands | --float8-rowwise-experts] CASE_DIR ...

With --bf16-operands every linear layer (the router's and the experts' too) rounds its input, its
weight and in the backward its output's gradient to bf16 and multiplies in f32, as titan's bf16
matmuls do (llama_reference.py's Bf16OperandLinear), and attention as titan's bf16 attention
(Bf16OperandAttention). With --float8-rowwise-experts the routed
experts' GEMMs (forward, input and weight gradients) run as torchao's rowwise Float8 recipe runs
them (float8_reference.py's Float8Linear): e4m3, power-of-two scales, each expert's group of rows
quantized on its own as torchao's scaled grouped GEMM does; every other layer stays f32, and
logits_high.bin and grads_high.bin receive those of the same model with the experts in f32.

Each CASE_DIR holds what the C++ test wrote, as llama_reference.py reads it, with these more keys
in config.txt: head_dim, qk_norm, experts, top_k, expert_hidden_dim, shared_experts,
dense_layers, sigmoid, normalize, force_balance, route_scale. RoPE is unscaled (Qwen3's). It receives logits.bin,
loss.bin and grads.bin (a buffer such as the experts' bias has no gradient: zeros).

The mixture of experts is written the plain way, a loop over experts gathering their tokens and
adding each expert's output weighted into its tokens' rows; the router's scores are f32, the
choice is made on score + bias, the weights are the unbiased scores of the chosen experts,
normalized over them (+ 1e-20) and scaled. With force_balance (TorchTitan's
debug.moe_force_load_balance) token t's j-th choice is expert (t k + j) mod experts instead.
With aux_loss_alpha > 0 each layer adds DeepSeek-V3's sequence-wise balance loss to what the
gradients are of (loss.bin stays the cross-entropy); their sum is written to aux_loss.bin.
"""
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from float8_reference import Float8Linear, recipe_config  # noqa: E402
from llama_reference import (Bf16OperandAttention, Bf16OperandLinear, apply_rotary,  # noqa: E402
                             causal_attention, read_config, read_ints, read_params, rms_norm)

BF16_OPERANDS = False
FLOAT8_EXPERTS = None  # torchao's recipe config for the routed experts' GEMMs, or None: f32


def linear(x, w):
    return Bf16OperandLinear.apply(x, w) if BF16_OPERANDS else x @ w.t()


def expert_linear(x, w):
    return Float8Linear.apply(x, w, FLOAT8_EXPERTS) if FLOAT8_EXPERTS else linear(x, w)


def rope_frequencies(head_dim, seq_len, theta):
    freqs = 1.0 / (theta ** (torch.arange(0, head_dim, 2)[: head_dim // 2].float() / head_dim))
    angles = torch.outer(torch.arange(seq_len), freqs).float()
    return torch.polar(torch.ones_like(angles), angles)


def attention(x, p, prefix, c, freqs_cis):
    b, t, _ = x.shape
    hd = c["head_dim"]
    q = linear(x, p[prefix + "wq.weight"]).view(b, t, c["n_heads"], hd)
    k = linear(x, p[prefix + "wk.weight"]).view(b, t, c["n_kv_heads"], hd)
    v = linear(x, p[prefix + "wv.weight"]).view(b, t, c["n_kv_heads"], hd)
    if c["qk_norm"]:
        q = rms_norm(q, p[prefix + "q_norm.weight"], c["norm_eps"])
        k = rms_norm(k, p[prefix + "k_norm.weight"], c["norm_eps"])
    q, k = apply_rotary(q, freqs_cis), apply_rotary(k, freqs_cis)
    repeats = c["n_heads"] // c["n_kv_heads"]
    k = k.repeat_interleave(repeats, dim=2)
    v = v.repeat_interleave(repeats, dim=2)
    q, k, v = (z.transpose(1, 2) for z in (q, k, v))
    attend = Bf16OperandAttention.apply if BF16_OPERANDS else causal_attention
    out = attend(q, k, v).transpose(1, 2).reshape(b, t, -1)
    return linear(out, p[prefix + "wo.weight"])


def swiglu(x, w1, w2, w3, lin=linear):
    return lin(F.silu(lin(x, w1)) * lin(x, w3), w2)


def route(logits, bias, c):
    scores = torch.sigmoid(logits) if c["sigmoid"] else torch.softmax(logits, dim=-1)
    choice = scores.detach() + (bias if bias is not None else 0)
    experts = torch.topk(choice, c["top_k"], dim=-1).indices
    if c.get("force_balance"):  # TorchTitan's debug.moe_force_load_balance: round-robin
        n, k = logits.shape[0], c["top_k"]
        experts = torch.arange(n * k).reshape(n, k) % logits.shape[1]
    weights = scores.gather(1, experts)
    if c["normalize"]:
        weights = weights / (weights.sum(dim=-1, keepdim=True) + 1e-20)
    return experts, weights * c["route_scale"]


AUX_LOSSES = []  # the last forward's layers' sequence-wise auxiliary losses


def aux_loss(logits, experts, b, c):
    """DeepSeek-V3's sequence-wise balance loss: alpha sum_i f_i P_i per sequence, averaged."""
    e, k = c["experts"], c["top_k"]
    scores = torch.sigmoid(logits) if c["sigmoid"] else torch.softmax(logits, dim=-1)
    normalized = (scores / scores.sum(dim=-1, keepdim=True)).view(b, -1, e)
    t = normalized.shape[1]
    choices = torch.zeros(b, e).scatter_add_(1, experts.view(b, -1),
                                             torch.ones(b, t * k))
    f = choices * e / (k * t)
    return c["aux_loss_alpha"] * (f * normalized.mean(dim=1)).sum(dim=1).mean()


def moe(x, p, prefix, c):
    b, t, d = x.shape
    tokens = x.reshape(-1, d)
    logits = linear(tokens, p[prefix + "router.gate.weight"]).float()
    bias = p.get(prefix + "expert_bias")
    experts, weights = route(logits, None if bias is None else bias.detach(), c)
    if c.get("aux_loss_alpha", 0) > 0:
        AUX_LOSSES.append(aux_loss(logits, experts, b, c))
    out = torch.zeros_like(tokens)
    for e in range(c["experts"]):
        token, choice = torch.where(experts == e)
        if token.numel() == 0:
            continue
        y = swiglu(tokens[token], p[prefix + "experts.w1"][e], p[prefix + "experts.w2"][e],
                   p[prefix + "experts.w3"][e], expert_linear)
        out = out.index_add(0, token, y * weights[token, choice, None])
    if c["shared_experts"] > 0:
        shared = prefix + "shared_experts."
        out = out + swiglu(tokens, p[shared + "w1.weight"], p[shared + "w2.weight"],
                           p[shared + "w3.weight"])
    return out.view(b, t, d)


def forward(c, p, tokens, targets):
    n = tokens.numel()
    freqs_cis = rope_frequencies(c["head_dim"], c["seq_len"], c["rope_theta"])
    eps = c["norm_eps"]
    AUX_LOSSES.clear()
    h = p["tok_embeddings.weight"][tokens]
    for layer in range(c["n_layers"]):
        prefix = f"layers.{layer}."
        h = h + attention(rms_norm(h, p[prefix + "attention_norm.weight"], eps), p,
                          prefix + "attention.", c, freqs_cis)
        normed = rms_norm(h, p[prefix + "ffn_norm.weight"], eps)
        if c["experts"] > 0 and layer >= c["dense_layers"]:
            h = h + moe(normed, p, prefix + "moe.", c)
        else:
            prefix += "feed_forward."
            h = h + swiglu(normed, p[prefix + "w1.weight"], p[prefix + "w2.weight"],
                           p[prefix + "w3.weight"])
    output = p["tok_embeddings.weight"] if c["tie_embeddings"] else p["output.weight"]
    logits = linear(rms_norm(h, p["norm.weight"], eps), output).view(n, -1)
    return logits, F.cross_entropy(logits, targets.reshape(n))


def run_case(case):
    global FLOAT8_EXPERTS
    c = read_config(case)
    p = read_params(case)
    shape = (c["batch"], c["seq_len"])
    tokens = read_ints(os.path.join(case, "tokens.bin"), shape)
    targets = read_ints(os.path.join(case, "targets.bin"), shape)
    if FLOAT8_EXPERTS:
        float8, FLOAT8_EXPERTS = FLOAT8_EXPERTS, None
        high, loss = forward(c, p, tokens, targets)
        (loss + sum(AUX_LOSSES)).backward()
        high.detach().numpy().astype(np.float32).tofile(os.path.join(case, "logits_high.bin"))
        write_grads(p, os.path.join(case, "grads_high.bin"))
        for tensor in p.values():
            tensor.grad = None
        FLOAT8_EXPERTS = float8
    logits, loss = forward(c, p, tokens, targets)
    aux = sum(AUX_LOSSES)  # the gradient is of the loss plus the auxiliary losses
    (loss + aux).backward()
    logits.detach().numpy().astype(np.float32).tofile(os.path.join(case, "logits.bin"))
    np.array([loss.item()], dtype=np.float32).tofile(os.path.join(case, "loss.bin"))
    np.array([float(aux)], dtype=np.float32).tofile(os.path.join(case, "aux_loss.bin"))
    write_grads(p, os.path.join(case, "grads.bin"))


def write_grads(p, path):
    grads = [(p[name].grad if p[name].grad is not None else torch.zeros_like(p[name])).reshape(-1)
             for name in p]
    torch.cat(grads).numpy().astype(np.float32).tofile(path)


def main():
    global BF16_OPERANDS, FLOAT8_EXPERTS
    cases = sys.argv[1:]
    if cases and cases[0] == "--bf16-operands":
        BF16_OPERANDS, cases = True, cases[1:]
    elif cases and cases[0] == "--float8-rowwise-experts":
        FLOAT8_EXPERTS, cases = recipe_config("rowwise"), cases[1:]
    if not cases:
        sys.exit(__doc__)
    for case in cases:
        run_case(case)


if __name__ == "__main__":
    main()
