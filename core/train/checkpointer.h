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
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/data/packed_loader.h"
#include "core/model/decoder_model.h"
#include "core/runtime/plugin_registry.h"
#include "core/train/train_step.h"
#include "titan/checkpoint.h"
#include "titan/device_mesh.h"

namespace titan {

// What a checkpoint holds and restores, owned by the trainer.
struct TrainState {
  DecoderModel* model = nullptr;
  TrainStep* train_step = nullptr;
  PackedLoader* loader = nullptr;
  PackedLoader* eval_loader = nullptr;  // null without validation
  int64_t seed = 0;
  int64_t max_seq_len = 0;
  int64_t bos_id = -1, eos_id = -1;  // the tokenizer's, for exports' config.json; -1: none
};

// [checkpoint], read by the job plan.
struct CheckpointSettings {
  CheckpointPlugin* plugin = nullptr;  // checkpoint.format's, owned by the recipe; null: off
  // The other checkpoint plugins, tried on an initial_load_path the format's cannot read.
  const PluginRegistry* registry = nullptr;
  std::string format;  // checkpoint.format, for messages
  std::string root;    // <job.dump_folder>/<checkpoint.folder>
  int64_t interval = 0;
  int64_t keep_latest_k = 0;
  int64_t load_step = -1;
  bool async = false;           // async_mode = "async"
  bool last_model_only = true;  // last_save_model_only
  DType export_dtype = DType::kF32;
  std::vector<std::string> exclude;  // exclude_from_loading
  std::string initial_load_path;
};

// Where a resumed run continues.
struct ResumePoint {
  int64_t step = 0;         // the last step done; 0 for a fresh run
  int64_t lr_offset = 0;    // steps the LR schedule skips (the resumed step when not restored)
  std::string metrics_row;  // the checkpoint's copy of step's metrics.jsonl row; empty: none
  bool optimizer_restored = false;  // the optimizers' state (inner and outer) was loaded
};

// A checkpoint's whole state, sent through `broadcast` (a byte broadcast from one peer to others,
// each piece in turn, in the same order everywhere) instead of a folder: fault tolerance's
// rejoin, where a returning replica group takes the state from a live one. The sender passes
// where it stands (`at`: the last step done); a receiver's state and data loaders become the
// sender's, and it gets the sender's ResumePoint.
using ByteBroadcast = std::function<absl::Status(void* data, size_t bytes)>;
absl::StatusOr<ResumePoint> ShareTrainState(const TrainState& state, bool sender,
                                            const ResumePoint& at, const ByteBroadcast& broadcast);

class Checkpointer {
 public:
  // Null when checkpoint.enable is false (no plugin). Collective: every rank creates it.
  static absl::StatusOr<std::unique_ptr<Checkpointer>> Create(const CheckpointSettings& settings,
                                                              DeviceMesh& mesh);
  ~Checkpointer();

  // Before the model is built, from the checkpoint the run starts from (the one Load reads):
  // a model of another shape than `config` (of model.flavor `flavor`) is refused naming both
  // values; norm_eps and the RoPE settings are taken from the checkpoint when it has them, so an
  // imported model trains as it was trained (logged when they differ from the flavor's).
  absl::Status MatchModel(LlamaConfig& config, absl::string_view flavor);
  // MatchModel before any rank starts (--validate): the same choice of checkpoint and the same
  // refusals, on a copy of `config`. Reads no tensor, only what the checkpoint says it holds.
  static absl::Status CheckStartingModel(const CheckpointSettings& settings, LlamaConfig config,
                                         absl::string_view flavor);
  absl::StatusOr<ResumePoint> Load(const TrainState& state);
  // After step `step` of `steps`: saves when the interval or the last step says so, or
  // `stopping` (a run stopped early saves a full checkpoint to resume from, unless the format
  // holds models only). `metrics_row` is the lead's metrics.jsonl row of the step (empty on the
  // other ranks, or when the step was not logged): the checkpoint keeps it, so that a resumed
  // run whose metrics.jsonl lost it can log it again.
  absl::Status MaybeSave(int64_t step, int64_t steps, const ResumePoint& resume,
                         const TrainState& state, bool stopping = false,
                         const std::string& metrics_row = "");
  // Waits for a background save and reports how it went.
  absl::Status Wait();
  // False for a format that holds models only (safetensors): a run stopped early then saves no
  // checkpoint, only model.arena.
  bool holds_training_state() const { return settings_.plugin->holds_training_state(); }

  // The step-<N> folders of the checkpoint folder: those the plugin reads as complete
  // checkpoints, oldest first, and the others with the plugin's reason.
  struct StepFolders {
    std::vector<int64_t> complete;
    std::map<int64_t, std::string> incomplete;
    std::vector<std::string> not_folders;  // step-<N> names that are files, ignored
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
  absl::Status Save(const std::string& folder, std::vector<CheckpointPiece> pieces,
                    CheckpointMetadata metadata);
  void RemoveOld();

  CheckpointSettings settings_;
  std::unique_ptr<CheckpointPlugin> initial_plugin_;  // reads initial_load_path in another format
  std::unique_ptr<Communicator> comm_;           // the checkpoint's own, so a background save never
                                                 // interleaves with training's collectives
  std::optional<std::optional<Source>> source_;  // found once, by MatchModel or Load
  int64_t source_max_seq_len_ = 0;  // the source's model.max_seq_len, kept in what is saved
  std::thread background_;
  absl::Status background_status_;
};

}  // namespace titan

#endif  // TITAN_CORE_TRAIN_CHECKPOINTER_H_
