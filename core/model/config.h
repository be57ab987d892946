// Llama 3 shapes: the published flavors and the derived sizes (feed-forward width, parameter
// count) that both the model and the tests rely on.
#ifndef TITAN_CORE_MODEL_CONFIG_H_
#define TITAN_CORE_MODEL_CONFIG_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "core/tensor/rope.h"
#include "titan/status.h"

namespace titan {

struct LlamaConfig {
  int64_t dim = 256;
  int64_t n_layers = 6;
  int64_t n_heads = 16;
  int64_t n_kv_heads = 16;
  int64_t vocab_size = 2048;
  int64_t multiple_of = 256;
  double ffn_dim_multiplier = 0;  // 0: not set
  double norm_eps = 1e-5;
  bool tie_embeddings = false;
  RopeConfig rope;

  int64_t head_dim() const { return dim / n_heads; }
  // int(8 * dim / 3), times ffn_dim_multiplier when set, rounded up to multiple_of.
  int64_t hidden_dim() const;
  int64_t ParameterCount() const;
  // Checks the shape is one the kernels can run: heads divide dim, kv heads divide heads, ...
  absl::Status Validate() const;
};

// The model's shape as the checkpoint metadata keys titan/checkpoint.h lists ("model.dim", ...),
// numbers written so that they read back exactly.
std::map<std::string, std::string> CheckpointMetadataOf(const LlamaConfig& config,
                                                        int64_t max_seq_len);

// Whether `config`'s heads, kv heads, feed-forward features and (when `vocab_known`) vocabulary
// divide among `degree` tensor-parallel ranks; an error names the model's numbers.
absl::Status CheckTensorParallelDegree(const LlamaConfig& config, int degree,
                                       bool vocab_known = true);

// debugmodel, debugmodel_gqa (4 kv heads for 16 heads), debugmodel_tied (tied embeddings), 1B,
// 3B, 8B, 70B, 405B (the last five with Llama 3's vocabulary of 128,256).
absl::StatusOr<LlamaConfig> LlamaFlavor(absl::string_view flavor);

// Matches `config` (of model.flavor `flavor`) to the model a checkpoint's metadata describes
// (CheckpointMetadataOf's keys; absent ones are not checked). A model of another shape (dim,
// n_layers, n_heads, n_kv_heads, hidden_dim, vocab_size, or separate output weights for a tied
// flavor) is an error naming `source` and both values. norm_eps and the RoPE settings are taken
// from the metadata; returns each that changed as "rope_theta = 10000 (the flavor's: 500000)".
absl::StatusOr<std::vector<std::string>> AdoptCheckpointModel(
    const std::map<std::string, std::string>& metadata, absl::string_view source,
    absl::string_view flavor, LlamaConfig& config);

}  // namespace titan

#endif  // TITAN_CORE_MODEL_CONFIG_H_
