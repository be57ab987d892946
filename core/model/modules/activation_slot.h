// How a module tells the model which activations it keeps from its forward for its backward,
// so the model plans their memory (per microbatch, or shared scratch when the block's
// activation-checkpointing policy recomputes them) and points the module's views there.
#ifndef TITAN_CORE_MODEL_MODULES_ACTIVATION_SLOT_H_
#define TITAN_CORE_MODEL_MODULES_ACTIVATION_SLOT_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "core/model/activation_checkpoint.h"
#include "titan/tensor_view.h"

namespace titan {

struct ActivationSlot {
  TensorView* view;  // where the module reads it
  const char* name;  // unique within the block
  std::vector<int64_t> shape;
  DType dtype;
  // The block's forward stage that writes it, kept or recomputed with it; none: outside the
  // blocks, always kept.
  std::optional<BlockStage> stage;
};

// A linear layer's weight gradient as the zero-bubble weight pass needs it: the output
// gradient [n, out] and the input [n, in], the activation `input` (of stage `stage`, in
// `dtype`) the forward stored.
struct ProjectionInput {
  int weight;
  int64_t out, in;
  const char* input;
  BlockStage stage;
  DType dtype;
};

}  // namespace titan

#endif  // TITAN_CORE_MODEL_MODULES_ACTIVATION_SLOT_H_
