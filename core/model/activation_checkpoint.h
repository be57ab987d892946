// Which activations a block keeps for its backward and which it recomputes, after TorchTitan's
// [activation_checkpoint] modes. Recomputation reruns the same deterministic kernels, so the
// gradients are bit-identical in every mode.
#ifndef TITAN_CORE_MODEL_ACTIVATION_CHECKPOINT_H_
#define TITAN_CORE_MODEL_ACTIVATION_CHECKPOINT_H_

#include <cstdint>

#include "absl/strings/string_view.h"
#include "titan/status.h"

namespace titan {

// The forward of a block in stages; each stage's output is kept or recomputed as a whole.
enum class BlockStage : uint8_t {
  kAttentionNorm,  // ln1, rstd1
  kQkv,            // q, k (rotated), v
  kAttention,      // att, lse
  kAttentionOut,   // x_mid = x + att . wo^T
  kFfnNorm,        // ln2, rstd2
  kGateUp,         // a = ln2 . w1^T, b = ln2 . w3^T
  kSwiGlu,         // h = silu(a) * b
};
inline constexpr int kBlockStages = 7;

enum class BlockPolicy : uint8_t {
  kKeepAll,       // no recomputation
  kKeepMatmuls,   // op-level: keep matmul and attention outputs, recompute norms and SwiGLU
  kRecomputeAll,  // keep only the block's input
};

bool KeepsStage(BlockPolicy policy, BlockStage stage);

struct ActivationCheckpoint {
  enum class Mode : uint8_t { kNone, kSelective, kFull };
  Mode mode = Mode::kNone;
  int every_n = 0;  // selective: every Nth block (layer_id + 1 divisible by N) recomputes all
  bool op = false;  // selective: "op", every block keeps its matmuls only

  BlockPolicy PolicyFor(int64_t layer_id) const;
};

// mode: "none" | "selective" | "full"; option (selective only): a positive integer or "op".
absl::StatusOr<ActivationCheckpoint> ParseActivationCheckpoint(absl::string_view mode,
                                                               absl::string_view option);

}  // namespace titan

#endif  // TITAN_CORE_MODEL_ACTIVATION_CHECKPOINT_H_
