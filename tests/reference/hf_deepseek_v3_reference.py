#!/usr/bin/python3
"""Hugging Face's DeepSeek-V3, as transformers' DeepseekV3ForCausalLM computes it
(modeling_deepseek_v3.py and modeling_rope_utils.py's YaRN), written out in torch, for folders
titan's safetensors plugin exports and folders laid out as transformers saves them. transformers
itself does not run here (see hf_qwen3_reference.py).

Usage: /usr/bin/python3 hf_deepseek_v3_reference.py CASE_DIR [CASE_DIR ...]

Each CASE_DIR holds what the C++ test wrote:
  export/          config.json + model.safetensors, as the plugin saved them
  case.txt         "key value" lines: batch, seq_len, hf_made_rope_interleave (1 or 0)
  tokens.bin       int32 [batch * seq_len]
  titan_logits.bin f32 [batch * seq_len, vocab]: titan's DecoderModel::Forward
It checks that the export holds exactly the tensors transformers' model has (none missing, none
unexpected), with transformers' config keys, and computes hf_logits.bin from config.json and
model.safetensors alone; it fails when they differ from titan's by more than 1e-5 (relative norm).

It then writes hf_made/: a model of the same shape drawn at random here, in transformers' layout
(config.json as DeepSeek publishes its own: rope_scaling "type" "yarn" without attention_factor,
its remote code's keys, rope_interleave as case.txt says; the tensors in another order over two
files and a model.safetensors.index.json), and hf_made_logits.bin, its logits for the same
tokens, for titan to import and reproduce.
"""
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_family_reference import Family, main  # noqa: E402
from hf_llama_reference import rms_norm, rotate_half  # noqa: E402

# The smallest gap between the last chosen and the first passed-over group or expert the check
# accepts: below it, rounding could choose otherwise in titan than here (sigmoid scores of f32
# logits differ by about 1e-7).
MIN_ROUTING_GAP = 1e-5
# DeepseekV3RMSNorm's default, which q_a_layernorm and kv_a_layernorm keep.
LATENT_NORM_EPS = 1e-6


def rope_parameters(config):
    """rope_scaling (transformers 4) or rope_parameters (5), and the theta."""
    scaling = config.get("rope_scaling") or config.get("rope_parameters") or {}
    theta = scaling.get("rope_theta", config.get("rope_theta", 10000.0))
    return scaling, theta


def get_mscale(scale, mscale=1.0):
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


def rotary_inv_freq(config):
    """DeepseekV3RotaryEmbedding's inv_freq and attention_scaling: _compute_default_rope_parameters
    or _compute_yarn_parameters over head_dim = qk_rope_head_dim."""
    dim = config["qk_rope_head_dim"]
    scaling, base = rope_parameters(config)
    pos_freqs = base ** (torch.arange(0, dim, 2).to(dtype=torch.float) / dim)
    if scaling.get("rope_type", scaling.get("type", "default")) == "default":
        return 1.0 / pos_freqs, 1.0
    assert scaling.get("rope_type", scaling.get("type")) == "yarn"
    factor = scaling["factor"]
    if "original_max_position_embeddings" in scaling:
        original = scaling["original_max_position_embeddings"]
        factor = config["max_position_embeddings"] / original
    else:
        original = config["max_position_embeddings"]
    attention_factor = scaling.get("attention_factor")
    mscale, mscale_all_dim = scaling.get("mscale"), scaling.get("mscale_all_dim")
    if attention_factor is None:
        if mscale and mscale_all_dim:
            attention_factor = float(get_mscale(factor, mscale) /
                                     get_mscale(factor, mscale_all_dim))
        else:
            attention_factor = get_mscale(factor)
    beta_fast = scaling.get("beta_fast") or 32
    beta_slow = scaling.get("beta_slow") or 1

    def correction_dim(rotations):
        return (dim * math.log(original / (rotations * 2 * math.pi))) / (2 * math.log(base))

    low, high = correction_dim(beta_fast), correction_dim(beta_slow)
    if scaling.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    ramp = torch.clamp((torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low), 0, 1)
    extrapolation_factor = 1 - ramp
    inv_freq = (1.0 / (factor * pos_freqs)) * (1 - extrapolation_factor) + \
        (1.0 / pos_freqs) * extrapolation_factor
    return inv_freq, attention_factor


def softmax_scale(config):
    """DeepseekV3Attention.scaling."""
    scale = (config["qk_nope_head_dim"] + config["qk_rope_head_dim"]) ** -0.5
    scaling = config.get("rope_scaling")
    if scaling is not None:
        mscale_all_dim = scaling.get("mscale_all_dim", 0)
        if mscale_all_dim:
            mscale = get_mscale(scaling["factor"], mscale_all_dim)
            scale = scale * mscale * mscale
    return scale


def is_sparse(config, layer):
    """DeepseekV3DecoderLayer's choice of DeepseekV3MoE over DeepseekV3MLP."""
    return layer >= config["first_k_dense_replace"]


def expected_shapes(config):
    """The tensors save_pretrained writes for this config: the model's state_dict (the router's
    e_score_correction_bias is a persistent buffer), lm_head left out when tied."""
    d, heads, vocab = config["hidden_size"], config["num_attention_heads"], config["vocab_size"]
    nope, rope, v = config["qk_nope_head_dim"], config["qk_rope_head_dim"], config["v_head_dim"]
    q_rank, kv_rank = config["q_lora_rank"], config["kv_lora_rank"]
    shapes = {"model.embed_tokens.weight": [vocab, d], "model.norm.weight": [d]}
    if not config["tie_word_embeddings"]:
        shapes["lm_head.weight"] = [vocab, d]
    for layer in range(config["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        a = p + "self_attn."
        shapes.update({p + "input_layernorm.weight": [d],
                       p + "post_attention_layernorm.weight": [d],
                       a + "kv_a_proj_with_mqa.weight": [kv_rank + rope, d],
                       a + "kv_a_layernorm.weight": [kv_rank],
                       a + "kv_b_proj.weight": [heads * (nope + v), kv_rank],
                       a + "o_proj.weight": [d, heads * v]})
        if q_rank is None:
            shapes[a + "q_proj.weight"] = [heads * (nope + rope), d]
        else:
            shapes.update({a + "q_a_proj.weight": [q_rank, d], a + "q_a_layernorm.weight": [q_rank],
                           a + "q_b_proj.weight": [heads * (nope + rope), q_rank]})
        if is_sparse(config, layer):
            f, e = config["moe_intermediate_size"], config["n_routed_experts"]
            fs = f * config["n_shared_experts"]
            shapes.update({p + "mlp.gate.weight": [e, d],
                           p + "mlp.gate.e_score_correction_bias": [e],
                           p + "mlp.shared_experts.gate_proj.weight": [fs, d],
                           p + "mlp.shared_experts.up_proj.weight": [fs, d],
                           p + "mlp.shared_experts.down_proj.weight": [d, fs]})
            for expert in range(e):
                q = f"{p}mlp.experts.{expert}."
                shapes.update({q + "gate_proj.weight": [f, d], q + "up_proj.weight": [f, d],
                               q + "down_proj.weight": [d, f]})
        else:
            f = config["intermediate_size"]
            shapes.update({p + "mlp.gate_proj.weight": [f, d], p + "mlp.up_proj.weight": [f, d],
                           p + "mlp.down_proj.weight": [d, f]})
    return shapes


def mlp(x, w, prefix):
    """DeepseekV3MLP: down(silu(gate(x)) * up(x))."""
    gate = F.silu(F.linear(x, w[prefix + "gate_proj.weight"]))
    up = F.linear(x, w[prefix + "up_proj.weight"])
    return F.linear(gate * up, w[prefix + "down_proj.weight"])


def gap(values, k):
    """How far the k-th largest of each row is above the (k+1)-th: the margin of a top-k choice."""
    if k >= values.shape[-1]:
        return float("inf")
    ranked = values.sort(dim=-1, descending=True).values
    return (ranked[..., k - 1] - ranked[..., k]).min().item()


def router(config, w, prefix, x, gaps):
    """DeepseekV3TopkRouter.forward, noting how clear each choice is and that no expert of a group
    passed over (masked to 0 there, left out in titan) could have been chosen."""
    e, groups = config["n_routed_experts"], config["n_group"]
    logits = F.linear(x.float(), w[prefix + "gate.weight"].float())
    scores = logits.sigmoid()
    choice = scores.view(-1, e) + w[prefix + "gate.e_score_correction_bias"].unsqueeze(0)
    group_scores = choice.view(-1, groups, e // groups).topk(2, dim=-1)[0].sum(dim=-1)
    gaps.append(gap(group_scores, config["topk_group"]))
    group_idx = torch.topk(group_scores, k=config["topk_group"], dim=-1, sorted=False)[1]
    group_mask = torch.zeros_like(group_scores)
    group_mask.scatter_(1, group_idx, 1)
    score_mask = group_mask.unsqueeze(-1).expand(-1, groups, e // groups).reshape(-1, e)
    eligible = choice.masked_fill(~score_mask.bool(), float("-inf"))
    gaps.append(gap(eligible, config["num_experts_per_tok"]))
    choice = choice.masked_fill(~score_mask.bool(), 0.0)
    topk_indices = torch.topk(choice, k=config["num_experts_per_tok"], dim=-1, sorted=False)[1]
    assert (choice.gather(1, topk_indices) > 0).all(), \
        "a chosen expert's score is not positive: transformers' masking with 0 would differ"
    topk_weights = scores.gather(1, topk_indices)
    if config["norm_topk_prob"]:
        topk_weights /= topk_weights.sum(dim=-1, keepdim=True) + 1e-20
    return topk_indices, topk_weights * config["routed_scaling_factor"]


def moe(config, w, prefix, x, gaps):
    """DeepseekV3MoE.forward: the routed experts weighted, plus the shared experts."""
    shape = x.shape
    flat = x.reshape(-1, shape[-1])
    topk_indices, topk_weights = router(config, w, prefix, flat, gaps)
    final = torch.zeros_like(flat, dtype=topk_weights.dtype)
    expert_mask = F.one_hot(topk_indices, num_classes=config["n_routed_experts"]).permute(2, 0, 1)
    for expert in range(config["n_routed_experts"]):
        token_indices, weight_indices = torch.where(expert_mask[expert])
        if token_indices.numel() > 0:
            out = mlp(flat[token_indices], w, f"{prefix}experts.{expert}.")
            final.index_add_(0, token_indices,
                             out * topk_weights[token_indices, weight_indices].unsqueeze(-1))
    return final.view(*shape) + mlp(x, w, prefix + "shared_experts.")


def attention(config, w, prefix, x, cos, sin, mask):
    """DeepseekV3Attention.forward, eager."""
    b, t, _ = x.shape
    heads = config["num_attention_heads"]
    nope, rope, v_dim = config["qk_nope_head_dim"], config["qk_rope_head_dim"], config["v_head_dim"]
    if config["q_lora_rank"] is None:
        q = F.linear(x, w[prefix + "q_proj.weight"])
    else:
        q = rms_norm(F.linear(x, w[prefix + "q_a_proj.weight"]), w[prefix + "q_a_layernorm.weight"],
                     LATENT_NORM_EPS)
        q = F.linear(q, w[prefix + "q_b_proj.weight"])
    q = q.view(b, t, -1, nope + rope).transpose(1, 2)
    q_pass, q_rot = torch.split(q, [nope, rope], dim=-1)
    compressed = F.linear(x, w[prefix + "kv_a_proj_with_mqa.weight"])
    k_pass, k_rot = torch.split(compressed, [config["kv_lora_rank"], rope], dim=-1)
    k_pass = F.linear(rms_norm(k_pass, w[prefix + "kv_a_layernorm.weight"], LATENT_NORM_EPS),
                      w[prefix + "kv_b_proj.weight"])
    k_pass = k_pass.view(b, t, -1, nope + v_dim).transpose(1, 2)
    k_pass, value = torch.split(k_pass, [nope, v_dim], dim=-1)
    k_rot = k_rot.view(b, 1, t, rope)
    if config.get("rope_interleave", True):  # apply_rotary_pos_emb_interleave
        q_rot = q_rot.reshape(b, heads, t, rope // 2, 2).transpose(4, 3).reshape(b, heads, t, rope)
        k_rot = k_rot.reshape(b, 1, t, rope // 2, 2).transpose(4, 3).reshape(b, 1, t, rope)
    q_rot = q_rot * cos + rotate_half(q_rot) * sin
    k_rot = k_rot * cos + rotate_half(k_rot) * sin
    k_rot = k_rot.expand(*k_pass.shape[:-1], -1)
    query = torch.cat((q_pass, q_rot), dim=-1)
    key = torch.cat((k_pass, k_rot), dim=-1)
    scores = query @ key.transpose(2, 3) * softmax_scale(config) + mask
    out = F.softmax(scores, dim=-1, dtype=torch.float32) @ value
    return F.linear(out.transpose(1, 2).reshape(b, t, -1), w[prefix + "o_proj.weight"])


def forward(config, w, tokens, gaps):
    """DeepseekV3ForCausalLM's logits for int64 tokens [batch, seq_len], in f32."""
    b, t = tokens.shape
    eps = config["rms_norm_eps"]
    inv_freq, attention_scaling = rotary_inv_freq(config)
    positions = torch.arange(t)[None, :].float()
    freqs = (inv_freq[None, :, None].float() @ positions[:, None, :]).transpose(1, 2)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos = (emb.cos() * attention_scaling)[:, None]
    sin = (emb.sin() * attention_scaling)[:, None]
    mask = torch.full((t, t), float("-inf")).triu(1)
    h = w["model.embed_tokens.weight"][tokens]
    for layer in range(config["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        x = rms_norm(h, w[p + "input_layernorm.weight"], eps)
        h = h + attention(config, w, p + "self_attn.", x, cos, sin, mask)
        x = rms_norm(h, w[p + "post_attention_layernorm.weight"], eps)
        h = h + (moe(config, w, p + "mlp.", x, gaps) if is_sparse(config, layer)
                 else mlp(x, w, p + "mlp."))
    h = rms_norm(h, w["model.norm.weight"], eps)
    tied = config["tie_word_embeddings"]
    lm_head = w["model.embed_tokens.weight"] if tied else w["lm_head.weight"]
    return F.linear(h, lm_head).view(b * t, -1)


def hf_made(config, rope_interleave, seed):
    """A config.json as DeepSeek publishes its own (transformers keeps its keys) and random
    weights in transformers' layout: every linear weight of std 1/sqrt(fan in) (the query and key
    projections and the router's larger, so that attention and the choice of experts depend on
    them; the output projections smaller, so that f32 keeps the logits to 2e-6 of f64's; the
    latents before q_a_layernorm and kv_a_layernorm small), norms around 1, the experts' bias
    small and positive."""
    made = dict(config)
    scaling = made["rope_scaling"]
    if scaling is not None:  # DeepSeek's own form: "type", no attention_factor
        made["rope_scaling"] = {key: value for key, value in scaling.items()
                                if key not in ("rope_type", "attention_factor")}
        made["rope_scaling"]["type"] = "yarn"
    for key in ("head_dim", "qk_head_dim"):  # DeepseekV3Config derives them
        made.pop(key, None)
    made.update({"rope_interleave": rope_interleave, "initializer_range": 0.02,
                 "use_cache": True, "transformers_version": "4.56.0", "bos_token_id": 0,
                 "eos_token_id": 1, "torch_dtype": "float32", "pretraining_tp": 1,
                 "scoring_func": "sigmoid", "topk_method": "noaux_tc", "moe_layer_freq": 1,
                 "ep_size": 1, "num_nextn_predict_layers": 0})
    generator = torch.Generator().manual_seed(seed)
    tensors = {}
    for name, shape in expected_shapes(config).items():
        if name.endswith("norm.weight"):
            tensors[name] = 1 + 0.1 * torch.randn(shape, generator=generator)
            continue
        if name.endswith("e_score_correction_bias"):
            tensors[name] = 0.05 * torch.rand(shape, generator=generator)
            continue
        scale = 1.0 if "embed_tokens" in name else shape[-1] ** -0.5
        if "q_proj" in name or "q_b_proj" in name or "kv_a_proj" in name:
            scale *= 2
        if "o_proj" in name or "down_proj" in name:  # the residual stream grows slowly
            scale *= 0.5
        if name.endswith("mlp.gate.weight"):  # logits of a few units: sigmoids far apart
            scale *= 5
        tensors[name] = scale * torch.randn(shape, generator=generator)
        # Latents of a mean square near rms_norm_eps: the latent norms' own epsilon shows.
        if "q_a_proj" in name:
            tensors[name] *= 0.01
        if "kv_a_proj" in name:
            tensors[name][:config["kv_lora_rank"]] *= 0.01
    return made, tensors


def check_config(config):
    """The keys DeepseekV3Config reads, as titan writes them."""
    assert config["architectures"] == ["DeepseekV3ForCausalLM"], config["architectures"]
    assert config["model_type"] == "deepseek_v3"
    assert config["hidden_act"] == "silu" and config["attention_bias"] is False
    assert config["rope_interleave"] is True, "titan writes its rotated pairs interleaved"
    assert config["num_key_value_heads"] == config["num_attention_heads"]
    assert config["head_dim"] == config["qk_rope_head_dim"], "DeepseekV3Config's head_dim"
    for key in ("q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim",
                "v_head_dim", "n_routed_experts", "n_shared_experts", "num_experts_per_tok",
                "moe_intermediate_size", "first_k_dense_replace", "n_group", "topk_group",
                "routed_scaling_factor", "norm_topk_prob", "rope_theta", "rms_norm_eps",
                "max_position_embeddings", "intermediate_size", "vocab_size"):
        assert key in config, key
    scaling = config["rope_scaling"]
    if scaling is not None:
        assert scaling["rope_type"] == "yarn"
        assert config["max_position_embeddings"] == \
            scaling["factor"] * scaling["original_max_position_embeddings"]
        assert rotary_inv_freq(config)[1] == 1.0, "cos and sin unscaled"



if __name__ == "__main__":
    main(Family(check_config, expected_shapes, forward,
                lambda config, case, seed: hf_made(config, bool(case["hf_made_rope_interleave"]),
                                                   seed),
                MIN_ROUTING_GAP, "two groups' or experts' routing scores"), __doc__)
