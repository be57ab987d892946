// AdamW (Loshchilov & Hutter): Adam with weight decay applied to the weights, as
// torch.optim.AdamW.
#include "../adam_update.h"

TITAN_PLUGIN(titan::OptimizerPlugin, titan::optimizer::AdamFamily<true>, "adamw", "1.0.0",
             "AdamW: Adam with decoupled weight decay (torch.optim.AdamW)")
