#!/usr/bin/python3
"""Hugging Face's Qwen3 and Qwen3-MoE, as transformers' Qwen3ForCausalLM and Qwen3MoeForCausalLM
compute them (transformers 4.51's modeling_qwen3.py and modeling_qwen3_moe.py), written out in
torch, for folders titan's safetensors plugin exports and folders laid out as transformers saves
them. transformers itself does not run here: its Qwen3 models need torch 2 (torch.distributed.
tensor), Debian's python3-torch is 1.13, and PyPI's torch is a download of gigabytes.

Usage: /usr/bin/python3 hf_qwen3_reference.py CASE_DIR [CASE_DIR ...]

Each CASE_DIR holds what the C++ test wrote:
  export/          config.json + model.safetensors, as the plugin saved them
  case.txt         "key value" lines: batch, seq_len
  tokens.bin       int32 [batch * seq_len]
  titan_logits.bin f32 [batch * seq_len, vocab]: titan's DecoderModel::Forward
It checks that the export holds exactly the tensors transformers' model has (none missing, none
unexpected), with transformers' config keys, and computes hf_logits.bin from config.json and
model.safetensors alone; it fails when they differ from titan's by more than 1e-5 (relative norm).

It then writes hf_made/: a model of the same config.json drawn at random here, in transformers'
layout (its config.json with the keys transformers writes, its tensors in another order over two
files and a model.safetensors.index.json), and hf_made_logits.bin, its logits for the same
tokens, for titan to import and reproduce.
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_family_reference import Family, main  # noqa: E402
from hf_llama_reference import rms_norm, rope_inv_freq, rotate_half  # noqa: E402

# The smallest gap between a token's k-th and (k+1)-th router logits the check accepts: below
# it, rounding could choose other experts in titan than here, and the test would judge nothing.
MIN_ROUTING_GAP = 1e-4


def head_dim_of(config):
    """Qwen3Config defaults head_dim to 128; Qwen3MoeAttention to hidden_size / heads."""
    if config["model_type"] == "qwen3":
        return config.get("head_dim", 128)
    return config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]


def is_sparse(config, layer):
    """Qwen3MoeDecoderLayer's choice of Qwen3MoeSparseMoeBlock over Qwen3MoeMLP."""
    return (config["model_type"] == "qwen3_moe"
            and layer not in (config.get("mlp_only_layers") or [])
            and config["num_experts"] > 0
            and (layer + 1) % config.get("decoder_sparse_step", 1) == 0)


def expected_shapes(config):
    """The tensors save_pretrained writes for this config: the model's state_dict, lm_head
    left out when tied."""
    d, heads, kv_heads = config["hidden_size"], config["num_attention_heads"], \
        config["num_key_value_heads"]
    hd, vocab = head_dim_of(config), config["vocab_size"]
    shapes = {"model.embed_tokens.weight": [vocab, d], "model.norm.weight": [d]}
    if not config["tie_word_embeddings"]:
        shapes["lm_head.weight"] = [vocab, d]
    for layer in range(config["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        shapes.update({p + "input_layernorm.weight": [d],
                       p + "post_attention_layernorm.weight": [d],
                       p + "self_attn.q_proj.weight": [heads * hd, d],
                       p + "self_attn.k_proj.weight": [kv_heads * hd, d],
                       p + "self_attn.v_proj.weight": [kv_heads * hd, d],
                       p + "self_attn.o_proj.weight": [d, heads * hd],
                       p + "self_attn.q_norm.weight": [hd],
                       p + "self_attn.k_norm.weight": [hd]})
        if is_sparse(config, layer):
            f = config["moe_intermediate_size"]
            shapes[p + "mlp.gate.weight"] = [config["num_experts"], d]
            for e in range(config["num_experts"]):
                q = f"{p}mlp.experts.{e}."
                shapes.update({q + "gate_proj.weight": [f, d], q + "up_proj.weight": [f, d],
                               q + "down_proj.weight": [d, f]})
        else:
            f = config["intermediate_size"]
            shapes.update({p + "mlp.gate_proj.weight": [f, d], p + "mlp.up_proj.weight": [f, d],
                           p + "mlp.down_proj.weight": [d, f]})
    return shapes


def mlp(x, w, prefix):
    """Qwen3MLP / Qwen3MoeMLP: down(silu(gate(x)) * up(x))."""
    gate = F.silu(F.linear(x, w[prefix + "gate_proj.weight"]))
    return F.linear(gate * F.linear(x, w[prefix + "up_proj.weight"]), w[prefix + "down_proj.weight"])


def sparse_moe_block(config, w, prefix, x, gaps):
    """Qwen3MoeSparseMoeBlock.forward."""
    b, t, d = x.shape
    x = x.view(-1, d)
    router_logits = F.linear(x, w[prefix + "gate.weight"])
    routing_weights = F.softmax(router_logits, dim=1, dtype=torch.float)
    top_k = config["num_experts_per_tok"]
    if top_k < config["num_experts"]:  # the choice, as the scores', is the logits' top k
        ranked = router_logits.sort(dim=-1, descending=True).values
        gaps.append((ranked[:, top_k - 1] - ranked[:, top_k]).min().item())
    routing_weights, selected_experts = torch.topk(routing_weights, top_k, dim=-1)
    if config["norm_topk_prob"]:
        routing_weights /= routing_weights.sum(dim=-1, keepdim=True)
    routing_weights = routing_weights.to(x.dtype)
    final = torch.zeros((b * t, d), dtype=x.dtype)
    expert_mask = F.one_hot(selected_experts, num_classes=config["num_experts"]).permute(2, 1, 0)
    for expert in range(config["num_experts"]):
        idx, top_x = torch.where(expert_mask[expert])
        current = x[None, top_x].reshape(-1, d)
        current = mlp(current, w, f"{prefix}experts.{expert}.") * routing_weights[top_x, idx, None]
        final.index_add_(0, top_x, current.to(x.dtype))
    return final.reshape(b, t, d)


def forward(config, w, tokens, gaps):
    """Qwen3ForCausalLM's (Qwen3MoeForCausalLM's) logits for int64 tokens [batch, seq_len]."""
    b, t = tokens.shape
    heads, kv_heads = config["num_attention_heads"], config["num_key_value_heads"]
    head_dim, eps = head_dim_of(config), config["rms_norm_eps"]
    inv_freq = rope_inv_freq(config, head_dim)  # Qwen3RotaryEmbedding, as Llama's
    positions = torch.arange(t)[None, :].float()
    freqs = (inv_freq[None, :, None].float() @ positions[:, None, :]).transpose(1, 2)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos()[:, None], emb.sin()[:, None]
    mask = torch.full((t, t), float("-inf")).triu(1)

    h = w["model.embed_tokens.weight"][tokens]
    for layer in range(config["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        x = rms_norm(h, w[p + "input_layernorm.weight"], eps)
        # Qwen3Attention: q_norm and k_norm over each head, before the rotation.
        q = F.linear(x, w[p + "self_attn.q_proj.weight"]).view(b, t, heads, head_dim)
        k = F.linear(x, w[p + "self_attn.k_proj.weight"]).view(b, t, kv_heads, head_dim)
        q = rms_norm(q, w[p + "self_attn.q_norm.weight"], eps).transpose(1, 2)
        k = rms_norm(k, w[p + "self_attn.k_norm.weight"], eps).transpose(1, 2)
        v = F.linear(x, w[p + "self_attn.v_proj.weight"]).view(b, t, kv_heads, head_dim)
        v = v.transpose(1, 2)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        repeats = heads // kv_heads  # repeat_kv
        k = k[:, :, None].expand(b, kv_heads, repeats, t, head_dim).reshape(b, heads, t, head_dim)
        v = v[:, :, None].expand(b, kv_heads, repeats, t, head_dim).reshape(b, heads, t, head_dim)
        scores = q @ k.transpose(2, 3) * head_dim ** -0.5 + mask
        attention = F.softmax(scores, dim=-1, dtype=torch.float32) @ v
        attention = attention.transpose(1, 2).reshape(b, t, -1)
        h = h + F.linear(attention, w[p + "self_attn.o_proj.weight"])
        x = rms_norm(h, w[p + "post_attention_layernorm.weight"], eps)
        if is_sparse(config, layer):
            h = h + sparse_moe_block(config, w, p + "mlp.", x, gaps)
        else:
            h = h + mlp(x, w, p + "mlp.")
    h = rms_norm(h, w["model.norm.weight"], eps)
    lm_head = w["model.embed_tokens.weight"] if config["tie_word_embeddings"] else w["lm_head.weight"]
    return F.linear(h, lm_head).view(b * t, -1)


def hf_made(config, seed):
    """A config.json as transformers 4.51 writes one, and random weights in its layout: every
    linear weight of std 1/sqrt(fan in) (q_proj, k_proj and the router's larger, so that
    attention and the choice of experts depend on them), norms around 1."""
    made = dict(config)
    made.update({"initializer_range": 0.02, "use_cache": True, "transformers_version": "4.51.3",
                 "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "float32"})
    if config["model_type"] == "qwen3":
        made.update({"sliding_window": 4096, "max_window_layers": 28})
    else:
        made.update({"router_aux_loss_coef": 0.001, "max_window_layers": 28})
    generator = torch.Generator().manual_seed(seed)
    tensors = {}
    for name, shape in expected_shapes(config).items():
        if name.endswith("norm.weight"):
            tensors[name] = 1 + 0.1 * torch.randn(shape, generator=generator)
            continue
        scale = 1.0 if "embed_tokens" in name else shape[-1] ** -0.5
        if "q_proj" in name or "k_proj" in name:
            scale *= 4
        if name.endswith("mlp.gate.weight"):
            scale *= 20
        tensors[name] = scale * torch.randn(shape, generator=generator)
    return made, tensors


def check_config(config):
    moe = config["model_type"] == "qwen3_moe"
    assert config["architectures"] == ["Qwen3MoeForCausalLM" if moe else "Qwen3ForCausalLM"]
    assert config["model_type"] in ("qwen3", "qwen3_moe"), config["model_type"]
    assert config["hidden_act"] == "silu" and config["attention_bias"] is False
    assert config["use_sliding_window"] is False
    if moe:
        assert config["norm_topk_prob"] is True and config["decoder_sparse_step"] == 1



if __name__ == "__main__":
    main(Family(check_config, expected_shapes, forward,
                lambda config, case, seed: hf_made(config, seed), MIN_ROUTING_GAP,
                "two experts' router logits"), __doc__)
