// A mixture-of-experts feed-forward (TorchTitan's MoE): a router scores every expert for each
// token in f32 and picks its top k; the tokens are grouped by expert (dropless: every choice is
// kept, in a deterministic order), each expert's SwiGLU runs on its group as one GEMM per expert
// weight, and each token's outputs come back weighted in f32; shared experts, when the model has
// them, see every token. An optional bias on the scores (moved between steps from the experts'
// loads, DecoderModel::BalanceExperts) steers the choice without an auxiliary loss. Under expert
// parallelism (ModuleContext::ep) each rank holds a run of the experts: the grouped rows travel
// to their experts' rank and the outputs back by all-to-all, the counts exchanged first.
#ifndef TITAN_CORE_MODEL_MODULES_MOE_FEED_FORWARD_H_
#define TITAN_CORE_MODEL_MODULES_MOE_FEED_FORWARD_H_

#include <memory>
#include <vector>

#include "core/model/modules/feed_forward.h"

namespace titan {

// The parameters of a mixture of experts, as indices into the context's parameters: the router
// [experts, d], its bias [experts] (-1: none), the experts' w1 and w3 [experts, hidden, d] and w2
// [experts, d, hidden], and the shared experts' w1, w2, w3 (-1: none).
struct MoeWeights {
  int router, bias = -1, w1, w2, w3;
  int shared_w1 = -1, shared_w2 = -1, shared_w3 = -1;
};

class MoeFeedForward : public FeedForwardLayer {
 public:
  MoeFeedForward(ModuleContext& context, const MoeWeights& w);

  void ListActivations(FeedForwardActs& acts, std::vector<ActivationSlot>& slots) const override;
  // The shared experts' linear layers; the router and the routed experts are not split by the
  // zero-bubble schedules (their backward refuses to defer).
  void ListProjections(const char* normed, BlockStage norm_stage,
                       std::vector<ProjectionInput>& projections) const override;
  std::vector<int> weights() const override;
  // w1, w2 and w3.
  std::vector<int> expert_weights() const override { return {w_.w1, w_.w2, w_.w3}; }

  // The routing, the grouping and the experts' gate and up projections.
  absl::Status GateUp(const TensorView& x, const FeedForwardActs& acts) override;
  // silu(a) * b and the experts' down projections.
  absl::Status SwiGlu(const FeedForwardActs& acts) override;
  // The weighted sum of each token's experts' outputs, and the shared experts'.
  absl::Status AddOutput(const FeedForwardActs& acts, const TensorView& out) override;
  // Also counts the tokens each expert received (load()).
  absl::Status Backward(const TensorView& d_out, const TensorView& x, const FeedForwardActs& acts,
                        const TensorView& dx) override;

  int bias() const { return w_.bias; }
  // Tokens each expert received in the microbatches trained (backward) since the last ResetLoad.
  const std::vector<int64_t>& load() const { return load_; }
  void ResetLoad() { load_.assign(load_.size(), 0); }
  // The sequence-wise auxiliary loss (MoeConfig::aux_loss_alpha) summed over the microbatches
  // trained since the last ResetAuxLoss, each the mean over its sequences.
  double aux_loss() const { return aux_loss_; }
  void ResetAuxLoss() { aux_loss_ = 0; }

 private:
  // A run of rows that one of this rank's experts computes.
  struct Block {
    int64_t expert;  // among this rank's
    int64_t rows;
  };
  // Assignments per expert (all of them), read back from the device.
  absl::StatusOr<std::vector<int32_t>> Counts(const RoutedActs& acts) const;
  // The runs of rows this rank's experts compute, in order: one per expert of its own
  // assignments, or under expert parallelism one per (source rank, expert).
  absl::StatusOr<std::vector<Block>> Blocks(const RoutedActs& acts) const;
  // Expert parallelism: the elements of each row this rank sends to each ep rank (its grouped
  // assignments to that rank's experts), and receives from each.
  struct Routes {
    std::vector<int64_t> sent, received;
  };
  absl::StatusOr<Routes> RoutesOf(const RoutedActs& acts) const;
  // Sends each ep rank its rows of `mine` [m, d] and receives theirs into `theirs` [M, d]
  // (`back`: the outputs' way, from `theirs` into `mine`).
  absl::Status Travel(const RoutedActs& acts, const TensorView& mine, const TensorView& theirs,
                      bool back) const;
  // For each block of the rows of `in` [rows, in_cols]: out rows (+)= in rows . op(w[e])
  // (`transpose_w`: w[e]^T), w the operand [local experts, rows, cols] of parameter `weight`: one
  // GroupedGemm; in Float8 when the converter converts it (each block with its expert's weight,
  // as a linear layer of its own: the forward's GEMM, or with w untransposed the input
  // gradient's).
  absl::Status GroupedGemm(const std::vector<Block>& blocks, const TensorView& in, int weight,
                           const TensorView& w, bool transpose_w, float beta,
                           const TensorView& out) const;
  // grad(w[e]) += g rows^T . in rows for each block; g [rows, out] and `in` [rows, in] matmul
  // operands. One GroupedGemm per round of blocks (an expert's r-th block in round r); in
  // Float8, all of an expert's blocks form one group.
  absl::Status GroupedWeightGrad(const std::vector<Block>& blocks, const TensorView& g,
                                 const TensorView& in, int weight) const;
  MoeRouting Routing() const;
  // MoeConfig::force_balance's choice and weights, on the host (a debugging aid).
  absl::Status RouteRoundRobin(const RoutedActs& acts) const;
  // The sequence-wise auxiliary loss of this microbatch, added to aux_loss_, and its gradient
  // added to d_logits [n, experts]; on the host.
  absl::Status AddAuxLoss(const RoutedActs& acts, const TensorView& d_logits);

  ModuleContext& ctx_;
  MoeWeights w_;
  Linear router_;
  std::unique_ptr<FeedForward> shared_;
  std::vector<int64_t> load_;
  double aux_loss_ = 0;
};

}  // namespace titan

#endif  // TITAN_CORE_MODEL_MODULES_MOE_FEED_FORWARD_H_
