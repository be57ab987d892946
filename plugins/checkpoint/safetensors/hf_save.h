// Saving a model in Hugging Face's Llama, Qwen3, Qwen3-MoE or DeepSeek-V3 layout (as the metadata's
// is): rank 0 assembles each tensor from the ranks' pieces, one tensor at a time (a layer's
// stacked experts until each expert's tensors are written), and writes model.safetensors and
// config.json under "<folder>.tmp", renamed to `folder` once complete. The experts' bias has no
// Hugging Face counterpart: it is left out, and the file's __metadata__ says so
// (kNotExportedKey).
#ifndef TITAN_PLUGINS_CHECKPOINT_SAFETENSORS_HF_SAVE_H_
#define TITAN_PLUGINS_CHECKPOINT_SAFETENSORS_HF_SAVE_H_

#include <span>
#include <string>

#include "titan/checkpoint.h"
#include "titan/communicator.h"
#include "titan/status.h"

namespace titan::safetensors {

// Collective over `comm`; every rank returns the same outcome.
absl::Status SaveHfFolder(const std::string& folder, std::span<const CheckpointPiece> pieces,
                          const CheckpointMetadata& metadata, Communicator& comm);

}  // namespace titan::safetensors

#endif  // TITAN_PLUGINS_CHECKPOINT_SAFETENSORS_HF_SAVE_H_
