// TorchTitan's learning-rate schedule: linear warmup, a stable phase, then a decay (linear,
// sqrt, cosine or none) over the last decay_ratio of the steps down to min_lr_factor.
#ifndef TITAN_CORE_TRAIN_LR_SCHEDULE_H_
#define TITAN_CORE_TRAIN_LR_SCHEDULE_H_

#include <cstdint>
#include <string>

namespace titan {

class LrSchedule {
 public:
  LrSchedule(int64_t steps, int64_t warmup_steps, double decay_ratio, std::string decay_type,
             double min_lr_factor);
  // The multiplier of the peak lr for optimizer step `step` (1 on the first update).
  double Factor(int64_t step) const;

 private:
  int64_t warmup_, stable_, decay_;
  std::string type_;
  double min_factor_;
};

}  // namespace titan

#endif  // TITAN_CORE_TRAIN_LR_SCHEDULE_H_
