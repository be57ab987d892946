// The SaveAndSample phase: after the steps, the whole model on the lead, saved to model.arena
// (also when a checkpoint save failed, so that a full disk or a format that cannot hold the state
// never loses the run's work) and continued from generate.prompt.
#include <spdlog/spdlog.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "core/runtime/logging.h"
#include "core/runtime/plugin_registry.h"
#include "core/train/generate.h"
#include "core/train/pipeline_gather.h"
#include "core/train/run_control.h"
#include "core/train/training_job.h"

namespace titan {
namespace {

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

// From here on every rank holds the whole model, so saving and sampling need no collectives.
absl::Status GatherWholeModel(TrainingJob& job) {
  ParallelismPlan& parallel = job.plan.parallelism;
  DeviceMesh& mesh = job.mesh;
  // In the reverse order of Apply: fsdp gathers the tp-local tensors, tp the whole ones.
  for (auto plugin = parallel.plugins.rbegin(); plugin != parallel.plugins.rend(); ++plugin) {
    UnshardingRole* unsharding = (*plugin)->unsharding();
    if (unsharding != nullptr) {
      TITAN_RETURN_IF_ERROR(
          CallPluginOf(*unsharding, "Unshard", [&] { return unsharding->Unshard(); }));
    }
  }
  // The pp ranks of the lead's pipeline (every other coordinate 0) hand their stages to it.
  if (parallel.pipeline() != nullptr && mesh.coordinate(MeshDim::kDpReplicate) == 0 &&
      mesh.coordinate(MeshDim::kDpShard) == 0 && mesh.coordinate(MeshDim::kCp) == 0 &&
      mesh.coordinate(MeshDim::kTp) == 0) {
    TITAN_ASSIGN_OR_RETURN(std::unique_ptr<DecoderModel> whole,
                           GatherPipelineModel(*job.model, mesh.group(MeshDim::kPp),
                                               job.plan.activation_checkpoint, job.where));
    if (job.lead()) job.model = std::move(whole);
  }
  return absl::OkStatus();
}

// The lead's text sample after training, continuing generate.prompt.
absl::Status Sample(TrainingJob& job) {
  const GenerateSettings& generate = job.plan.generate;
  if (generate.max_new_tokens <= 0) return absl::OkStatus();
  const Tokenizer& tokenizer = *job.data->tokenizer;
  std::vector<int32_t> text = {tokenizer.bos_id()};
  std::vector<int32_t> encoded = tokenizer.Encode(generate.prompt);
  text.insert(text.end(), encoded.begin(), encoded.end());
  TITAN_RETURN_IF_ERROR(Generate(*job.model, text, generate.max_new_tokens,
                                 job.plan.training.seq_len, tokenizer.eos_id(), generate.sampling,
                                 static_cast<uint64_t>(job.plan.training.seed)));
  spdlog::info("[generate] sample:\n{}",
               tokenizer.Decode(std::span<const int32_t>(text).subspan(1)));
  return absl::OkStatus();
}

}  // namespace

absl::Status SaveAndSample(TrainingJob& job, const StepsOutcome& outcome) {
  DeviceMesh& mesh = job.mesh;
  const MeshShape& shape = job.plan.parallelism.shape;
  const int64_t steps = job.plan.training.steps, trained = outcome.trained;
  const absl::Status& saved = outcome.saved;
  if (shape.degree(MeshDim::kCp) > 1) {
    spdlog::info("[cp] rank {} of {}: attention scored {} query-key pairs over {} step(s), {}",
                 mesh.coordinate(MeshDim::kCp), shape.degree(MeshDim::kCp),
                 job.model->attention_pairs(), trained - job.resume.step,
                 job.model->attention().description());
  }
  SetLogStep(-1);
  const std::string stopped = absl::StrCat(
      "stopped by ", StopSignal() != 0 ? SignalName(StopSignal()) : "another rank's signal",
      " after step ", outcome.stopped_after, " of ", steps);
  // Every rank waits for rank 0's save first: mpirun kills the others once one exits non-zero.
  auto stop_after_save = [&](absl::string_view what) -> absl::Status {
    TITAN_RETURN_IF_ERROR(mesh.world().Barrier());
    return absl::CancelledError(absl::StrCat(stopped, what));
  };
  const bool resumable = job.checkpointer != nullptr && job.checkpointer->holds_training_state();
  if (outcome.stopped_after > 0 && resumable && saved.ok()) {
    return stop_after_save("; its checkpoint is saved: run the same command to resume");
  }
  std::optional<MetricsLog>& log = job.metrics;
  if (log && saved.ok() && outcome.stopped_after == 0) {
    log->Progress(steps, steps, Seconds(outcome.start));
  }
  if (saved.ok()) {
    spdlog::info("[train] {}: {} steps in {:.1f}s", outcome.stopped_after > 0 ? stopped : "done",
                 trained - job.resume.step, Seconds(outcome.start));
  }
  TITAN_RETURN_IF_ERROR(GatherWholeModel(job));
  const std::string model_path =
      (std::filesystem::path(job.plan.job.dump_folder) / "model.arena").string();
  if (job.lead()) {
    absl::Status written = job.model->SaveParameters(model_path);
    if (!written.ok() && !saved.ok()) {
      // A full disk fails both saves: the checkpoint's error is the first, and the cause.
      spdlog::error("[train] stopped after step {}: {}; writing the weights failed too", trained,
                    std::string(saved.message()));
    }
    TITAN_RETURN_IF_ERROR(written);
    if (!saved.ok()) {
      spdlog::error("[train] stopped after step {}: {}; the weights of step {} are in {}", trained,
                    std::string(saved.message()), trained, model_path);
    } else {
      spdlog::info("[train] model saved to {}; metrics in {}", model_path, log->path());
    }
  }
  if (!saved.ok()) {
    // Every rank waits for rank 0's weights: a failed rank of several ends at once, and the
    // launcher stops the others with it. A barrier that fails follows from `saved`, the cause.
    mesh.world().Barrier().IgnoreError();
    return saved;
  }
  if (outcome.stopped_after > 0) {
    const std::string why = job.checkpointer == nullptr
                                ? std::string("checkpoint.enable is off")
                                : absl::StrCat("checkpoint.format = \"", job.plan.checkpoint.format,
                                               "\" holds the model only");
    return stop_after_save(
        absl::StrCat("; the model is saved to ", model_path, " (", why, ": no resuming)"));
  }
  if (!job.lead()) return absl::OkStatus();
  return Sample(job);
}

}  // namespace titan
