#!/usr/bin/python3
"""Hugging Face's Llama, as transformers' LlamaForCausalLM computes it, written out in torch,
for folders titan's safetensors plugin exports. Neither transformers nor the safetensors
package is needed: the file format is parsed here with json and numpy.

Usage: /usr/bin/python3 hf_llama_reference.py CASE_DIR [CASE_DIR ...]

Each CASE_DIR holds what the C++ test wrote:
  export/          config.json + model.safetensors, as the plugin saved them
  case.txt         "key value" lines: batch, seq_len, and optionally
                   f32_export DIR (export/ is then a bf16 copy of that f32 export)
  tokens.bin       int32 [batch * seq_len]
  titan_logits.bin f32 [batch * seq_len, vocab]: titan's DecoderModel::Forward
and receives hf_logits.bin (f32, same shape), built from config.json and model.safetensors
alone. It fails when the logits differ from titan's by more than 1e-5 (relative norm).

When CASE_DIR also holds params.txt/params.bin (titan's parameters, as llama_reference.py
reads them), it writes hf_written/: the same model the way transformers'
convert_llama_weights_to_hf.py lays out Meta's weights (its permute() on wq/wk), split over
two files with a model.safetensors.index.json, for titan to import.
"""
import json
import math
import os
import shutil
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F

TOLERANCE = 1e-5


def read_safetensors(path):
    """The tensors and __metadata__ of one file, checking the format as it goes."""
    with open(path, "rb") as f:
        data = f.read()
    (header_size,) = struct.unpack("<Q", data[:8])
    assert (8 + header_size) % 8 == 0, "the data section starts 8-byte aligned"
    header = json.loads(data[8:8 + header_size].decode("utf-8"))
    metadata = header.pop("__metadata__", {})
    assert list(header) == sorted(header), "titan writes the tensors sorted by name"
    body = data[8 + header_size:]
    end = 0
    tensors = {}
    for name, info in header.items():
        begin, stop = info["data_offsets"]
        assert begin == end, f"{name}: the data is laid out in name order, without gaps"
        end = stop
        raw = np.frombuffer(body[begin:stop], dtype={"F32": "<f4", "BF16": "<i2",
                                                     "F16": "<f2"}[info["dtype"]]).copy()
        tensor = torch.from_numpy(raw)
        if info["dtype"] == "BF16":
            tensor = tensor.view(torch.bfloat16)
        tensors[name] = tensor.reshape(info["shape"])
    assert end == len(body), "the tensors fill the data section"
    return tensors, metadata


def write_safetensors(path, tensors, metadata):
    """Writes in the order given (not sorted), as another writer may."""
    header, offset, blobs = {"__metadata__": metadata}, 0, []
    for name, tensor in tensors.items():
        blob = tensor.contiguous().numpy().astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(tensor.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        offset += len(blob)
        blobs.append(blob)
    text = json.dumps(header).encode("utf-8")
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def write_in_two_files(out, tensors):
    """f32 `tensors` into folder `out` as transformers saves a model in shards: in reverse order
    within each file, layer 0 with the embeddings in the second of two, and an index."""
    files = {"model-00001-of-00002.safetensors": {}, "model-00002-of-00002.safetensors": {}}
    for name in reversed(list(tensors)):
        second = ".layers.0." in name or "embed" in name
        files["model-0000%d-of-00002.safetensors" % (2 if second else 1)][name] = tensors[name]
    weight_map = {}
    for file, part in files.items():
        write_safetensors(os.path.join(out, file), part, {"format": "pt"})
        weight_map.update({name: file for name in part})
    total = 4 * sum(t.numel() for t in tensors.values())
    with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)


def rope_inv_freq(config, head_dim):
    """transformers' _compute_default_rope_parameters, then _compute_llama3_parameters."""
    base = config["rope_theta"]
    exponents = torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim
    inv_freq = 1.0 / (base ** exponents)
    scaling = config.get("rope_scaling")
    if not scaling or scaling.get("rope_type", scaling.get("type")) != "llama3":
        return inv_freq
    factor = scaling["factor"]
    low_freq_factor = scaling["low_freq_factor"]
    high_freq_factor = scaling["high_freq_factor"]
    old_context_len = scaling["original_max_position_embeddings"]
    low_freq_wavelen = old_context_len / low_freq_factor
    high_freq_wavelen = old_context_len / high_freq_factor
    wavelen = 2 * math.pi / inv_freq
    inv_freq_llama = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    smooth_factor = (old_context_len / wavelen - low_freq_factor) / (
        high_freq_factor - low_freq_factor)
    smoothed_inv_freq = ((1 - smooth_factor) * inv_freq_llama / factor
                         + smooth_factor * inv_freq_llama)
    is_medium_freq = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
    return torch.where(is_medium_freq, smoothed_inv_freq, inv_freq_llama)


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def rms_norm(x, weight, eps):
    """LlamaRMSNorm."""
    variance = x.float().pow(2).mean(-1, keepdim=True)
    return weight * (x * torch.rsqrt(variance + eps))


def forward(config, w, tokens):
    """LlamaForCausalLM's logits for int64 tokens [batch, seq_len], in f32."""
    b, t = tokens.shape
    heads, kv_heads = config["num_attention_heads"], config["num_key_value_heads"]
    head_dim = config.get("head_dim") or config["hidden_size"] // heads
    eps = config["rms_norm_eps"]
    # LlamaRotaryEmbedding
    inv_freq = rope_inv_freq(config, head_dim)
    positions = torch.arange(t)[None, :].float()
    freqs = (inv_freq[None, :, None].float() @ positions[:, None, :]).transpose(1, 2)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos()[:, None], emb.sin()[:, None]  # [1, 1, t, head_dim]
    mask = torch.full((t, t), float("-inf")).triu(1)

    h = w["model.embed_tokens.weight"][tokens]
    for layer in range(config["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        x = rms_norm(h, w[p + "input_layernorm.weight"], eps)
        q = F.linear(x, w[p + "self_attn.q_proj.weight"]).view(b, t, heads, head_dim)
        k = F.linear(x, w[p + "self_attn.k_proj.weight"]).view(b, t, kv_heads, head_dim)
        v = F.linear(x, w[p + "self_attn.v_proj.weight"]).view(b, t, kv_heads, head_dim)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        repeats = heads // kv_heads  # repeat_kv
        k = k[:, :, None].expand(b, kv_heads, repeats, t, head_dim).reshape(b, heads, t, head_dim)
        v = v[:, :, None].expand(b, kv_heads, repeats, t, head_dim).reshape(b, heads, t, head_dim)
        scores = q @ k.transpose(2, 3) * head_dim ** -0.5 + mask
        attention = F.softmax(scores, dim=-1, dtype=torch.float32) @ v
        attention = attention.transpose(1, 2).reshape(b, t, -1)
        h = h + F.linear(attention, w[p + "self_attn.o_proj.weight"])
        x = rms_norm(h, w[p + "post_attention_layernorm.weight"], eps)
        gate = F.silu(F.linear(x, w[p + "mlp.gate_proj.weight"]))
        gate = gate * F.linear(x, w[p + "mlp.up_proj.weight"])
        h = h + F.linear(gate, w[p + "mlp.down_proj.weight"])
    h = rms_norm(h, w["model.norm.weight"], eps)
    tied = config["tie_word_embeddings"]
    lm_head = w["model.embed_tokens.weight"] if tied else w["lm_head.weight"]
    return F.linear(h, lm_head).view(b * t, -1)


def read_case(case):
    values = {}
    with open(os.path.join(case, "case.txt")) as f:
        for line in f:
            key, value = line.split()
            values[key] = int(value) if value.isdigit() else value
    return values


def relative_error(actual, expected):
    return (torch.linalg.norm(actual.double() - expected.double()) /
            torch.linalg.norm(expected.double())).item()


def check_bf16(bf16, f32_export):
    """Every bf16 tensor is torch's rounding of the f32 export's (round to nearest even)."""
    f32, _ = read_safetensors(os.path.join(f32_export, "model.safetensors"))
    assert sorted(f32) == sorted(bf16), "the same tensors"
    for name, tensor in bf16.items():
        assert tensor.dtype == torch.bfloat16, name
        expected = f32[name].to(torch.bfloat16)
        assert torch.equal(tensor.view(torch.int16), expected.view(torch.int16)), name


def permute(w, n_heads, dim1, dim2):
    """transformers' convert_llama_weights_to_hf.py."""
    return w.view(n_heads, dim1 // n_heads // 2, 2, dim2).transpose(1, 2).reshape(dim1, dim2)


def write_hf(case):
    """Titan's parameters converted the way transformers converts Meta's checkpoints."""
    names = {"attention.wq": "self_attn.q_proj", "attention.wk": "self_attn.k_proj",
             "attention.wv": "self_attn.v_proj", "attention.wo": "self_attn.o_proj",
             "feed_forward.w1": "mlp.gate_proj", "feed_forward.w2": "mlp.down_proj",
             "feed_forward.w3": "mlp.up_proj", "attention_norm": "input_layernorm",
             "ffn_norm": "post_attention_layernorm"}
    config = json.load(open(os.path.join(case, "export", "config.json")))
    heads, kv_heads = config["num_attention_heads"], config["num_key_value_heads"]
    flat = np.fromfile(os.path.join(case, "params.bin"), dtype=np.float32)
    tensors, offset = {}, 0
    for line in open(os.path.join(case, "params.txt")):
        name, *shape = line.split()
        shape = [int(d) for d in shape]
        count = int(np.prod(shape))
        w = torch.from_numpy(flat[offset:offset + count].copy()).reshape(shape)
        offset += count
        if name == "tok_embeddings.weight":
            hf = "model.embed_tokens.weight"
        elif name == "norm.weight":
            hf = "model.norm.weight"
        elif name == "output.weight":
            hf = "lm_head.weight"
        else:
            _, layer, rest = name.split(".", 2)
            module = rest[: -len(".weight")]
            hf = f"model.layers.{layer}.{names[module]}.weight"
            if module in ("attention.wq", "attention.wk"):
                w = permute(w, heads if module == "attention.wq" else kv_heads, *w.shape)
        tensors[hf] = w
    out = os.path.join(case, "hf_written")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    shutil.copy(os.path.join(case, "export", "config.json"), out)
    write_in_two_files(out, tensors)


def run_case(case):
    c = read_case(case)
    export = os.path.join(case, "export")
    config = json.load(open(os.path.join(export, "config.json")))
    assert config["architectures"] == ["LlamaForCausalLM"] and config["model_type"] == "llama"
    weights, metadata = read_safetensors(os.path.join(export, "model.safetensors"))
    assert metadata.get("format") == "pt", "transformers loads only format 'pt'"
    if "f32_export" in c:
        check_bf16(weights, c["f32_export"])
    weights = {name: w.float() for name, w in weights.items()}
    tokens = torch.from_numpy(np.fromfile(os.path.join(case, "tokens.bin"), dtype=np.int32)
                              .astype(np.int64)).view(c["batch"], c["seq_len"])
    with torch.no_grad():
        logits = forward(config, weights, tokens)
    logits.numpy().astype(np.float32).tofile(os.path.join(case, "hf_logits.bin"))
    titan = torch.from_numpy(np.fromfile(os.path.join(case, "titan_logits.bin"), dtype=np.float32))
    error = relative_error(titan.view_as(logits), logits)
    print(f"{os.path.basename(case)}: logits relative error {error:.3g}")
    if os.path.exists(os.path.join(case, "params.bin")):
        write_hf(case)
    return error <= TOLERANCE


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    results = [run_case(case) for case in sys.argv[1:]]
    sys.exit(0 if all(results) else 1)


if __name__ == "__main__":
    main()
