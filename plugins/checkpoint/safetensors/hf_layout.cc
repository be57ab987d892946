#include "plugins/checkpoint/safetensors/hf_layout.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace titan::safetensors {
namespace {

// Per-layer parameters: titan's name after "layers.N.", Hugging Face's after "model.layers.N.".
constexpr struct {
  const char* titan;
  const char* hf;
} kLayerNames[] = {
    {"attention.wq.weight", "self_attn.q_proj.weight"},
    {"attention.wk.weight", "self_attn.k_proj.weight"},
    {"attention.wv.weight", "self_attn.v_proj.weight"},
    {"attention.wo.weight", "self_attn.o_proj.weight"},
    {"feed_forward.w1.weight", "mlp.gate_proj.weight"},
    {"feed_forward.w2.weight", "mlp.down_proj.weight"},
    {"feed_forward.w3.weight", "mlp.up_proj.weight"},
    {"attention_norm.weight", "input_layernorm.weight"},
    {"ffn_norm.weight", "post_attention_layernorm.weight"},
};

constexpr struct {
  const char* titan;
  const char* hf;
} kModelNames[] = {
    {"tok_embeddings.weight", "model.embed_tokens.weight"},
    {"norm.weight", "model.norm.weight"},
    {"output.weight", "lm_head.weight"},
};

// Splits "<prefix><layer>.<rest>" into layer and rest.
bool SplitLayer(absl::string_view name, absl::string_view prefix, std::string& layer,
                absl::string_view& rest) {
  if (!absl::ConsumePrefix(&name, prefix)) return false;
  const size_t dot = name.find('.');
  int64_t index;
  if (dot == absl::string_view::npos || !absl::SimpleAtoi(name.substr(0, dot), &index) ||
      index < 0 || absl::StrCat(index) != name.substr(0, dot)) {
    return false;
  }
  layer = std::string(name.substr(0, dot));
  rest = name.substr(dot + 1);
  return true;
}

absl::StatusOr<std::string> Translate(absl::string_view name, bool to_hf) {
  for (const auto& m : kModelNames) {
    if (name == (to_hf ? m.titan : m.hf)) return std::string(to_hf ? m.hf : m.titan);
  }
  std::string layer;
  absl::string_view rest;
  if (SplitLayer(name, to_hf ? "layers." : "model.layers.", layer, rest)) {
    for (const auto& m : kLayerNames) {
      if (rest == (to_hf ? m.titan : m.hf)) {
        return to_hf ? absl::StrCat("model.layers.", layer, ".", m.hf)
                     : absl::StrCat("layers.", layer, ".", m.titan);
      }
    }
  }
  return absl::InvalidArgumentError(absl::StrCat("'", name, "' is not a Llama parameter in ",
                                                 to_hf ? "titan's" : "Hugging Face's", " naming"));
}

}  // namespace

absl::StatusOr<std::string> HfName(absl::string_view titan_name) {
  return Translate(titan_name, true);
}

absl::StatusOr<std::string> TitanName(absl::string_view hf_name) {
  return Translate(hf_name, false);
}

bool HasRotaryRows(absl::string_view titan_name) {
  return absl::EndsWith(titan_name, ".attention.wq.weight") ||
         absl::EndsWith(titan_name, ".attention.wk.weight");
}

int64_t HfRow(int64_t titan_row, int64_t head_dim) {
  const int64_t head = titan_row / head_dim, within = titan_row % head_dim;
  return head * head_dim + (within % 2) * (head_dim / 2) + within / 2;
}

int64_t TitanRow(int64_t hf_row, int64_t head_dim) {
  const int64_t half = head_dim / 2;
  const int64_t head = hf_row / head_dim, within = hf_row % head_dim;
  return head * head_dim + 2 * (within % half) + within / half;
}

}  // namespace titan::safetensors
