#include "plugins/parallel/cp/context_attention.h"

namespace titan::cp {

absl::StatusOr<float> ContextAttention::AverageLoss(float local_loss) {
  TITAN_RETURN_IF_ERROR(group_.AllReduce(FlatF32(&local_loss, 1), ReduceOp::kAvg));
  return local_loss;
}

absl::Status ContextAttention::Forward(const AttentionSpec& spec, const TensorView& q,
                                       const TensorView& k, const TensorView& v, TensorView out,
                                       TensorView lse) {
  TITAN_RETURN_IF_ERROR(Prepare(spec));
  return RunForward(spec, {q.data_as<const float>(), k.data_as<const float>(),
                           v.data_as<const float>(), out.data_as<float>(), lse.data_as<float>()});
}

absl::Status ContextAttention::Backward(const AttentionSpec& spec, const TensorView& dout,
                                        const TensorView& q, const TensorView& k,
                                        const TensorView& v, const TensorView& out,
                                        const TensorView& lse, TensorView dq, TensorView dk,
                                        TensorView dv) {
  TITAN_RETURN_IF_ERROR(Prepare(spec));
  return RunBackward(
      spec, {dout.data_as<const float>(), q.data_as<const float>(), k.data_as<const float>(),
             v.data_as<const float>(), out.data_as<const float>(), lse.data_as<const float>(),
             dq.data_as<float>(), dk.data_as<float>(), dv.data_as<float>()});
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
