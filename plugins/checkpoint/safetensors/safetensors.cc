// checkpoint/safetensors: the model in Hugging Face's Llama, Qwen3, Qwen3-MoE or DeepSeek-V3
// layout (model.safetensors and config.json), for export to and import from the Hugging Face
// ecosystem. It holds the model only; training state belongs in a dcp checkpoint.
#include "plugins/checkpoint/safetensors/collective.h"
#include "plugins/checkpoint/safetensors/hf_folder.h"
#include "plugins/checkpoint/safetensors/hf_save.h"
#include "titan/checkpoint.h"

namespace titan::safetensors {

class SafetensorsCheckpoint : public CheckpointPlugin {
 public:
  absl::Status Save(const std::string& folder, std::span<const CheckpointPiece> pieces,
                    const CheckpointMetadata& metadata, Communicator& comm) override {
    return SaveHfFolder(folder, pieces, metadata, comm);
  }

  // Every rank reads the ranges it needs from the shared folder itself; the ranks then agree,
  // so none carries on alone after another failed.
  absl::Status Load(const std::string& folder, std::span<CheckpointPiece> pieces,
                    Communicator& comm) override {
    absl::Status loaded = [&]() -> absl::Status {
      TITAN_ASSIGN_OR_RETURN(std::unique_ptr<HfFolder> opened, HfFolder::Open(folder));
      for (const CheckpointPiece& piece : pieces) TITAN_RETURN_IF_ERROR(opened->Fill(piece));
      return absl::OkStatus();
    }();
    return AgreeOnStatus(loaded, comm);
  }

  absl::StatusOr<CheckpointContents> Read(const std::string& folder) override {
    TITAN_ASSIGN_OR_RETURN(std::unique_ptr<HfFolder> opened, HfFolder::Open(folder));
    return opened->Contents();
  }

  // A Hugging Face folder holds a model and nothing of its training.
  bool holds_training_state() const override { return false; }
};

}  // namespace titan::safetensors

TITAN_PLUGIN(titan::CheckpointPlugin, titan::safetensors::SafetensorsCheckpoint, "safetensors",
             "1.2.0",
             "the model in Hugging Face's Llama, Qwen3 or DeepSeek-V3 layout: model.safetensors + "
             "config.json")
