#!/usr/bin/python3
"""PyTorch reference for titan's deepseek_v3 family, a transcription of TorchTitan's
torchtitan/models/deepseek_v3 (multi-head latent attention with decoupled YaRN RoPE) and of its
mixture of experts' router (torchtitan/models/common/moe.py: node-limited group routing).

Usage: /usr/bin/python3 deepseek_v3_reference.py CASE_DIR ...

Each CASE_DIR holds what the C++ test wrote, as qwen3_reference.py reads it, with these more keys
in config.txt: q_lora_rank, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim,
rope_factor, original_seq_len, beta_fast, beta_slow, mscale, groups, groups_chosen. It receives
logits.bin, loss.bin and grads.bin (a buffer such as the experts' bias has no gradient: zeros).
"""
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llama_reference import apply_rotary, read_config, read_ints, read_params, rms_norm  # noqa: E402
from qwen3_reference import linear, swiglu  # noqa: E402


def yarn_frequencies(c):
    """TorchTitan's ComplexRoPE with scaling "yarn" (truncated cutoffs) over qk_rope_head_dim."""
    dim, base = c["qk_rope_head_dim"], c["rope_theta"]
    freqs = 1.0 / (base ** (torch.arange(0, dim, 2)[: dim // 2].float() / dim))
    if c["rope_factor"] > 1.0:
        def correction_dim(rotations):
            return (dim * math.log(c["original_seq_len"] / (rotations * 2 * math.pi))) / (
                2 * math.log(base))

        low = max(math.floor(correction_dim(c["beta_fast"])), 0)
        high = min(math.ceil(correction_dim(c["beta_slow"])), dim - 1)
        if low == high:
            high += 0.001
        ramp = ((torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low)).clamp(0, 1)
        freqs = freqs / c["rope_factor"] * ramp + freqs * (1 - ramp)
    angles = torch.outer(torch.arange(c["seq_len"]), freqs).float()
    return torch.polar(torch.ones_like(angles), angles)


def softmax_scale(c):
    scale = (c["qk_nope_head_dim"] + c["qk_rope_head_dim"]) ** -0.5
    if c["rope_factor"] > 1.0:
        mscale = 0.1 * c["mscale"] * math.log(c["rope_factor"]) + 1.0
        scale = scale * mscale * mscale
    return scale


def attention(x, p, prefix, c, freqs_cis):
    """TorchTitan's deepseek_v3 Attention.forward, its inner attention causal sdpa."""
    b, t, _ = x.shape
    h, dn, dr, dv = c["n_heads"], c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"]
    if c["q_lora_rank"] == 0:
        q = linear(x, p[prefix + "wq.weight"])
    else:
        q = linear(x, p[prefix + "wq_a.weight"])
        q = linear(rms_norm(q, p[prefix + "q_norm.weight"], c["norm_eps"]),
                   p[prefix + "wq_b.weight"])
    q = q.view(b, t, h, dn + dr)
    q_nope, q_pe = torch.split(q, [dn, dr], dim=-1)
    q_pe = apply_rotary(q_pe, freqs_cis)
    q = torch.cat([q_nope, q_pe], dim=-1)
    kv = linear(x, p[prefix + "wkv_a.weight"])
    kv, k_pe = torch.split(kv, [c["kv_lora_rank"], dr], dim=-1)
    k_pe = apply_rotary(k_pe.unsqueeze(2), freqs_cis)
    kv = linear(rms_norm(kv, p[prefix + "kv_norm.weight"], c["norm_eps"]),
                p[prefix + "wkv_b.weight"])
    kv = kv.view(b, t, h, dn + dv)
    k_nope, v = torch.split(kv, [dn, dv], dim=-1)
    k = torch.cat([k_nope, k_pe.expand(-1, -1, h, -1)], dim=-1)
    q, k, v = (z.transpose(1, 2) for z in (q, k, v))
    scores = q @ k.transpose(-2, -1) * softmax_scale(c)
    mask = torch.ones(t, t, dtype=torch.bool).tril()
    scores = scores.masked_fill(~mask, float("-inf"))
    out = (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, t, -1)
    return linear(out, p[prefix + "wo.weight"])


def route(logits, bias, c):
    """TorchTitan's TokenChoiceTopKRouter with _get_node_limited_routing_scores."""
    scores = torch.sigmoid(logits) if c["sigmoid"] else torch.softmax(logits, dim=-1)
    choice = scores.detach() + (bias if bias is not None else 0)
    if c["groups"] > 1:
        grouped = choice.unflatten(-1, (c["groups"], c["experts"] // c["groups"]))
        group_scores = grouped.topk(2, dim=-1).values.sum(dim=-1)
        group_idx = torch.topk(group_scores, k=c["groups_chosen"], dim=-1, sorted=False).indices
        group_mask = torch.ones_like(group_scores, dtype=torch.bool)
        group_mask.scatter_(-1, group_idx, False)
        choice = grouped.masked_fill(group_mask.unsqueeze(-1), float("-inf")).flatten(-2)
    experts = torch.topk(choice, c["top_k"], dim=-1, sorted=False).indices
    weights = scores.gather(1, experts)
    if c["normalize"]:
        weights = weights / (weights.sum(dim=-1, keepdim=True) + 1e-20)
    return experts, weights * c["route_scale"]


def moe(x, p, prefix, c):
    b, t, d = x.shape
    tokens = x.reshape(-1, d)
    logits = linear(tokens, p[prefix + "router.gate.weight"]).float()
    bias = p.get(prefix + "expert_bias")
    experts, weights = route(logits, None if bias is None else bias.detach(), c)
    out = torch.zeros_like(tokens)
    for e in range(c["experts"]):
        token, choice = torch.where(experts == e)
        if token.numel() == 0:
            continue
        y = swiglu(tokens[token], p[prefix + "experts.w1"][e], p[prefix + "experts.w2"][e],
                   p[prefix + "experts.w3"][e])
        out = out.index_add(0, token, y * weights[token, choice, None])
    if c["shared_experts"] > 0:
        shared = prefix + "shared_experts."
        out = out + swiglu(tokens, p[shared + "w1.weight"], p[shared + "w2.weight"],
                           p[shared + "w3.weight"])
    return out.view(b, t, d)


def forward(c, p, tokens, targets):
    n = tokens.numel()
    freqs_cis = yarn_frequencies(c)
    eps = c["norm_eps"]
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
    logits = linear(rms_norm(h, p["norm.weight"], eps), p["output.weight"]).view(n, -1)
    return logits, F.cross_entropy(logits, targets.reshape(n))


def run_case(case):
    c = read_config(case)
    p = read_params(case)
    shape = (c["batch"], c["seq_len"])
    tokens = read_ints(os.path.join(case, "tokens.bin"), shape)
    targets = read_ints(os.path.join(case, "targets.bin"), shape)
    logits, loss = forward(c, p, tokens, targets)
    loss.backward()
    logits.detach().numpy().astype(np.float32).tofile(os.path.join(case, "logits.bin"))
    np.array([loss.item()], dtype=np.float32).tofile(os.path.join(case, "loss.bin"))
    grads = [(p[name].grad if p[name].grad is not None else torch.zeros_like(p[name])).reshape(-1)
             for name in p]
    torch.cat(grads).numpy().astype(np.float32).tofile(os.path.join(case, "grads.bin"))


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    for case in sys.argv[1:]:
        run_case(case)


if __name__ == "__main__":
    main()
