// Hugging Face's Llama and Qwen3 layouts next to titan's (TorchTitan's, Meta's): the tensor
// names, and the order of the values within a head. titan rotates interleaved pairs
// (x[2i], x[2i+1]) of each head; Hugging Face's LlamaModel and Qwen3Model rotate halves
// (x[i], x[i + head_dim/2]), so their q_proj and k_proj hold each head's rows reordered, as
// transformers' convert_llama_weights_to_hf.py does:
//   permute(w) = w.view(n_heads, head_dim // 2, 2, dim).transpose(1, 2).reshape(-1, dim)
// and Qwen3's q_norm and k_norm, whose weights scale each element of a head, hold their
// [head_dim] elements in the same order.
//
// Qwen3-MoE keeps one tensor per expert (mlp.experts.E.gate_proj.weight, ...) where titan stacks
// them ([experts, rows, cols]), and titan's experts' load-balancing bias (a buffer) has no place
// in Hugging Face's layout.
#ifndef TITAN_PLUGINS_CHECKPOINT_SAFETENSORS_HF_LAYOUT_H_
#define TITAN_PLUGINS_CHECKPOINT_SAFETENSORS_HF_LAYOUT_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "titan/status.h"

namespace titan::safetensors {

// "layers.0.attention.wq.weight" -> "model.layers.0.self_attn.q_proj.weight", and back. A stacked
// expert weight ("layers.0.moe.experts.w1") takes the expert: "model.layers.0.mlp.experts.3.
// gate_proj.weight". Names of neither layout, and the bias, are errors naming them.
absl::StatusOr<std::string> HfName(absl::string_view titan_name, int64_t expert = -1);
absl::StatusOr<std::string> TitanName(absl::string_view hf_name);

// A Hugging Face tensor's place in titan: the titan tensor and, for one expert's weight, which
// expert of the stack it is (-1: the whole tensor).
struct TitanPlace {
  std::string name;
  int64_t expert = -1;
};
absl::StatusOr<TitanPlace> TitanPlaceOf(absl::string_view hf_name);

// Whether a titan tensor is the stack of every expert's weight (moe.experts.w1, w2, w3).
bool IsStackedExperts(absl::string_view titan_name);
// Whether a titan tensor has no Hugging Face counterpart (the experts' bias, moe.expert_bias):
// an export leaves it out, an import sets it to zero.
bool HasNoHfCounterpart(absl::string_view titan_name);

// Whether a titan parameter's rows take the rotary permutation (wq and wk do).
bool HasRotaryRows(absl::string_view titan_name);
// Whether a titan parameter's [head_dim] elements take it (Qwen3's q_norm and k_norm do).
bool HasRotaryElements(absl::string_view titan_name);

// Row `titan_row` of titan's wq/wk sits at this row of Hugging Face's q_proj/k_proj, and back.
// Within head h, titan's row 2i + c (pair i, component c) is Hugging Face's row c * head_dim/2 + i.
// The same maps the elements of q_norm/k_norm (one head).
int64_t HfRow(int64_t titan_row, int64_t head_dim);
int64_t TitanRow(int64_t hf_row, int64_t head_dim);

}  // namespace titan::safetensors

#endif  // TITAN_PLUGINS_CHECKPOINT_SAFETENSORS_HF_LAYOUT_H_
