// The single-process training run of a recipe: tokenizer (loaded or learned), packed data with
// a validation split, the model, the step loop (accumulation, clipping, LR schedule, NaN/Inf
// stop), metrics, periodic validation loss and a closing text sample.
#ifndef TITAN_CORE_TRAIN_TRAINER_H_
#define TITAN_CORE_TRAIN_TRAINER_H_

#include "core/runtime/recipe.h"
#include "titan/optimizer.h"

namespace titan {

absl::Status Train(const Recipe& recipe, OptimizerPlugin& optimizer);

}  // namespace titan

#endif  // TITAN_CORE_TRAIN_TRAINER_H_
