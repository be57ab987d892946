// A Hugging Face Llama folder opened for reading: config.json and model.safetensors, or the
// files model.safetensors.index.json maps the tensors to. Opening checks everything the
// loader relies on, so a corrupt or foreign folder fails there with an error naming the file.
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

class HfFolder {
 public:
  static absl::StatusOr<std::unique_ptr<HfFolder>> Open(const std::string& folder);

  const ModelShape& shape() const { return shape_; }
  // The tensors under titan's names ("model/layers.0.attention.wq.weight"), and the metadata of
  // config.json plus what titan keeps in the file's __metadata__ (such as train.step).
  CheckpointContents Contents() const;
  // Fills the piece's rectangle of its tensor: rows of wq/wk back in titan's order, values
  // converted to the piece's dtype. Errors name the tensor and the folder.
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

  std::string folder_;
  std::string config_path_;
  ModelShape shape_;
  std::vector<std::unique_ptr<MappedFile>> files_;
  std::map<std::string, Stored> tensors_;  // by titan name, without "model/"
  std::map<std::string, std::string> file_metadata_;
};

}  // namespace titan::safetensors

#endif  // TITAN_PLUGINS_CHECKPOINT_SAFETENSORS_HF_FOLDER_H_
