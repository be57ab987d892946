// The single-process training run of a recipe: tokenizer (loaded or learned), packed data with
// a validation split, the model, the step loop (accumulation, clipping, LR schedule, NaN/Inf
// stop), metrics, periodic validation loss and a closing text sample.
#ifndef TITAN_CORE_TRAIN_TRAINER_H_
#define TITAN_CORE_TRAIN_TRAINER_H_

#include "core/runtime/recipe.h"
#include "titan/optimizer.h"

namespace titan {

absl::Status Train(const Recipe& recipe, OptimizerPlugin& optimizer);

// Scales `grads` so their global L2 norm is at most max_norm (0: no clipping), as
// torch.nn.utils.clip_grad_norm_ does; returns the norm before clipping.
double ClipGradNorm(float* grads, int64_t count, double max_norm);

}  // namespace titan

#endif  // TITAN_CORE_TRAIN_TRAINER_H_
