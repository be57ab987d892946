// Argument checks every optimizer plugin runs before touching its buffers.
#ifndef TITAN_PLUGINS_OPTIMIZER_CHECK_STEP_H_
#define TITAN_PLUGINS_OPTIMIZER_CHECK_STEP_H_

#include "absl/strings/str_cat.h"
#include "titan/optimizer.h"

namespace titan::optimizer {

// `state_slots` state values per parameter; segments inside the buffers; steps from 1.
inline absl::Status CheckStep(const OptimizerStep& step, int state_slots) {
  int64_t n = step.params.numel();
  if (step.grads.numel() != n || step.state.numel() != state_slots * n) {
    return absl::InvalidArgumentError(absl::StrCat(
        "optimizer step: ", n, " parameters need ", n, " gradients and ", state_slots * n,
        " state values, got ", step.grads.numel(), " and ", step.state.numel()));
  }
  if (step.step < 1) return absl::InvalidArgumentError("optimizer step numbers start at 1");
  if (step.compute == nullptr) {
    return absl::InvalidArgumentError("optimizer step: no compute for the buffers' device");
  }
  for (const ParamSegment& segment : step.segments) {
    if (segment.offset < 0 || segment.count < 0 || segment.offset + segment.count > n) {
      return absl::InvalidArgumentError(absl::StrCat("optimizer segment [", segment.offset, ", ",
                                                     segment.offset + segment.count,
                                                     ") lies outside the ", n, " parameters"));
    }
  }
  return absl::OkStatus();
}

// `count` elements of a flat buffer from `offset` on, on the buffer's device.
inline TensorView Slice(const TensorView& flat, int64_t offset, int64_t count) {
  TensorView slice = flat;
  slice.data = static_cast<char*>(flat.data) + offset * static_cast<int64_t>(DTypeSize(flat.dtype));
  slice.shape = {count};
  slice.strides.clear();
  return slice;
}

}  // namespace titan::optimizer

#endif  // TITAN_PLUGINS_OPTIMIZER_CHECK_STEP_H_
