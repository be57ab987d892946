// `optimizer` plugins update parameters from gradients. Parameters, gradients and optimizer
// state each live in one contiguous f32 buffer, so a step is one pass over memory.
#ifndef TITAN_OPTIMIZER_H_
#define TITAN_OPTIMIZER_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "titan/compute.h"
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
  // The kernels of the device the buffers live on: an optimizer computes through them, so it runs
  // wherever they do. Never null.
  Compute* compute = nullptr;
};

class OptimizerPlugin : public Plugin {
 public:
  // One name per state slot, each as long as the parameters ("exp_avg", "exp_avg_sq").
  virtual std::vector<std::string> StateNames() const = 0;
  virtual absl::Status Step(const OptimizerStep& step) = 0;
  // Whether Step works on buffers of this device. An optimizer that computes through
  // step.compute runs on any; one that touches the buffers' bytes itself runs on the CPU only,
  // and the trainer refuses to pair it with another device, naming both.
  virtual bool SupportsDevice(DeviceType type) const { return type == DeviceType::kCpu; }
};

template <>
struct PluginKind<OptimizerPlugin> {
  static constexpr const char* kName = "optimizer";
};

}  // namespace titan

#endif  // TITAN_OPTIMIZER_H_
