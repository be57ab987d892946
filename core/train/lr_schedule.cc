#include "core/train/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace titan {

LrSchedule::LrSchedule(int64_t steps, int64_t warmup_steps, double decay_ratio,
                       std::string decay_type, double min_lr_factor)
    : warmup_(std::min(warmup_steps, steps)),
      type_(std::move(decay_type)),
      min_factor_(min_lr_factor) {
  decay_ = std::min(static_cast<int64_t>(std::llround(steps * decay_ratio)), steps - warmup_);
  stable_ = steps - warmup_ - decay_;
}

double LrSchedule::Factor(int64_t step) const {
  const int64_t s = step - 1;  // TorchTitan's LambdaLR counts from 0
  if (s < warmup_) return static_cast<double>(s + 1) / static_cast<double>(warmup_);
  if (s < warmup_ + stable_ || decay_ == 0) return 1.0;
  const double progress =
      std::min(1.0, static_cast<double>(s + 1 - warmup_ - stable_) / static_cast<double>(decay_));
  double factor = 1.0;
  if (type_ == "linear") factor = 1.0 - progress;
  if (type_ == "sqrt") factor = 1.0 - std::sqrt(progress);
  if (type_ == "cosine") factor = 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
  return min_factor_ + (1.0 - min_factor_) * factor;
}

}  // namespace titan
