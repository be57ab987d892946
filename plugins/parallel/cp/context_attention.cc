#include "plugins/parallel/cp/context_attention.h"

namespace titan::cp {

absl::StatusOr<float> ContextAttention::AverageLoss(float local_loss) {
  TITAN_RETURN_IF_ERROR(group_.AllReduce(FlatF32(&local_loss, 1), ReduceOp::kAvg));
  return local_loss;
}

absl::Status ContextAttention::Reserve(const AttentionSpec& spec,
                                       const std::vector<std::pair<float**, int64_t>>& slots) {
  const AttentionSpec& r = reserved_for_;
  if (workspace_.size() > 0 && r.batch == spec.batch && r.seq_len == spec.seq_len &&
      r.heads == spec.heads && r.kv_heads == spec.kv_heads && r.head_dim == spec.head_dim) {
    return absl::OkStatus();
  }
  // Each slot starts on a 64-byte boundary, as in the model's arenas.
  auto padded = [](int64_t floats) { return (floats + 15) / 16 * 16; };
  int64_t total = 0;
  for (const auto& [slot, floats] : slots) total += padded(floats);
  workspace_ = DeviceBuffer();  // the old one goes first
  TITAN_ASSIGN_OR_RETURN(workspace_, DeviceBuffer::Allocate(device_, total));
  int64_t offset = 0;
  for (const auto& [slot, floats] : slots) {
    *slot = workspace_.f32() + offset;
    offset += padded(floats);
  }
  reserved_for_ = spec;
  return absl::OkStatus();
}

}  // namespace titan::cp
