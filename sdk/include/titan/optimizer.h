// `optimizer` plugins update parameters from gradients. Parameters, gradients and optimizer
// state each live in one contiguous f32 buffer, so a step is one pass over memory.
#ifndef TITAN_OPTIMIZER_H_
#define TITAN_OPTIMIZER_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "titan/plugin.h"
#include "titan/tensor_view.h"

namespace titan {

// A run of parameters that share a weight-decay setting, as offsets into the flat buffers.
struct ParamSegment {
  int64_t offset = 0;
  int64_t count = 0;
  bool weight_decay = true;
};

struct OptimizerStep {
  TensorView params;  // f32, flat
  TensorView grads;   // f32, flat, same length as params
  TensorView state;   // f32, flat, StateNames().size() * params.numel(); zero before step 1
  std::span<const ParamSegment> segments;
  double lr = 0.0;
  int64_t step = 1;  // 1 on the first update, as torch.optim counts
};

class OptimizerPlugin : public Plugin {
 public:
  // One name per state slot, each as long as the parameters ("exp_avg", "exp_avg_sq").
  virtual std::vector<std::string> StateNames() const = 0;
  virtual absl::Status Step(const OptimizerStep& step) = 0;
};

template <>
struct PluginKind<OptimizerPlugin> {
  static constexpr const char* kName = "optimizer";
};

}  // namespace titan

#endif  // TITAN_OPTIMIZER_H_
