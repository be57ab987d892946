// A Hugging Face Llama, Qwen3, Qwen3-MoE or DeepSeek-V3 folder opened for reading: config.json and
// model.safetensors, or the files model.safetensors.index.json maps the tensors to. Opening checks
// everything the loader relies on, so a corrupt or foreign folder fails there with an error naming
// the file.
#ifndef TITAN_PLUGINS_CHECKPOINT_SAFETENSORS_HF_FOLDER_H_
#define TITAN_PLUGINS_CHECKPOINT_SAFETENSORS_HF_FOLDER_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "plugins/checkpoint/safetensors/hf_config.h"
#include "plugins/checkpoint/safetensors/safetensors_file.h"
#include "titan/checkpoint.h"
#include "titan/status.h"

namespace titan::safetensors {

constexpr char kConfigFile[] = "config.json";
constexpr char kModelFile[] = "model.safetensors";
constexpr char kIndexFile[] = "model.safetensors.index.json";
// The __metadata__ key under which an export says what it left out (the experts' bias).
constexpr char kNotExportedKey[] = "titan.not_exported";

class HfFolder {
 public:
  static absl::StatusOr<std::unique_ptr<HfFolder>> Open(const std::string& folder);

  const ModelShape& shape() const { return shape_; }
  // The tensors under titan's names ("model/layers.0.attention.wq.weight"; each layer's experts
  // stacked, and their bias, which an import sets to zero), and the metadata of config.json plus
  // what titan keeps in the file's __metadata__ (such as train.step).
  CheckpointContents Contents() const;
  // Fills the piece's rectangle of its tensor: rows of wq/wk and elements of q_norm/k_norm back
  // in titan's order, the experts' weights from each expert's tensor, the experts' bias with
  // zeros, values converted to the piece's dtype. Errors name the tensor and the folder.
  absl::Status Fill(const CheckpointPiece& piece) const;

 private:
  struct Stored {
    const MappedFile* file = nullptr;
    uint64_t data_start = 0;
    TensorEntry entry;
  };

  explicit HfFolder(std::string folder) : folder_(std::move(folder)) {}
  absl::Status AddFile(const std::string& name);
  absl::Status CheckAgainstConfig(const std::string& source) const;
  absl::Status ReadIndex(const std::string& path);
  // The titan shape of a tensor the folder holds: a stack's is [experts, ...one expert's].
  static std::vector<int64_t> FullShape(const std::string& name,
                                        const std::map<int64_t, Stored>& parts);

  std::string folder_;
  std::string config_path_;
  ModelShape shape_;
  std::vector<std::unique_ptr<MappedFile>> files_;
  // By titan name, without "model/": one stored tensor under -1, or a stack's one per expert.
  std::map<std::string, std::map<int64_t, Stored>> tensors_;
  std::map<std::string, std::string> file_metadata_;
};

}  // namespace titan::safetensors

#endif  // TITAN_PLUGINS_CHECKPOINT_SAFETENSORS_HF_FOLDER_H_
