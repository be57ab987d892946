// The token embedding [vocab, d], vocabulary-parallel under tensor parallelism: each rank looks
// up the tokens its rows hold (zeros for the others) and a reduce-scatter both sums the ranks'
// rows and splits the tokens among them.
#ifndef TITAN_CORE_MODEL_MODULES_TOKEN_EMBEDDING_H_
#define TITAN_CORE_MODEL_MODULES_TOKEN_EMBEDDING_H_

#include "core/model/module_node.h"
#include "core/model/modules/module_context.h"

namespace titan {

class TokenEmbedding {
 public:
  TokenEmbedding(ModuleContext& context, int weight) : ctx_(context), weight_(weight) {}

  int weight() const { return weight_; }
  // out [n_local, d]: this rank's tokens of the current microbatch's embedded token ids.
  absl::Status Forward(const TensorView& out);
  // grad(table) += the scatter of d_out [n_local, d] (this rank's tokens; gathered first), or
  // left for the weight pass while one is deferring. `hooks` (when set) run around the
  // gradient's accumulation: the module holding the table.
  absl::Status Backward(const TensorView& d_out, ModuleNode* hooks);
  // The weight pass's part: grad(table) += the scatter of d_embedded [n, d], every token.
  absl::Status WeightGrad(const TensorView& d_embedded);

 private:
  ModuleContext& ctx_;
  int weight_;
};

}  // namespace titan

#endif  // TITAN_CORE_MODEL_MODULES_TOKEN_EMBEDDING_H_
