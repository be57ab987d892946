// Hugging Face's Llama, Qwen3 and DeepSeek-V3 layouts next to titan's (TorchTitan's, Meta's): the
// tensor names, and the order of the values within a head. titan rotates interleaved pairs
// (x[2i], x[2i+1]) of each head; Hugging Face's LlamaModel and Qwen3Model rotate halves
// (x[i], x[i + head_dim/2]), so their q_proj and k_proj hold each head's rows reordered, as
// transformers' convert_llama_weights_to_hf.py does:
//   permute(w) = w.view(n_heads, head_dim // 2, 2, dim).transpose(1, 2).reshape(-1, dim)
// and Qwen3's q_norm and k_norm, whose weights scale each element of a head, hold their
// [head_dim] elements in the same order.
//
// Qwen3-MoE and DeepSeek-V3 keep one tensor per expert (mlp.experts.E.gate_proj.weight, ...) where
// titan stacks them ([experts, rows, cols]); titan's experts' load-balancing bias (a buffer) has
// no place in Qwen3-MoE's layout, and is DeepSeek-V3's mlp.gate.e_score_correction_bias.
//
// DeepSeek-V3's latent attention rotates the last qk_rope_head_dim features of each query head
// (q_b_proj, or q_proj) and of kv_a_proj_with_mqa. transformers' rope_interleave true (what titan
// writes, DeepSeek's own weights, TorchTitan's convert_from_hf) rotates interleaved pairs as titan
// does: no permutation. rope_interleave false rotates halves: those rows are permuted as a Llama
// head's of qk_rope_head_dim. Its latent norms' epsilon is fixed (kHfLatentNormEps): the rows
// before them are scaled (ModelShape::latent_scale).
#ifndef TITAN_PLUGINS_CHECKPOINT_SAFETENSORS_HF_LAYOUT_H_
#define TITAN_PLUGINS_CHECKPOINT_SAFETENSORS_HF_LAYOUT_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "plugins/checkpoint/safetensors/hf_config.h"
#include "titan/status.h"

namespace titan::safetensors {

// "layers.0.attention.wq.weight" -> "model.layers.0.self_attn.q_proj.weight", and back, in the
// family's naming. A stacked expert weight ("layers.0.moe.experts.w1") takes the expert:
// "model.layers.0.mlp.experts.3.gate_proj.weight". Names of neither layout, and Qwen3-MoE's bias,
// are errors naming them.
absl::StatusOr<std::string> HfName(HfFamily family, absl::string_view titan_name,
                                   int64_t expert = -1);
absl::StatusOr<std::string> TitanName(HfFamily family, absl::string_view hf_name);

// A Hugging Face tensor's place in titan: the titan tensor and, for one expert's weight, which
// expert of the stack it is (-1: the whole tensor).
struct TitanPlace {
  std::string name;
  int64_t expert = -1;
};
absl::StatusOr<TitanPlace> TitanPlaceOf(HfFamily family, absl::string_view hf_name);

// Whether a Hugging Face tensor belongs to a DeepSeek-V3 multi-token prediction layer
// (ModelShape::prediction_layers), which transformers and titan leave out.
bool IsPredictionLayer(const ModelShape& shape, absl::string_view hf_name);

// Whether a titan tensor is the stack of every expert's weight (moe.experts.w1, w2, w3).
bool IsStackedExperts(absl::string_view titan_name);
// Whether a titan tensor has no Hugging Face counterpart (Qwen3-MoE's experts' bias,
// moe.expert_bias): an export leaves it out, an import sets it to zero.
bool HasNoHfCounterpart(HfFamily family, absl::string_view titan_name);

// Row `titan_row` of titan's wq/wk sits at this row of Hugging Face's q_proj/k_proj, and back.
// Within head h, titan's row 2i + c (pair i, component c) is Hugging Face's row c * head_dim/2 + i.
// The same maps the elements of q_norm/k_norm (one head).
int64_t HfRow(int64_t titan_row, int64_t head_dim);
int64_t TitanRow(int64_t hf_row, int64_t head_dim);

// How one titan tensor's values sit in Hugging Face's: rows (Qwen3's q_norm and k_norm: elements)
// in blocks whose last `rotary` rows are permuted as a head's (HfRow), and the first rows scaled.
class RowLayout {
 public:
  static RowLayout Of(const ModelShape& shape, absl::string_view titan_name);

  // Titan's row (element) `titan_row` is Hugging Face's ToHf(titan_row), and back.
  int64_t ToHf(int64_t titan_row) const;
  int64_t ToTitan(int64_t hf_row) const;
  bool permutes() const { return rotary_ > 0; }
  // The permutation is of a 1-D tensor's elements, not of rows.
  bool permutes_elements() const { return elements_; }
  // Hugging Face's values of titan's row are titan's times Scale(row).
  double Scale(int64_t titan_row) const { return titan_row < scaled_rows_ ? scale_ : 1.0; }
  bool scales() const { return scaled_rows_ > 0; }

 private:
  int64_t block_ = 0, rotary_ = 0, scaled_rows_ = 0;
  double scale_ = 1.0;
  bool elements_ = false;
};

}  // namespace titan::safetensors

#endif  // TITAN_PLUGINS_CHECKPOINT_SAFETENSORS_HF_LAYOUT_H_
