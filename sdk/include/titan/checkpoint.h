// `checkpoint` plugins write and read checkpoint folders. Every rank passes the pieces it
// holds; the plugin records where each piece sits in its logical tensor, so a checkpoint
// saved on one mesh loads into another.
//
// Logical tensor names: "model/<parameter>" (TorchTitan's names, e.g.
// "model/layers.0.attention.wq.weight"), "optimizer/<slot>/<parameter>" (e.g.
// "optimizer/exp_avg/norm.weight"), and the training state under "train/" (step, data loader,
// LR scheduler). Metadata carries what a format may need besides tensors, such as the model's
// shape: "model.dim", "model.n_layers", "model.n_heads", "model.n_kv_heads",
// "model.vocab_size", "model.hidden_dim", "model.norm_eps", "model.rope_theta",
// "model.rope_scaled" ("true"/"false"), "model.rope_scale_factor", "model.rope_low_freq_factor",
// "model.rope_high_freq_factor", "model.rope_original_context", "model.max_seq_len",
// "model.tie_embeddings", "model.head_dim", "model.qk_norm", "model.experts",
// "model.experts_per_token", "model.expert_hidden_dim", "model.shared_experts",
// "model.dense_layers", "model.bos_token_id", "model.eos_token_id" (the tokenizer's, when
// known; all as text), and "train.step".
#ifndef TITAN_CHECKPOINT_H_
#define TITAN_CHECKPOINT_H_

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "titan/communicator.h"
#include "titan/plugin.h"
#include "titan/tensor_view.h"

namespace titan {

struct CheckpointPiece {
  std::string name;                 // logical tensor, e.g. "model/layers.0.attention.wq.weight"
  std::vector<int64_t> full_shape;  // the logical tensor's shape
  std::vector<int64_t> offset;      // where this piece starts in it, per dimension
  TensorView data;                  // the piece itself (its shape is the piece's extent)
};

using CheckpointMetadata = std::map<std::string, std::string>;

struct CheckpointTensor {
  std::string name;
  std::vector<int64_t> full_shape;
  DType dtype = DType::kF32;  // as stored
};

// What a checkpoint folder holds.
struct CheckpointContents {
  std::vector<CheckpointTensor> tensors;
  CheckpointMetadata metadata;
};

class CheckpointPlugin : public Plugin {
 public:
  // Collective over `comm`: returns once the folder is complete on disk. Pieces several ranks
  // hold alike (replicas) are written once. A piece's dtype is the dtype stored.
  virtual absl::Status Save(const std::string& folder, std::span<const CheckpointPiece> pieces,
                            const CheckpointMetadata& metadata, Communicator& comm) = 0;
  // Collective over `comm`: fills each piece from whichever saved pieces overlap it, converting
  // between f32 and bf16 where they differ. A piece the folder lacks, or one it does not cover
  // wholly, is an error naming the tensor and the folder.
  virtual absl::Status Load(const std::string& folder, std::span<CheckpointPiece> pieces,
                            Communicator& comm) = 0;
  // Reads what `folder` holds without loading the tensors (for listing, and for checks before
  // Load); a folder that is not a checkpoint of this format is an error naming it.
  virtual absl::StatusOr<CheckpointContents> Read(const std::string& folder) = 0;
  // Whether Save keeps the training state (optimizer/, train/) besides the model: false for a
  // format that holds models only (safetensors), which the core then uses for model-only saves.
  virtual bool holds_training_state() const { return true; }
};

template <>
struct PluginKind<CheckpointPlugin> {
  static constexpr const char* kName = "checkpoint";
};

}  // namespace titan

#endif  // TITAN_CHECKPOINT_H_
