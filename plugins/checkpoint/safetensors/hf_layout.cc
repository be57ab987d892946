#include "plugins/checkpoint/safetensors/hf_layout.h"

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

absl::Status NotAParameter(absl::string_view name, bool titan_naming) {
  return absl::InvalidArgumentError(absl::StrCat("'", name, "' is not a Llama parameter in ",
                                                 titan_naming ? "titan's" : "Hugging Face's",
                                                 " naming, nor a Qwen3 one"));
}

}  // namespace

absl::StatusOr<std::string> HfName(absl::string_view titan_name, int64_t expert) {
  const bool stacked = IsStackedExperts(titan_name);
  if (stacked != (expert >= 0)) {
    return absl::InvalidArgumentError(
        stacked ? absl::StrCat("'", titan_name, "' stacks every expert's weight: Hugging Face ",
                               "names each expert's apart, so name the expert")
                : absl::StrCat("'", titan_name, "' is not a stack of experts' weights, found ",
                               "expert ", expert));
  }
  if (HasNoHfCounterpart(titan_name)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", titan_name, "' (the experts' load-balancing bias) has no Hugging Face counterpart"));
  }
  for (const NamePair& m : kModelNames) {
    if (titan_name == m.titan) return std::string(m.hf);
  }
  std::string layer;
  absl::string_view rest;
  if (SplitLayer(titan_name, "layers.", layer, rest)) {
    for (const NamePair& m : kLayerNames) {
      if (rest == m.titan) return absl::StrCat("model.layers.", layer, ".", m.hf);
    }
    for (const NamePair& m : kExpertNames) {
      if (rest == m.titan) {
        return absl::StrCat("model.layers.", layer, ".mlp.experts.", expert, ".", m.hf);
      }
    }
  }
  return NotAParameter(titan_name, true);
}

absl::StatusOr<TitanPlace> TitanPlaceOf(absl::string_view hf_name) {
  for (const NamePair& m : kModelNames) {
    if (hf_name == m.hf) return TitanPlace{m.titan, -1};
  }
  std::string layer, expert;
  absl::string_view rest;
  if (SplitLayer(hf_name, "model.layers.", layer, rest)) {
    for (const NamePair& m : kLayerNames) {
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
  return NotAParameter(hf_name, false);
}

absl::StatusOr<std::string> TitanName(absl::string_view hf_name) {
  TITAN_ASSIGN_OR_RETURN(TitanPlace place, TitanPlaceOf(hf_name));
  return std::move(place.name);
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

bool HasNoHfCounterpart(absl::string_view titan_name) {
  std::string layer;
  absl::string_view rest;
  return SplitLayer(titan_name, "layers.", layer, rest) && rest == kExpertBias;
}

bool HasRotaryRows(absl::string_view titan_name) {
  return absl::EndsWith(titan_name, ".attention.wq.weight") ||
         absl::EndsWith(titan_name, ".attention.wk.weight");
}

bool HasRotaryElements(absl::string_view titan_name) {
  return absl::EndsWith(titan_name, ".attention.q_norm.weight") ||
         absl::EndsWith(titan_name, ".attention.k_norm.weight");
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
