// When and what a training run saves and loads through its checkpoint plugin, after
// TorchTitan's CheckpointManager: every `interval` steps and at the last step (the model alone
// in `export_dtype` there when `last_save_model_only`), into <dump_folder>/<folder>/step-<N>,
// keeping the latest `keep_latest_k`; in the background with `async_mode = "async"`. At start
// it resumes from the latest complete checkpoint (or `load_step`; a newer step folder that is not
// a complete checkpoint is an error naming it), else starts from the model at
// `initial_load_path`, restoring everything not in `exclude_from_loading`.
#ifndef TITAN_CORE_TRAIN_CHECKPOINTER_H_
#define TITAN_CORE_TRAIN_CHECKPOINTER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/data/packed_loader.h"
#include "core/model/llama.h"
#include "core/runtime/plugin_registry.h"
#include "core/runtime/recipe.h"
#include "core/train/train_step.h"
#include "titan/checkpoint.h"
#include "titan/device_mesh.h"

namespace titan {

// What a checkpoint holds and restores, owned by the trainer.
struct TrainState {
  LlamaModel* model = nullptr;
  TrainStep* train_step = nullptr;
  PackedLoader* loader = nullptr;
  PackedLoader* eval_loader = nullptr;  // null without validation
  int64_t seed = 0;
  int64_t max_seq_len = 0;
  int64_t bos_id = -1, eos_id = -1;  // the tokenizer's, for exports' config.json; -1: none
};

// Where a resumed run continues.
struct ResumePoint {
  int64_t step = 0;       // the last step done; 0 for a fresh run
  int64_t lr_offset = 0;  // steps the LR schedule skips (the resumed step when not restored)
};

class Checkpointer {
 public:
  // Null when checkpoint.enable is false. Collective: every rank creates it.
  static absl::StatusOr<std::unique_ptr<Checkpointer>> Create(const Recipe& recipe,
                                                              const PluginRegistry& registry,
                                                              DeviceMesh& mesh);
  ~Checkpointer();

  // Before the model is built, from the checkpoint the run starts from (the one Load reads):
  // a model of another shape than `config` (of model.flavor `flavor`) is refused naming both
  // values; norm_eps and the RoPE settings are taken from the checkpoint when it has them, so an
  // imported model trains as it was trained (logged when they differ from the flavor's).
  absl::Status MatchModel(LlamaConfig& config, absl::string_view flavor);
  absl::StatusOr<ResumePoint> Load(const TrainState& state);
  // After step `step` of `steps`: saves when the interval or the last step says so, or
  // `stopping` (a run stopped early saves a full checkpoint to resume from).
  absl::Status MaybeSave(int64_t step, int64_t steps, const ResumePoint& resume,
                         const TrainState& state, bool stopping = false);
  // Waits for a background save and reports how it went.
  absl::Status Wait();

  // The step-<N> folders of the checkpoint folder: those the plugin reads as complete
  // checkpoints, oldest first, and the others with the plugin's reason.
  struct StepFolders {
    std::vector<int64_t> complete;
    std::map<int64_t, std::string> incomplete;
  };
  StepFolders ScanSteps() const;

 private:
  // What Load reads: a step folder to resume from, or the model to start from.
  struct Source {
    std::string folder;
    CheckpointPlugin* plugin = nullptr;
    bool import = false;  // initial_load_path: the model only, from step 0
  };

  Checkpointer() = default;
  absl::StatusOr<std::optional<Source>> FindSource();
  absl::Status ChooseSource();  // FindSource once, into source_
  absl::Status CheckModelOnlyFormat(const Recipe& recipe) const;
  absl::Status Save(const std::string& folder, std::vector<CheckpointPiece> pieces,
                    CheckpointMetadata metadata);
  void RemoveOld();

  CheckpointPlugin* plugin_ = nullptr;
  const PluginRegistry* registry_ = nullptr;
  std::unique_ptr<CheckpointPlugin> initial_plugin_;  // reads initial_load_path in another format
  std::unique_ptr<Communicator> comm_;  // the checkpoint's own, so a background save never
                                        // interleaves with training's collectives
  std::string root_, format_;
  int64_t interval_ = 0, keep_latest_k_ = 0, load_step_ = -1;
  bool async_ = false, last_model_only_ = true;
  DType export_dtype_ = DType::kF32;
  std::vector<std::string> exclude_;
  std::string initial_load_path_;
  std::optional<std::optional<Source>> source_;  // found once, by MatchModel or Load
  std::thread background_;
  absl::Status background_status_;
};

}  // namespace titan

#endif  // TITAN_CORE_TRAIN_CHECKPOINTER_H_
