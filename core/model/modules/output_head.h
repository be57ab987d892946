// The output projection to the vocabulary and the cross-entropy loss. Under tensor parallelism
// the projection is column-parallel over the vocabulary and the loss runs on the shards (loss
// parallel): the ranks share each row's max, sum of exponentials and target logit, never the
// logits themselves.
#ifndef TITAN_CORE_MODEL_MODULES_OUTPUT_HEAD_H_
#define TITAN_CORE_MODEL_MODULES_OUTPUT_HEAD_H_

#include <vector>

#include "core/model/modules/activation_slot.h"
#include "core/model/modules/linear.h"

namespace titan {

struct OutputActs {
  TensorView logits;                  // [n * vocab / tp]; their gradient after the backward
  TensorView lse, max, target, loss;  // [n] per row, [1] the mean
};

class OutputHead {
 public:
  OutputHead(ModuleContext& context, int weight) : ctx_(context), output_(context, weight) {}

  int weight() const { return output_.weight(); }
  void ListActivations(OutputActs& acts, std::vector<ActivationSlot>& slots) const;
  // The mean cross-entropy over this rank's tokens of x [n, d] (the final norm's output, a
  // matmul operand) against the current microbatch's targets.
  absl::StatusOr<float> Forward(const TensorView& x, const OutputActs& acts);
  // dx [n, d] = the loss's gradient with respect to x (zeroed first); the logits are spent.
  absl::Status Backward(const TensorView& x, const OutputActs& acts, const TensorView& dx);

 private:
  ModuleContext& ctx_;
  Linear output_;
};

}  // namespace titan

#endif  // TITAN_CORE_MODEL_MODULES_OUTPUT_HEAD_H_
