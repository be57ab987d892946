#include "core/train/checkpointer.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/tensor/dtype.h"
#include "core/train/checkpoint_pieces.h"
#include "core/train/checkpoint_staging.h"

namespace titan {
namespace {

namespace fs = std::filesystem;

constexpr char kModelOnly[] = "titan.model_only";
constexpr char kMetricsRow[] = "titan.metrics_row";

// Rank 0's `text` on every rank of `comm`, so that every rank hands its plugin the same metadata.
absl::StatusOr<std::string> BroadcastText(Communicator& comm, const std::string& text) {
  int64_t size = comm.rank() == 0 ? static_cast<int64_t>(text.size()) : 0;
  TITAN_RETURN_IF_ERROR(comm.Broadcast(TensorView{&size, DType::kI64, Device{}, {1}, {}}, 0));
  std::vector<int32_t> words(static_cast<size_t>((size + 3) / 4));
  if (comm.rank() == 0) std::memcpy(words.data(), text.data(), text.size());
  if (!words.empty()) {
    TITAN_RETURN_IF_ERROR(comm.Broadcast(
        TensorView{words.data(), DType::kI32, Device{}, {static_cast<int64_t>(words.size())}, {}},
        0));
  }
  return std::string(reinterpret_cast<const char*>(words.data()), static_cast<size_t>(size));
}

// The state's pieces and the small integer tensors they point at.
struct StatePieces {
  std::vector<int64_t> step{0}, lr_steps{0}, seed{0}, loader{0, 0, 0}, eval_loader{0, 0, 0};
  std::vector<CheckpointPiece> pieces;
  std::vector<std::vector<char>> owned;  // copies the pieces point at, when they must outlive
                                         // the live state (background saves, exports)
};

bool Excluded(const std::vector<std::string>& exclude, absl::string_view what) {
  return std::find(exclude.begin(), exclude.end(), what) != exclude.end();
}

std::vector<int64_t> LoaderVector(const LoaderState& s) { return {s.shard, s.offset, s.epoch}; }
LoaderState LoaderFrom(const std::vector<int64_t>& v) { return {v[0], v[1], v[2]}; }

// Pieces of everything a checkpoint holds, less `exclude` (TorchTitan's names: model,
// optimizer, lr_scheduler, dataloader, rng). A model-only save holds the model alone, so that
// formats that keep only models (safetensors) can write it.
// Model and optimizer pieces live on the model's device; the train/ ones on the host.
void Collect(const TrainState& state, bool model_only, const std::vector<std::string>& exclude,
             StatePieces& out) {
  const Device device = state.model->compute().device();
  for (const Parameter& p : state.model->Parameters()) {
    if (Excluded(exclude, "model")) break;
    for (CheckpointPiece& piece : ParameterPieces(p, "model/")) {
      piece.data.device = device;
      out.pieces.push_back(piece);
    }
  }
  if (model_only) return;  // the step is in the metadata (train.step)
  out.pieces.push_back(Int64Piece("train/step", out.step));
  const TrainStep& step = *state.train_step;
  // The optimizer's state, and DiLoCo's outer optimizer's, each slot laid out as the parameters.
  const std::pair<const char*, const Arena*> optimizers[] = {
      {"optimizer/", &step.optimizer_state()}, {"outer_optimizer/", &step.outer_state()}};
  for (const auto& [prefix, slots] : optimizers) {
    for (int k = 0; k < slots->size() && !Excluded(exclude, "optimizer"); ++k) {
      for (const Parameter& p : state.model->Parameters()) {
        for (CheckpointPiece& piece :
             ParameterPieces(p, absl::StrCat(prefix, slots->name(k), "/"), step.flat_params(),
                             slots->at(k).data<float>())) {
          piece.data.device = device;
          out.pieces.push_back(piece);
        }
      }
    }
  }
  if (!Excluded(exclude, "lr_scheduler"))
    out.pieces.push_back(Int64Piece("train/lr_scheduler", out.lr_steps));
  if (!Excluded(exclude, "rng")) out.pieces.push_back(Int64Piece("train/seed", out.seed));
  if (!Excluded(exclude, "dataloader")) {
    out.pieces.push_back(Int64Piece("train/loader", out.loader));
    if (state.eval_loader != nullptr) {
      out.pieces.push_back(Int64Piece("train/eval_loader", out.eval_loader));
    }
  }
}

// Everything a save at `step` holds, the live state's position with it.
void CollectAt(const TrainState& state, int64_t step, int64_t lr_offset, bool model_only,
               StatePieces& out) {
  out.step[0] = step;
  out.lr_steps[0] = step - lr_offset;
  out.seed[0] = state.seed;
  out.loader = LoaderVector(state.loader->state());
  if (state.eval_loader != nullptr) out.eval_loader = LoaderVector(state.eval_loader->state());
  Collect(state, model_only, {}, out);
}

// Redirects every piece to a private copy (converting model pieces to `dtype`), so the save
// no longer reads the live state.
void CopyPieces(StatePieces& out, DType dtype) {
  out.owned.reserve(out.pieces.size());
  for (CheckpointPiece& piece : out.pieces) {
    const bool convert = piece.data.dtype == DType::kF32 && dtype != DType::kF32 &&
                         piece.name.rfind("model/", 0) == 0;
    TensorView copy = piece.data;
    if (convert) copy.dtype = dtype;
    out.owned.emplace_back(copy.nbytes());
    copy.data = out.owned.back().data();
    if (convert) {
      (void)ConvertTensor(piece.data, copy);  // f32 -> bf16/f16 cannot fail
    } else {
      std::memcpy(copy.data, piece.data.data, copy.nbytes());
    }
    piece.data = copy;
  }
}

std::string StepFolder(const std::string& root, int64_t step) {
  return (fs::path(root) / absl::StrCat("step-", step)).string();
}

// The plugin's Read, guarded: an exception escaping it is an error naming the plugin.
absl::StatusOr<CheckpointContents> ReadWith(CheckpointPlugin& plugin, const std::string& folder) {
  return CallPluginOf(plugin, "Read", [&] { return plugin.Read(folder); });
}

}  // namespace

Checkpointer::StepFolders Checkpointer::ScanSteps() const {
  StepFolders steps;
  std::error_code error;
  for (const fs::directory_entry& entry : fs::directory_iterator(settings_.root, error)) {
    const std::string name = entry.path().filename().string();
    int64_t step = 0;
    // An interrupted save is still step-<N>.tmp, which is no step folder.
    if (name.rfind("step-", 0) != 0 || !absl::SimpleAtoi(name.substr(5), &step)) continue;
    // A step is a folder: a file of that name (a log, a copy) is not a checkpoint to wait for.
    std::error_code kind_error;
    if (!entry.is_directory(kind_error)) {
      steps.not_folders.push_back(entry.path().string());
      continue;
    }
    absl::StatusOr<CheckpointContents> contents =
        ReadWith(*settings_.plugin, entry.path().string());
    if (contents.ok()) {
      steps.complete.push_back(step);
    } else {
      steps.incomplete[step] = std::string(contents.status().message());
    }
  }
  std::sort(steps.complete.begin(), steps.complete.end());
  return steps;
}

absl::StatusOr<std::unique_ptr<Checkpointer>> Checkpointer::Create(
    const CheckpointSettings& settings, DeviceMesh& mesh) {
  if (settings.plugin == nullptr) return nullptr;
  std::unique_ptr<Checkpointer> checkpointer(new Checkpointer());
  checkpointer->settings_ = settings;
  TITAN_ASSIGN_OR_RETURN(checkpointer->comm_, mesh.world().Split(0, mesh.world().rank()));
  return checkpointer;
}

absl::Status Checkpointer::CheckStartingModel(const CheckpointSettings& settings,
                                              LlamaConfig config, absl::string_view flavor) {
  if (settings.plugin == nullptr) return absl::OkStatus();
  Checkpointer checkpointer;  // no communicator: it only reads
  checkpointer.settings_ = settings;
  return checkpointer.MatchModel(config, flavor);
}

Checkpointer::~Checkpointer() {
  if (background_.joinable()) background_.join();
}

absl::Status Checkpointer::ChooseSource() {
  if (source_.has_value()) return absl::OkStatus();
  TITAN_ASSIGN_OR_RETURN(std::optional<Source> source, FindSource());
  source_ = std::move(source);
  return absl::OkStatus();
}

absl::StatusOr<std::optional<Checkpointer::Source>> Checkpointer::FindSource() {
  const StepFolders steps = ScanSteps();
  for (const std::string& file : steps.not_folders) {
    spdlog::warn("[checkpoint] ignoring {}: a file, not a checkpoint folder", file);
  }
  const std::vector<int64_t>& saved = steps.complete;
  if (settings_.load_step >= 0) {
    if (std::find(saved.begin(), saved.end(), settings_.load_step) == saved.end()) {
      // A folder of that step that is damaged is a corrupt checkpoint (exit status 1, as a bad
      // shard is); no folder at all is a recipe asking for a step that is not there.
      auto broken = steps.incomplete.find(settings_.load_step);
      return absl::Status(
          broken == steps.incomplete.end() ? absl::StatusCode::kNotFound
                                           : absl::StatusCode::kDataLoss,
          absl::StrCat("checkpoint.load_step = ", settings_.load_step, ": ", settings_.root,
                       " holds no complete checkpoint of that step (it has: ",
                       saved.empty() ? "none" : absl::StrJoin(saved, ", "), ")",
                       broken == steps.incomplete.end() ? "" : absl::StrCat("; ", broken->second)));
    }
    return Source{StepFolder(settings_.root, settings_.load_step), settings_.plugin, false};
  }
  const int64_t latest = saved.empty() ? -1 : saved.back();
  for (const auto& [step, reason] : steps.incomplete) {
    const std::string folder = StepFolder(settings_.root, step);
    if (step < latest) {
      spdlog::warn("[checkpoint] ignoring {}, older than {}: {}", folder,
                   StepFolder(settings_.root, latest), reason);
      continue;
    }
    // Resuming from an older step would overwrite it when the run gets there: say so instead.
    // A damaged checkpoint, so the exit status of any corrupt checkpoint (1).
    return absl::DataLossError(absl::StrCat(
        "checkpoint: ", folder, " is not a complete checkpoint (", reason,
        "), and it is newer than ",
        latest < 0 ? absl::StrCat("any complete checkpoint in ", settings_.root)
                   : absl::StrCat("the latest complete one, ", StepFolder(settings_.root, latest)),
        ": titan neither resumes from an older step nor overwrites it. Move or remove ", folder,
        latest < 0 ? " to start afresh" : absl::StrCat(" to resume from step ", latest),
        ", or set checkpoint.load_step"));
  }
  if (latest >= 0) return Source{StepFolder(settings_.root, latest), settings_.plugin, false};
  if (settings_.initial_load_path.empty()) return std::nullopt;
  // Weights to start from: the model only, in whichever format the folder is.
  Source source{settings_.initial_load_path, settings_.plugin, true};
  absl::Status read = ReadWith(*settings_.plugin, source.folder).status();
  if (read.ok()) return source;
  std::vector<std::string> refusals = {absl::StrCat(settings_.format, ": ", read.message())};
  // Every other checkpoint plugin on the plugin path, whatever its name.
  for (const PluginInfo& info : settings_.registry->plugins()) {
    const PluginDescriptor& d = *info.descriptor;
    if (absl::string_view(d.kind) != PluginKind<CheckpointPlugin>::kName ||
        d.name == settings_.format) {
      continue;
    }
    absl::StatusOr<std::unique_ptr<CheckpointPlugin>> other =
        settings_.registry->Create<CheckpointPlugin>(d.name);
    if (!other.ok()) continue;
    CheckpointPlugin& reader = **other;
    absl::Status configured = CallPluginOf(
        reader, "Configure", [&] { return reader.Configure(ConfigView("checkpoint", {})); });
    if (!configured.ok()) continue;
    absl::Status other_read = ReadWith(**other, source.folder).status();
    if (other_read.ok()) {
      initial_plugin_ = std::move(*other);
      source.plugin = initial_plugin_.get();
      return source;
    }
    refusals.push_back(absl::StrCat(d.name, ": ", other_read.message()));
  }
  // Each format's reason: a corrupt Hugging Face folder must not read as "not a dcp folder".
  return absl::InvalidArgumentError(
      absl::StrCat("checkpoint.initial_load_path = ", settings_.initial_load_path,
                   ": no checkpoint plugin reads it (", absl::StrJoin(refusals, "; "), ")"));
}

absl::Status Checkpointer::MatchModel(LlamaConfig& config, absl::string_view flavor) {
  TITAN_RETURN_IF_ERROR(ChooseSource());
  if (!source_->has_value()) return absl::OkStatus();
  const Source& source = **source_;
  TITAN_ASSIGN_OR_RETURN(CheckpointContents contents, ReadWith(*source.plugin, source.folder));
  TITAN_ASSIGN_OR_RETURN(std::vector<std::string> adopted,
                         AdoptCheckpointModel(contents.metadata, source.folder, flavor, config));
  if (!adopted.empty()) {
    spdlog::warn(
        "[checkpoint] {} was trained with {}: the run takes these from the checkpoint, not "
        "from model.flavor = \"{}\"",
        source.folder, absl::StrJoin(adopted, ", "), std::string(flavor));
  }
  if (auto dropout = contents.metadata.find("model.attention_dropout");
      dropout != contents.metadata.end()) {
    spdlog::warn(
        "[checkpoint] {} asks for attention_dropout = {}, but titan trains without dropout: the "
        "run ignores it",
        source.folder, dropout->second);
  }
  // The context the model came with outlives a run at a shorter seq_len: an export keeps an
  // imported max_position_embeddings of 8192 rather than the run's training.seq_len.
  if (auto context = contents.metadata.find("model.max_seq_len");
      context != contents.metadata.end()) {
    (void)absl::SimpleAtoi(context->second, &source_max_seq_len_);
  }
  return absl::OkStatus();
}

absl::StatusOr<ResumePoint> Checkpointer::Load(const TrainState& state) {
  TITAN_RETURN_IF_ERROR(ChooseSource());
  if (!source_->has_value()) return ResumePoint{};
  const Source& source = **source_;
  const std::string& folder = source.folder;
  CheckpointPlugin* plugin = source.plugin;
  std::vector<std::string> exclude = settings_.exclude;
  if (source.import) exclude = {"optimizer", "lr_scheduler", "dataloader", "rng"};
  TITAN_ASSIGN_OR_RETURN(CheckpointContents contents, ReadWith(*plugin, folder));
  auto model_only = contents.metadata.find(kModelOnly);
  if (model_only != contents.metadata.end() && model_only->second == "true") {
    spdlog::warn("[checkpoint] {} holds the model only: optimizer, data and LR state start fresh",
                 folder);
    exclude = {"optimizer", "lr_scheduler", "dataloader", "rng"};
  }
  StatePieces pieces;
  Collect(state, /*model_only=*/false, exclude, pieces);
  // An import starts at step 0; a model-only save has its step in the metadata only.
  const bool stored_step =
      !source.import &&
      std::any_of(contents.tensors.begin(), contents.tensors.end(),
                  [](const CheckpointTensor& t) { return t.name == "train/step"; });
  if (!stored_step) {
    pieces.pieces.erase(
        std::remove_if(pieces.pieces.begin(), pieces.pieces.end(),
                       [](const CheckpointPiece& p) { return p.name == "train/step"; }),
        pieces.pieces.end());
    auto step = contents.metadata.find("train.step");
    if (source.import) {
      pieces.step[0] = 0;
    } else if (step == contents.metadata.end() ||
               !absl::SimpleAtoi(step->second, &pieces.step[0])) {
      return absl::DataLossError(absl::StrCat(folder, " holds no train/step tensor and no ",
                                              "train.step metadata: which step it is is unknown"));
    }
  }
  LoadStaging staging;  // device state is loaded into host buffers, then copied over
  TITAN_RETURN_IF_ERROR(staging.Prepare(state.model->compute(), pieces.pieces));
  TITAN_RETURN_IF_ERROR(
      CallPluginOf(*plugin, "Load", [&] { return plugin->Load(folder, pieces.pieces, *comm_); }));
  TITAN_RETURN_IF_ERROR(staging.Finish());
  ResumePoint resume{pieces.step[0], 0, ""};
  resume.optimizer_restored = !Excluded(exclude, "optimizer");
  auto row = contents.metadata.find(kMetricsRow);
  if (!source.import && row != contents.metadata.end()) resume.metrics_row = row->second;
  resume.lr_offset =
      Excluded(exclude, "lr_scheduler") ? resume.step : resume.step - pieces.lr_steps[0];
  if (!Excluded(exclude, "rng") && pieces.seed[0] != state.seed) {
    return absl::InvalidArgumentError(absl::StrCat(
        folder, " was saved with debug.seed = ", pieces.seed[0], ", but the recipe has ",
        state.seed, ": set it back, or add \"rng\" to checkpoint.exclude_from_loading"));
  }
  if (!Excluded(exclude, "dataloader")) {
    TITAN_RETURN_IF_ERROR(state.loader->Restore(LoaderFrom(pieces.loader)));
    if (state.eval_loader != nullptr) {
      TITAN_RETURN_IF_ERROR(state.eval_loader->Restore(LoaderFrom(pieces.eval_loader)));
    }
  }
  spdlog::info(
      "[checkpoint] loaded {} (step {}{})", folder, resume.step,
      exclude.empty() ? "" : absl::StrCat("; not restored: ", absl::StrJoin(exclude, ", ")));
  return resume;
}

absl::StatusOr<ResumePoint> ShareTrainState(const TrainState& state, bool sender,
                                            const ResumePoint& at, const ByteBroadcast& broadcast) {
  StatePieces pieces;
  CollectAt(state, at.step, at.lr_offset, /*model_only=*/false, pieces);
  Compute& compute = state.model->compute();
  LoadStaging staging;  // a receiver's device pieces arrive in host buffers, then are copied over
  if (sender) {
    TITAN_RETURN_IF_ERROR(StagePiecesToHost(compute, pieces.pieces, pieces.owned));
  } else {
    TITAN_RETURN_IF_ERROR(staging.Prepare(compute, pieces.pieces));
  }
  for (CheckpointPiece& piece : pieces.pieces) {
    TITAN_RETURN_IF_ERROR(broadcast(piece.data.data, piece.data.nbytes()));
  }
  if (sender) return at;
  TITAN_RETURN_IF_ERROR(staging.Finish());
  if (pieces.seed[0] != state.seed) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the live replica group runs debug.seed = ", pieces.seed[0], ", this one ", state.seed));
  }
  TITAN_RETURN_IF_ERROR(state.loader->Restore(LoaderFrom(pieces.loader)));
  if (state.eval_loader != nullptr) {
    TITAN_RETURN_IF_ERROR(state.eval_loader->Restore(LoaderFrom(pieces.eval_loader)));
  }
  return ResumePoint{pieces.step[0], pieces.step[0] - pieces.lr_steps[0], "",
                     /*optimizer_restored=*/true};
}

absl::Status Checkpointer::MaybeSave(int64_t step, int64_t steps, const ResumePoint& resume,
                                     const TrainState& state, bool stopping,
                                     const std::string& metrics_row) {
  const bool last = step == steps;
  if (step % settings_.interval != 0 && !last && !stopping) return absl::OkStatus();
  if (!last && step % settings_.interval != 0 && !holds_training_state()) {
    return absl::OkStatus();  // a stop: the format cannot hold what resuming needs
  }
  const auto start = std::chrono::steady_clock::now();
  TITAN_RETURN_IF_ERROR(Wait());  // one save at a time
  const bool model_only = last && settings_.last_model_only;
  StatePieces pieces;
  CollectAt(state, step, resume.lr_offset, model_only, pieces);
  // Device state is copied to the host first: the plugins and CopyPieces read host bytes.
  TITAN_RETURN_IF_ERROR(StagePiecesToHost(state.model->compute(), pieces.pieces, pieces.owned));
  CheckpointMetadata metadata =
      CheckpointMetadataOf(state.model->config(), std::max(state.max_seq_len, source_max_seq_len_));
  metadata["train.step"] = absl::StrCat(step);
  if (state.bos_id >= 0) metadata["model.bos_token_id"] = absl::StrCat(state.bos_id);
  if (state.eos_id >= 0) metadata["model.eos_token_id"] = absl::StrCat(state.eos_id);
  metadata[kModelOnly] = model_only ? "true" : "false";
  TITAN_ASSIGN_OR_RETURN(const std::string row, BroadcastText(*comm_, metrics_row));
  if (!row.empty()) metadata[kMetricsRow] = row;
  const std::string folder = StepFolder(settings_.root, step);
  if (model_only || settings_.async)
    CopyPieces(pieces, model_only ? settings_.export_dtype : DType::kF32);
  if (!settings_.async) {
    TITAN_RETURN_IF_ERROR(Save(folder, std::move(pieces.pieces), std::move(metadata)));
    return absl::OkStatus();
  }
  // The copies are the snapshot: training goes on while the thread compresses and writes.
  auto owned = std::make_shared<StatePieces>(std::move(pieces));
  background_ = std::thread([this, folder, owned, metadata = std::move(metadata)]() mutable {
    background_status_ = Save(folder, owned->pieces, std::move(metadata));
  });
  spdlog::info(
      "[checkpoint] step {}: training paused {:.2f}s for the snapshot; writing {} in the "
      "background",
      step, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
      folder);
  return absl::OkStatus();
}

absl::Status Checkpointer::Save(const std::string& folder, std::vector<CheckpointPiece> pieces,
                                CheckpointMetadata metadata) {
  const auto start = std::chrono::steady_clock::now();
  absl::Status saved = CallPluginOf(*settings_.plugin, "Save", [&] {
    return settings_.plugin->Save(folder, pieces, metadata, *comm_);
  });
  if (!saved.ok()) return absl::Status(saved.code(), absl::StrCat("checkpoint: ", saved.message()));
  spdlog::info("[checkpoint] saved {} in {:.2f}s{}", folder,
               std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
               settings_.async ? " (in the background)" : " (training paused meanwhile)");
  if (comm_->rank() == 0) RemoveOld();
  return absl::OkStatus();
}

// A pruned checkpoint is renamed first, then removed: a kill during the removal leaves a
// step-<N>.pruned folder, which no scan takes for a step and the next prune finishes removing,
// never a step-<N> missing some of its files.
void Checkpointer::RemoveOld() {
  if (settings_.keep_latest_k <= 0) return;
  constexpr absl::string_view kPruned = ".pruned";
  std::error_code error;
  for (const fs::directory_entry& entry : fs::directory_iterator(settings_.root, error)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("step-", 0) == 0 && absl::EndsWith(name, kPruned)) {
      std::error_code removal;
      fs::remove_all(entry.path(), removal);
      if (removal) {
        spdlog::warn("[checkpoint] could not remove {}, left by an earlier prune: {}",
                     entry.path().string(), removal.message());
      }
    }
  }
  std::vector<int64_t> saved = ScanSteps().complete;
  for (size_t i = 0; i + static_cast<size_t>(settings_.keep_latest_k) < saved.size(); ++i) {
    const std::string folder = StepFolder(settings_.root, saved[i]);
    const std::string trash = absl::StrCat(folder, kPruned);
    fs::rename(folder, trash, error);
    if (error) {
      spdlog::warn("[checkpoint] could not prune {}: renaming it to {} failed: {}", folder, trash,
                   error.message());
      continue;
    }
    fs::remove_all(trash, error);
    if (error) {
      spdlog::warn("[checkpoint] could not remove {} (pruned {}): {}; the next prune retries",
                   trash, folder, error.message());
    }
  }
}

absl::Status Checkpointer::Wait() {
  if (background_.joinable()) background_.join();
  absl::Status status = background_status_;
  background_status_ = absl::OkStatus();
  return status;
}

}  // namespace titan
