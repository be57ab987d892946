#include "plugins/checkpoint/safetensors/hf_layout.h"

#include <limits>
#include <span>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace titan::safetensors {
namespace {

struct NamePair {
  const char* titan;
  const char* hf;
};

// Per-layer parameters: titan's name after "layers.N.", Hugging Face's after "model.layers.N.".
constexpr NamePair kLayerNames[] = {
    {"attention.wq.weight", "self_attn.q_proj.weight"},
    {"attention.wk.weight", "self_attn.k_proj.weight"},
    {"attention.wv.weight", "self_attn.v_proj.weight"},
    {"attention.wo.weight", "self_attn.o_proj.weight"},
    {"feed_forward.w1.weight", "mlp.gate_proj.weight"},
    {"feed_forward.w2.weight", "mlp.down_proj.weight"},
    {"feed_forward.w3.weight", "mlp.up_proj.weight"},
    {"attention_norm.weight", "input_layernorm.weight"},
    {"ffn_norm.weight", "post_attention_layernorm.weight"},
    // Qwen3
    {"attention.q_norm.weight", "self_attn.q_norm.weight"},
    {"attention.k_norm.weight", "self_attn.k_norm.weight"},
    {"moe.router.gate.weight", "mlp.gate.weight"},
};

// Qwen3-MoE's experts: titan's stack after "layers.N.", each expert's after
// "model.layers.N.mlp.experts.E.".
constexpr NamePair kExpertNames[] = {
    {"moe.experts.w1", "gate_proj.weight"},
    {"moe.experts.w2", "down_proj.weight"},
    {"moe.experts.w3", "up_proj.weight"},
};

constexpr char kExpertBias[] = "moe.expert_bias";

// DeepSeek-V3's per-layer parameters (transformers' modeling_deepseek_v3.py): latent attention,
// the dense layers' feed-forward, the router with its bias and the shared experts.
constexpr NamePair kDeepseekLayerNames[] = {
    {"attention.wq.weight", "self_attn.q_proj.weight"},
    {"attention.wq_a.weight", "self_attn.q_a_proj.weight"},
    {"attention.q_norm.weight", "self_attn.q_a_layernorm.weight"},
    {"attention.wq_b.weight", "self_attn.q_b_proj.weight"},
    {"attention.wkv_a.weight", "self_attn.kv_a_proj_with_mqa.weight"},
    {"attention.kv_norm.weight", "self_attn.kv_a_layernorm.weight"},
    {"attention.wkv_b.weight", "self_attn.kv_b_proj.weight"},
    {"attention.wo.weight", "self_attn.o_proj.weight"},
    {"feed_forward.w1.weight", "mlp.gate_proj.weight"},
    {"feed_forward.w2.weight", "mlp.down_proj.weight"},
    {"feed_forward.w3.weight", "mlp.up_proj.weight"},
    {"attention_norm.weight", "input_layernorm.weight"},
    {"ffn_norm.weight", "post_attention_layernorm.weight"},
    {"moe.router.gate.weight", "mlp.gate.weight"},
    {kExpertBias, "mlp.gate.e_score_correction_bias"},
    {"moe.shared_experts.w1.weight", "mlp.shared_experts.gate_proj.weight"},
    {"moe.shared_experts.w2.weight", "mlp.shared_experts.down_proj.weight"},
    {"moe.shared_experts.w3.weight", "mlp.shared_experts.up_proj.weight"},
};

std::span<const NamePair> LayerNames(HfFamily family) {
  if (family == HfFamily::kDeepseekV3) return kDeepseekLayerNames;
  return kLayerNames;
}

constexpr NamePair kModelNames[] = {
    {"tok_embeddings.weight", "model.embed_tokens.weight"},
    {"norm.weight", "model.norm.weight"},
    {"output.weight", "lm_head.weight"},
};

// Reads "<index>." off the front of `name`: a non-negative integer written without leading zeros.
bool ConsumeIndex(absl::string_view& name, std::string& index) {
  const size_t dot = name.find('.');
  int64_t value;
  if (dot == absl::string_view::npos || !absl::SimpleAtoi(name.substr(0, dot), &value) ||
      value < 0 || absl::StrCat(value) != name.substr(0, dot)) {
    return false;
  }
  index = std::string(name.substr(0, dot));
  name.remove_prefix(dot + 1);
  return true;
}

// Splits "<prefix><layer>.<rest>" into layer and rest.
bool SplitLayer(absl::string_view name, absl::string_view prefix, std::string& layer,
                absl::string_view& rest) {
  if (!absl::ConsumePrefix(&name, prefix) || !ConsumeIndex(name, layer)) return false;
  rest = name;
  return true;
}

absl::Status NotAParameter(HfFamily family, absl::string_view name, bool titan_naming) {
  return absl::InvalidArgumentError(absl::StrCat(
      "'", name, "' is not a ", family == HfFamily::kDeepseekV3 ? "DeepSeek-V3" : "Llama",
      " parameter in ", titan_naming ? "titan's" : "Hugging Face's", " naming",
      family == HfFamily::kDeepseekV3 ? "" : ", nor a Qwen3 one"));
}

}  // namespace

absl::StatusOr<std::string> HfName(HfFamily family, absl::string_view titan_name, int64_t expert) {
  const bool stacked = IsStackedExperts(titan_name);
  if (stacked != (expert >= 0)) {
    return absl::InvalidArgumentError(
        stacked ? absl::StrCat("'", titan_name, "' stacks every expert's weight: Hugging Face ",
                               "names each expert's apart, so name the expert")
                : absl::StrCat("'", titan_name, "' is not a stack of experts' weights, found ",
                               "expert ", expert));
  }
  if (HasNoHfCounterpart(family, titan_name)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", titan_name, "' (the experts' load-balancing bias) has no Hugging Face counterpart"));
  }
  for (const NamePair& m : kModelNames) {
    if (titan_name == m.titan) return std::string(m.hf);
  }
  std::string layer;
  absl::string_view rest;
  if (SplitLayer(titan_name, "layers.", layer, rest)) {
    for (const NamePair& m : LayerNames(family)) {
      if (rest == m.titan) return absl::StrCat("model.layers.", layer, ".", m.hf);
    }
    for (const NamePair& m : kExpertNames) {
      if (rest == m.titan) {
        return absl::StrCat("model.layers.", layer, ".mlp.experts.", expert, ".", m.hf);
      }
    }
  }
  return NotAParameter(family, titan_name, true);
}

absl::StatusOr<TitanPlace> TitanPlaceOf(HfFamily family, absl::string_view hf_name) {
  for (const NamePair& m : kModelNames) {
    if (hf_name == m.hf) return TitanPlace{m.titan, -1};
  }
  std::string layer, expert;
  absl::string_view rest;
  if (SplitLayer(hf_name, "model.layers.", layer, rest)) {
    for (const NamePair& m : LayerNames(family)) {
      if (rest == m.hf) return TitanPlace{absl::StrCat("layers.", layer, ".", m.titan), -1};
    }
    if (absl::ConsumePrefix(&rest, "mlp.experts.") && ConsumeIndex(rest, expert)) {
      for (const NamePair& m : kExpertNames) {
        if (rest == m.hf) {
          int64_t index = 0;
          (void)absl::SimpleAtoi(expert, &index);  // ConsumeIndex checked it
          return TitanPlace{absl::StrCat("layers.", layer, ".", m.titan), index};
        }
      }
    }
  }
  return NotAParameter(family, hf_name, false);
}

absl::StatusOr<std::string> TitanName(HfFamily family, absl::string_view hf_name) {
  TITAN_ASSIGN_OR_RETURN(TitanPlace place, TitanPlaceOf(family, hf_name));
  return std::move(place.name);
}

bool IsPredictionLayer(const ModelShape& shape, absl::string_view hf_name) {
  std::string layer;
  absl::string_view rest;
  int64_t index = 0;
  return shape.prediction_layers > 0 && SplitLayer(hf_name, "model.layers.", layer, rest) &&
         absl::SimpleAtoi(layer, &index) && index >= shape.n_layers &&
         index < shape.n_layers + shape.prediction_layers;
}

bool IsStackedExperts(absl::string_view titan_name) {
  std::string layer;
  absl::string_view rest;
  if (!SplitLayer(titan_name, "layers.", layer, rest)) return false;
  for (const NamePair& m : kExpertNames) {
    if (rest == m.titan) return true;
  }
  return false;
}

bool HasNoHfCounterpart(HfFamily family, absl::string_view titan_name) {
  std::string layer;
  absl::string_view rest;
  return family != HfFamily::kDeepseekV3 && SplitLayer(titan_name, "layers.", layer, rest) &&
         rest == kExpertBias;
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

RowLayout RowLayout::Of(const ModelShape& shape, absl::string_view titan_name) {
  RowLayout layout;
  auto is = [&](absl::string_view parameter) {
    return absl::EndsWith(titan_name, absl::StrCat(".attention.", parameter, ".weight"));
  };
  if (!shape.latent_attention()) {
    if (is("wq") || is("wk")) layout.block_ = layout.rotary_ = shape.head_dim();
    if (shape.qk_norm() && (is("q_norm") || is("k_norm"))) {
      layout.block_ = layout.rotary_ = shape.head_dim();
      layout.elements_ = true;
    }
    return layout;
  }
  const int64_t rope = shape.qk_rope_head_dim, kv_latent = shape.kv_lora_rank;
  if (!shape.rope_interleaved && (is("wq") || is("wq_b"))) {
    layout.block_ = shape.head_dim(), layout.rotary_ = rope;
  }
  if (!shape.rope_interleaved && is("wkv_a"))
    layout.block_ = kv_latent + rope, layout.rotary_ = rope;
  if (const double scale = shape.latent_scale(); scale != 1.0) {
    layout.scale_ = scale;
    if (is("wq_a")) layout.scaled_rows_ = std::numeric_limits<int64_t>::max();
    if (is("wkv_a")) layout.scaled_rows_ = kv_latent;
  }
  return layout;
}

int64_t RowLayout::ToHf(int64_t titan_row) const {
  if (rotary_ == 0) return titan_row;
  const int64_t start = titan_row - titan_row % block_ + block_ - rotary_;
  return titan_row < start ? titan_row : start + HfRow(titan_row - start, rotary_);
}

int64_t RowLayout::ToTitan(int64_t hf_row) const {
  if (rotary_ == 0) return hf_row;
  const int64_t start = hf_row - hf_row % block_ + block_ - rotary_;
  return hf_row < start ? hf_row : start + TitanRow(hf_row - start, rotary_);
}

}  // namespace titan::safetensors
