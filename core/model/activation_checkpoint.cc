#include "core/model/activation_checkpoint.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace titan {

bool KeepsStage(BlockPolicy policy, BlockStage stage) {
  switch (policy) {
    case BlockPolicy::kKeepAll:
      return true;
    case BlockPolicy::kRecomputeAll:
      return false;
    case BlockPolicy::kKeepMatmuls:
      return stage != BlockStage::kAttentionNorm && stage != BlockStage::kFfnNorm &&
             stage != BlockStage::kSwiGlu;
  }
  return true;
}

BlockPolicy ActivationCheckpoint::PolicyFor(int64_t layer_id) const {
  switch (mode) {
    case Mode::kNone:
      return BlockPolicy::kKeepAll;
    case Mode::kFull:
      return BlockPolicy::kRecomputeAll;
    case Mode::kSelective:
      if (op) return BlockPolicy::kKeepMatmuls;
      return (layer_id + 1) % every_n == 0 ? BlockPolicy::kRecomputeAll : BlockPolicy::kKeepAll;
  }
  return BlockPolicy::kKeepAll;
}

absl::StatusOr<ActivationCheckpoint> ParseActivationCheckpoint(absl::string_view mode,
                                                               absl::string_view option) {
  ActivationCheckpoint ac;
  if (mode == "none") return ac;
  if (mode == "full") {
    ac.mode = ActivationCheckpoint::Mode::kFull;
    return ac;
  }
  if (mode != "selective") {
    return absl::InvalidArgumentError(absl::StrCat(
        "activation_checkpoint.mode: expected none, selective or full, found '", mode, "'"));
  }
  ac.mode = ActivationCheckpoint::Mode::kSelective;
  if (option == "op") {
    ac.op = true;
  } else if (!absl::SimpleAtoi(option, &ac.every_n) || ac.every_n <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "activation_checkpoint.selective_ac_option: expected a positive integer or \"op\", "
        "found '",
        option, "'"));
  }
  return ac;
}

}  // namespace titan
