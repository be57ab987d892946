#include "attention_route.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace titan::cuda {

absl::StatusOr<AttentionMode> ParseAttentionMode(const std::string& value) {
  for (AttentionMode mode : {AttentionMode::kAuto, AttentionMode::kCudnn, AttentionMode::kTiled}) {
    if (value == AttentionModeName(mode)) return mode;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("\"", value,
                   "\" is no attention of the cuda device; expected \"auto\", "
                   "\"cudnn\" or \"tiled\""));
}

const char* AttentionModeName(AttentionMode mode) {
  switch (mode) {
    case AttentionMode::kAuto:
      return "auto";
    case AttentionMode::kCudnn:
      return "cudnn";
    case AttentionMode::kTiled:
      return "tiled";
  }
  return "?";
}

AttentionRoute ChooseAttention(const AttentionCase& c) {
  const auto tiled = [](std::string reason) { return AttentionRoute{false, std::move(reason)}; };
  if (c.mode == AttentionMode::kTiled) return tiled("job.attention = \"tiled\"");
  if (c.mode == AttentionMode::kAuto && !c.bf16_run) {
    return tiled(
        "an f32 run (job.attention = \"auto\" takes cuDNN's bf16 attention only where the "
        "matmuls are bf16: training.mixed_precision_param = \"bfloat16\")");
  }
  if (c.capability < 80) {
    return tiled(absl::StrCat("sm_", c.capability, " has no bf16 flash attention (sm_80+)"));
  }
  if (c.seq_len != c.kv_len || c.q_offset != c.kv_offset) {
    return tiled(
        "a chunk of context parallelism (queries and keys of other lengths or offsets), whose "
        "causal mask cuDNN's top-left diagonal does not express");
  }
  if (c.head_dim % 8 != 0 || c.head_dim > kCudnnMaxHeadDim) {
    return tiled(absl::StrCat("head_dim ", c.head_dim, " (cuDNN's takes multiples of 8 up to ",
                              kCudnnMaxHeadDim, ")"));
  }
  if (c.seq_len == 0) return tiled("no queries");
  if (c.backward && c.seq_len % kCudnnBackwardSeqMultiple != 0) {
    return tiled(absl::StrCat("the backward of seq_len ", c.seq_len,
                              " (cuDNN's takes multiples of ", kCudnnBackwardSeqMultiple,
                              " here; before 9.15.1 others need a padding mask titan does not "
                              "build)"));
  }
  if (!c.cudnn_loaded) return tiled("cuDNN did not load");
  return AttentionRoute{true, ""};
}

}  // namespace titan::cuda
