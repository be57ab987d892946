// Adam (Kingma & Ba) with L2 weight decay added to the gradient, as torch.optim.Adam.
#include "../adam_update.h"

TITAN_PLUGIN(titan::OptimizerPlugin, titan::optimizer::AdamFamily<false>, "adam", "1.0.0",
             "Adam with L2 weight decay in the gradient (torch.optim.Adam)")
