// Hugging Face's Llama layout next to titan's (TorchTitan's, Meta's): the tensor names, and
// the row order of wq and wk. titan rotates interleaved pairs (x[2i], x[2i+1]) of each head;
// Hugging Face's LlamaModel rotates halves (x[i], x[i + head_dim/2]), so its q_proj and k_proj
// hold each head's rows reordered, as transformers' convert_llama_weights_to_hf.py does:
//   permute(w) = w.view(n_heads, head_dim // 2, 2, dim).transpose(1, 2).reshape(-1, dim)
#ifndef TITAN_PLUGINS_CHECKPOINT_SAFETENSORS_HF_LAYOUT_H_
#define TITAN_PLUGINS_CHECKPOINT_SAFETENSORS_HF_LAYOUT_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "titan/status.h"

namespace titan::safetensors {

// "layers.0.attention.wq.weight" -> "model.layers.0.self_attn.q_proj.weight", and back. Names
// that are not Llama parameters are errors naming them.
absl::StatusOr<std::string> HfName(absl::string_view titan_name);
absl::StatusOr<std::string> TitanName(absl::string_view hf_name);

// Whether a titan parameter's rows take the rotary permutation (wq and wk do).
bool HasRotaryRows(absl::string_view titan_name);

// Row `titan_row` of titan's wq/wk sits at this row of Hugging Face's q_proj/k_proj, and back.
// Within head h, titan's row 2i + c (pair i, component c) is Hugging Face's row c * head_dim/2 + i.
int64_t HfRow(int64_t titan_row, int64_t head_dim);
int64_t TitanRow(int64_t hf_row, int64_t head_dim);

}  // namespace titan::safetensors

#endif  // TITAN_PLUGINS_CHECKPOINT_SAFETENSORS_HF_LAYOUT_H_
