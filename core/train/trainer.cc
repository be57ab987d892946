#include "core/train/trainer.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/model/llama.h"
#include "core/runtime/control_plane/control_plane.h"
#include "core/runtime/logging.h"
#include "core/runtime/observability.h"
#include "core/runtime/profiler.h"
#include "core/tensor/matmul.h"
#include "core/train/checkpointer.h"
#include "core/train/generate.h"
#include "core/train/lr_schedule.h"
#include "core/train/metrics.h"
#include "core/train/pipeline_gather.h"
#include "core/train/preflight.h"
#include "core/train/run_control.h"
#include "core/train/train_step.h"
#include "core/train/training_data.h"
#include "titan/float8.h"

namespace titan {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

// The mean validation loss over `batches` global batches, averaged across the data-parallel
// ranks (each evaluates its own part). Under pipeline parallelism each batch runs the
// schedule's forwards only and the last stage's rank shares the losses with the others.
absl::StatusOr<double> EvalLoss(LlamaModel& model, PackedLoader& loader, int64_t batches,
                                int64_t batch, int64_t seq_len, Communicator& ranks,
                                ParallelPlugin* pipeline, int64_t microbatches,
                                Communicator& pipeline_group) {
  std::vector<int32_t> tokens(batch * seq_len), targets(batch * seq_len);
  double total = 0;
  for (int64_t i = 0; i < batches; ++i) {
    loader.Next(tokens.data(), targets.data());
    if (pipeline == nullptr) {
      TITAN_ASSIGN_OR_RETURN(float loss,
                             model.Forward(tokens.data(), targets.data(), batch, seq_len));
      total += loss;
      continue;
    }
    const int64_t size = batch / microbatches * seq_len;
    std::vector<std::vector<int32_t>> micro_tokens, micro_targets;
    for (int64_t m = 0; m < microbatches; ++m) {
      micro_tokens.emplace_back(tokens.begin() + m * size, tokens.begin() + (m + 1) * size);
      micro_targets.emplace_back(targets.begin() + m * size, targets.begin() + (m + 1) * size);
    }
    TITAN_RETURN_IF_ERROR(model.SetMicrobatches(std::move(micro_tokens), std::move(micro_targets),
                                                batch / microbatches, seq_len));
    PipelineStepOptions forward_only;
    forward_only.forward_only = true;
    TITAN_RETURN_IF_ERROR(pipeline->RunSchedule(forward_only).status());
    if (!model.holds_last_stage()) continue;
    for (float loss : model.microbatch_losses()) total += loss / static_cast<double>(microbatches);
  }
  float mean = static_cast<float>(total / static_cast<double>(batches));
  if (pipeline != nullptr) {
    TITAN_RETURN_IF_ERROR(pipeline_group.AllReduce(FlatF32(&mean, 1), ReduceOp::kSum));
  }
  TITAN_RETURN_IF_ERROR(ranks.AllReduce(FlatF32(&mean, 1), ReduceOp::kAvg));
  return mean;
}

// The device and matmul precision the recipe asks for: the mesh's device (job.device) and
// training.mixed_precision_param; gradients are always reduced in f32
// (training.mixed_precision_reduce accepts only "float32").
absl::StatusOr<ModelCompute> ModelComputeOf(const Recipe& recipe, DeviceMesh& mesh) {
  TITAN_ASSIGN_OR_RETURN(std::string param,
                         recipe.section("training").GetString("mixed_precision_param"));
  ModelCompute where;
  where.device = &mesh.device();
  where.matmul_dtype = param == "bfloat16" ? DType::kBF16 : DType::kF32;
  return where;
}

// What fsdp gathers in which format (Parameter::compute_dtype), for the log.
std::string DescribeGatherFormats(const std::vector<Parameter>& parameters) {
  std::map<DType, std::pair<int, int64_t>> by_format;  // parameters, elements
  int64_t elements = 0, bytes = 0;
  for (const Parameter& p : parameters) {
    auto& [count, numel] = by_format[p.compute_dtype];
    ++count;
    numel += p.value.numel();
    elements += p.value.numel();
    bytes += p.value.numel() * static_cast<int64_t>(DTypeSize(p.compute_dtype));
  }
  std::vector<std::string> parts;
  for (const auto& [dtype, entry] : by_format) {
    parts.push_back(absl::StrCat(entry.first, " in ", DTypeName(dtype)));
  }
  constexpr double kMib = 1 << 20;
  return absl::StrCat("gathers the parameters as they compute: ", absl::StrJoin(parts, ", "), "; ",
                      absl::SixDigits(static_cast<double>(bytes) / kMib),
                      " MiB per gather of the whole model, against ",
                      absl::SixDigits(static_cast<double>(elements) * 4 / kMib), " MiB in f32");
}

}  // namespace

absl::Status Train(const Recipe& recipe, OptimizerPlugin& optimizer, DeviceMesh& mesh,
                   const PluginRegistry& registry) {
  const ConfigView& training = recipe.section("training");
  TITAN_ASSIGN_OR_RETURN(int64_t batch, training.GetInt("local_batch_size"));
  TITAN_ASSIGN_OR_RETURN(int64_t seq_len, training.GetInt("seq_len"));
  TITAN_ASSIGN_OR_RETURN(int64_t steps, training.GetInt("steps"));
  TITAN_ASSIGN_OR_RETURN(double max_norm, training.GetFloat("max_norm"));
  TITAN_ASSIGN_OR_RETURN(int64_t seed, recipe.section("debug").GetInt("seed"));
  TITAN_ASSIGN_OR_RETURN(double peak_lr, recipe.section("optimizer").GetFloat("lr"));
  const MeshShape& shape = mesh.shape();
  const int dp_shard = shape.degree(MeshDim::kDpShard);
  const int dp_degree = shape.degree(MeshDim::kDpReplicate) * dp_shard;
  const int dp_rank =
      mesh.coordinate(MeshDim::kDpReplicate) * dp_shard + mesh.coordinate(MeshDim::kDpShard);
  const bool lead = mesh.world().rank() == 0;  // logs metrics, saves and samples
  TITAN_ASSIGN_OR_RETURN(const int64_t accumulation, GradientAccumulation(recipe, shape));
  const int64_t global_batch = accumulation * batch * dp_degree;
  TITAN_ASSIGN_OR_RETURN(ParallelPlugins parallel, CreateParallelPlugins(recipe, registry, shape));
  std::unique_ptr<ParallelPlugin>& data_parallel = parallel.data_parallel;
  std::unique_ptr<ParallelPlugin>& tensor_parallel = parallel.tensor_parallel;
  std::unique_ptr<ParallelPlugin>& pipeline = parallel.pipeline;
  std::unique_ptr<ParallelPlugin>& context_parallel = parallel.context_parallel;
  TITAN_ASSIGN_OR_RETURN(const int64_t microbatches, PipelineMicrobatches(recipe, shape));

  TITAN_ASSIGN_OR_RETURN(TrainingData data,
                         LoadTrainingData(recipe, batch, seq_len, dp_rank, dp_degree));
  TITAN_RETURN_IF_ERROR(CheckGlobalBatchFitsData(global_batch, seq_len, data.train.num_windows()));
  std::unique_ptr<Tokenizer>& tokenizer = data.tokenizer;
  PackedLoader& loader = data.train;
  std::optional<PackedLoader>& eval_loader = data.eval;
  const ConfigView& validation = recipe.section("validation");
  TITAN_ASSIGN_OR_RETURN(int64_t eval_freq, validation.GetInt("freq"));
  TITAN_ASSIGN_OR_RETURN(int64_t eval_steps, validation.GetInt("steps"));

  // Model.
  TITAN_ASSIGN_OR_RETURN(std::string flavor, recipe.section("model").GetString("flavor"));
  TITAN_ASSIGN_OR_RETURN(LlamaConfig config, LlamaFlavor(flavor));
  config.vocab_size = tokenizer->vocab_size();
  TITAN_ASSIGN_OR_RETURN(std::unique_ptr<Checkpointer> checkpointer,
                         Checkpointer::Create(recipe, registry, mesh));
  if (checkpointer != nullptr) TITAN_RETURN_IF_ERROR(checkpointer->MatchModel(config, flavor));
  const ConfigView& ac_section = recipe.section("activation_checkpoint");
  TITAN_ASSIGN_OR_RETURN(std::string ac_mode, ac_section.GetString("mode"));
  TITAN_ASSIGN_OR_RETURN(std::string ac_option, ac_section.GetString("selective_ac_option"));
  TITAN_ASSIGN_OR_RETURN(ActivationCheckpoint ac, ParseActivationCheckpoint(ac_mode, ac_option));
  TITAN_ASSIGN_OR_RETURN(ModelCompute where, ModelComputeOf(recipe, mesh));
  PipelinePlan stages;
  if (pipeline != nullptr) {
    TITAN_ASSIGN_OR_RETURN(stages, pipeline->PlanPipeline(static_cast<int>(config.n_layers),
                                                          static_cast<int>(microbatches), mesh));
    for (const PipelineStage& stage : stages.local) {
      spdlog::info("[pp] stage {} of {}: layers {}..{}{}{}", stage.stage, stages.num_stages,
                   stage.first_layer, stage.end_layer, stage.stage == 0 ? " + embedding" : "",
                   stage.stage == stages.num_stages - 1 ? " + norm, output and loss" : "");
    }
  }
  TITAN_ASSIGN_OR_RETURN(std::unique_ptr<LlamaModel> model,
                         LlamaModel::Create(config, ac, where, stages));
  spdlog::info("[device] {}; matmuls in {}", model->compute().Describe(),
               where.matmul_dtype == DType::kBF16
                   ? "bf16 with f32 accumulation (training.mixed_precision_param = \"bfloat16\")"
                   : "f32");
  bool precompute_float8_scales = false;
  for (const Recipe::SelectedPlugin& plugin : recipe.plugins()) {
    // The float8 section selects plugins of kind "float8" only, and only with the converter on.
    if (plugin.section != "float8") continue;
    const auto& float8 = static_cast<const Float8Plugin&>(*plugin.instance);
    const ConfigView& section = recipe.section("float8");
    TITAN_ASSIGN_OR_RETURN(std::string recipe_name, section.GetString("recipe_name"));
    TITAN_ASSIGN_OR_RETURN(bool gather_float8, section.GetBool("enable_fsdp_float8_all_gather"));
    TITAN_ASSIGN_OR_RETURN(precompute_float8_scales,
                           section.GetBool("precompute_float8_dynamic_scale_for_fsdp"));
    TITAN_RETURN_IF_ERROR(CheckFloat8AllGather(gather_float8, precompute_float8_scales, dp_shard,
                                               section.Where("enable_fsdp_float8_all_gather")));
    TITAN_ASSIGN_OR_RETURN(std::vector<Float8LinearChoice> choices,
                           model->ConvertToFloat8(float8, gather_float8));
    for (const std::string& line : DescribeFloat8Linears(choices, recipe_name, float8.Recipe())) {
      spdlog::info("{}", line);
    }
    if (gather_float8) {
      spdlog::info("[float8] fsdp gathers the Float8 layers' weights in e4m3 with one scale each{}",
                   precompute_float8_scales
                       ? ", all scales computed in one pass after each optimizer step"
                       : ", each unit's scales reduced before its gather");
    }
  }
  model->Initialize(static_cast<uint64_t>(seed));
  spdlog::info("[model] llama3 {} with vocabulary {}: {:.2f}M parameters", flavor,
               config.vocab_size, config.ParameterCount() / 1e6);
  if (pipeline != nullptr) {
    int64_t held = 0;
    for (const Parameter& p : model->Parameters()) held += p.value.numel();
    spdlog::info("[pp] this rank's stages hold {:.2f}M of them", static_cast<double>(held) / 1e6);
  }

  // TorchTitan's order: the pp split (made above), tp, then fsdp or ddp over the tp-local tensors.
  for (ParallelPlugin* plugin :
       {pipeline.get(), tensor_parallel.get(), context_parallel.get(), data_parallel.get()}) {
    if (plugin == nullptr) continue;
    TITAN_RETURN_IF_ERROR(plugin->Apply(model->root(), mesh));
    model->ReleaseUnusedStorage();
  }
  if (data_parallel != nullptr && data_parallel->dimension() == MeshDim::kDpShard) {
    spdlog::info("[fsdp] {}", DescribeGatherFormats(model->Parameters()));
  }
  TITAN_ASSIGN_OR_RETURN(
      TrainStep train_step,
      TrainStep::Create(
          *model, optimizer, batch, seq_len, accumulation, max_norm,
          DataParallelContext{data_parallel.get(), &mesh.world(), tensor_parallel.get(),
                              pipeline.get(), &mesh.group(MeshDim::kPp), microbatches,
                              // fsdp and ddp average over their dimension flattened with cp.
                              data_parallel != nullptr ? nullptr : &mesh.group(MeshDim::kCp),
                              precompute_float8_scales}));
  spdlog::info("[memory] parameters, gradients and optimizer state: {:.1f} MiB on this rank",
               static_cast<double>(train_step.state_bytes()) / (1 << 20));
  const TrainState train_state{model.get(),
                               &train_step,
                               &loader,
                               eval_loader ? &*eval_loader : nullptr,
                               seed,
                               seq_len,
                               /*bos_id=*/tokenizer->bos_id(),
                               /*eos_id=*/tokenizer->eos_id()};
  ResumePoint resume;
  if (checkpointer != nullptr) {
    TITAN_ASSIGN_OR_RETURN(resume, checkpointer->Load(train_state));
  }
  // The scales of the weights as initialized or loaded; each optimizer step computes them anew.
  if (precompute_float8_scales) TITAN_RETURN_IF_ERROR(data_parallel->PrecomputeFloat8Scales());

  const ConfigView& lr_section = recipe.section("lr_scheduler");
  TITAN_ASSIGN_OR_RETURN(int64_t warmup, lr_section.GetInt("warmup_steps"));
  TITAN_ASSIGN_OR_RETURN(double decay_ratio, lr_section.GetFloat("decay_ratio"));
  TITAN_ASSIGN_OR_RETURN(std::string decay_type, lr_section.GetString("decay_type"));
  TITAN_ASSIGN_OR_RETURN(double min_lr_factor, lr_section.GetFloat("min_lr_factor"));
  const LrSchedule schedule(steps, warmup, decay_ratio, decay_type, min_lr_factor);

  const ConfigView& metrics = recipe.section("metrics");
  TITAN_ASSIGN_OR_RETURN(int64_t log_freq, metrics.GetInt("log_freq"));
  TITAN_ASSIGN_OR_RETURN(double peak_setting, metrics.GetFloat("peak_tflops"));
  if (!BlasSharesOpenMpThreads()) {
    spdlog::warn(
        "[device] OpenBLAS runs its own threads beside titan's OpenMP ones, which slows training "
        "on a CPU: build against OpenBLAS's OpenMP build (Debian: libopenblas-openmp-dev)");
  }
  TITAN_ASSIGN_OR_RETURN(std::string dump, recipe.section("job").GetString("dump_folder"));
  TITAN_ASSIGN_OR_RETURN(std::unique_ptr<TensorBoardWriter> tensorboard,
                         OpenTensorBoard(recipe, mesh.world().rank()));
  std::optional<MetricsLog> log;  // rank 0's metrics.jsonl, and TensorBoard files where written
  if (lead || tensorboard != nullptr) {
    PeakFlops peak = ThisMachinePeak(peak_setting);
    spdlog::info("[metrics] peak {:.3f} TFLOP/s per rank, for MFU: {}", peak.tflops, peak.source);
    TITAN_ASSIGN_OR_RETURN(log, MetricsLog::Open(dump, std::move(peak), resume.step,
                                                 std::move(tensorboard), /*jsonl=*/lead));
  }
  const double flop_per_token = FlopPerToken(config, seq_len);
  const int non_data_parallel =
      shape.degree(MeshDim::kPp) * shape.degree(MeshDim::kCp) * shape.degree(MeshDim::kTp);

  spdlog::info(
      "[train] {} steps of {} x {} tokens ({} microbatch(es) of {} on each of {} data-parallel "
      "rank(s){}){}",
      steps, global_batch, seq_len, accumulation, batch, dp_degree,
      pipeline != nullptr
          ? absl::StrCat(", each split into ", microbatches, " pipeline microbatches")
          : "",
      log ? ", logging to " + log->path() : "");
  TITAN_ASSIGN_OR_RETURN(std::unique_ptr<ControlPlane> control, ControlPlane::Start(recipe, mesh));
  DelayBeforeTrainingForTest(mesh.world().rank());
  const auto run_start = Clock::now();
  auto window_start = Clock::now();
  int64_t window_steps = 0;  // since the last logged step (or the start, resumed or not)
  double data_s = 0;
  double pipeline_compute_s = 0, pipeline_step_s = 0;  // over the pp ranks, since the last log
  absl::Status saved;  // the checkpoint saves' outcome: the ranks agree on it
  int64_t trained = resume.step;
  int64_t stopped_after = 0;  // the step after which a stop signal ended the run
  for (int64_t step = resume.step + 1; step <= steps; ++step) {
    SetLogStep(step);
    BeginProfiledStep(step);
    const double lr = peak_lr * schedule.Factor(step - resume.lr_offset);
    TITAN_ASSIGN_OR_RETURN(StepResult result,
                           train_step.Run(step, lr, [&](int32_t* tokens, int32_t* targets) {
                             ScopedSpan span("data", "data_loading");
                             auto data_start = Clock::now();
                             loader.Next(tokens, targets);
                             data_s += Seconds(data_start);
                           }));
    TITAN_RETURN_IF_ERROR(EndProfiledStep(step, mesh.world()));
    trained = step;
    if (pipeline != nullptr) {
      // Summed over the pp ranks, whose idle time is the bubble.
      float times[2] = {static_cast<float>(result.pipeline.compute_seconds),
                        static_cast<float>(result.pipeline.step_seconds)};
      TITAN_RETURN_IF_ERROR(mesh.group(MeshDim::kPp).AllReduce(FlatF32(times, 2), ReduceOp::kSum));
      pipeline_compute_s += times[0];
      pipeline_step_s += times[1];
    }
    if (control) control->AfterStep(step, result.loss);

    ++window_steps;
    if (log && (step % log_freq == 0 || step == steps || step == 1)) {
      const Throughput rate =
          RankThroughput(window_steps * batch * accumulation * seq_len, Seconds(window_start),
                         non_data_parallel, flop_per_token, log->peak().tflops);
      StepMetrics m;
      m.step = step, m.loss = result.loss, m.grad_norm = result.grad_norm, m.lr = lr;
      m.tps = rate.tps, m.tflops = rate.tflops, m.mfu = rate.mfu;
      SetPeakMemory(mesh.device(), m);
      m.data_s = data_s / static_cast<double>(window_steps);
      if (pipeline != nullptr) {
        m.pipeline = true;
        m.bubble = pipeline_step_s > 0 ? 1 - pipeline_compute_s / pipeline_step_s : 0;
        m.bubble_theory = result.pipeline.theoretical_bubble;
      }
      log->Log(m);
      window_start = Clock::now();
      window_steps = 0;
      data_s = 0;
      pipeline_compute_s = pipeline_step_s = 0;
    }
    if (eval_loader && step % eval_freq == 0) {
      // Each validation step covers a global batch, as a training step does.
      const int64_t batches =
          std::min(eval_steps * accumulation, eval_loader->num_windows() / (batch * dp_degree));
      TITAN_ASSIGN_OR_RETURN(double eval_loss,
                             EvalLoss(*model, *eval_loader, batches, batch, seq_len, mesh.world(),
                                      pipeline.get(), microbatches, mesh.group(MeshDim::kPp)));
      if (log) log->LogEval(step, eval_loss);
    }
    bool stop = false;  // asked on every rank every step, so that all stop after the same one
    if (step < steps) {
      TITAN_ASSIGN_OR_RETURN(stop, AgreeToStop(mesh.world()));
    }
    if (checkpointer != nullptr) {
      saved = checkpointer->MaybeSave(step, steps, resume, train_state, stop);
      if (!saved.ok()) break;  // the weights trained so far still go to model.arena below
    }
    if (step == resume.step + 1) TITAN_RETURN_IF_ERROR(UseTrainTimeouts(mesh.world()));
    if (log) log->Progress(step, steps, Seconds(run_start));
    if (stop) {
      stopped_after = step;
      break;
    }
  }
  control.reset();  // finishes the control plane's rounds of the steps trained
  if (checkpointer != nullptr && saved.ok()) saved = checkpointer->Wait();
  if (context_parallel != nullptr) {
    spdlog::info("[cp] rank {} of {}: attention scored {} query-key pairs over {} step(s), {}",
                 mesh.coordinate(MeshDim::kCp), shape.degree(MeshDim::kCp),
                 model->attention_pairs(), trained - resume.step, model->attention().description());
  }
  SetLogStep(-1);
  const std::string stopped = absl::StrCat(
      "stopped by ", StopSignal() != 0 ? SignalName(StopSignal()) : "another rank's signal",
      " after step ", stopped_after, " of ", steps);
  // Every rank waits for rank 0's save first: mpirun kills the others once one exits non-zero.
  auto stop_after_save = [&](absl::string_view what) -> absl::Status {
    TITAN_RETURN_IF_ERROR(mesh.world().Barrier());
    return absl::CancelledError(absl::StrCat(stopped, what));
  };
  if (stopped_after > 0 && checkpointer != nullptr && saved.ok()) {
    return stop_after_save("; its checkpoint is saved: run the same command to resume");
  }
  if (log && saved.ok() && stopped_after == 0) log->Progress(steps, steps, Seconds(run_start));
  if (saved.ok()) {
    spdlog::info("[train] {}: {} steps in {:.1f}s", stopped_after > 0 ? stopped : "done",
                 trained - resume.step, Seconds(run_start));
  }
  // From here on every rank holds the whole model, so saving and sampling need no collectives.
  // In the reverse order of Apply: fsdp gathers the tp-local tensors, tp the whole ones.
  for (ParallelPlugin* plugin :
       {data_parallel.get(), context_parallel.get(), tensor_parallel.get()}) {
    if (plugin != nullptr) TITAN_RETURN_IF_ERROR(plugin->Unshard());
  }
  // The pp ranks of the lead's pipeline (every other coordinate 0) hand their stages to it.
  if (pipeline != nullptr && mesh.coordinate(MeshDim::kDpReplicate) == 0 &&
      mesh.coordinate(MeshDim::kDpShard) == 0 && mesh.coordinate(MeshDim::kCp) == 0 &&
      mesh.coordinate(MeshDim::kTp) == 0) {
    TITAN_ASSIGN_OR_RETURN(std::unique_ptr<LlamaModel> whole,
                           GatherPipelineModel(*model, mesh.group(MeshDim::kPp), ac, where));
    if (lead) model = std::move(whole);
  }
  // The trained parameters, for titan-generate; also when a checkpoint save failed, so that a
  // full disk or a format that cannot hold the state never loses the run's work.
  const std::string model_path = (std::filesystem::path(dump) / "model.arena").string();
  if (lead) {
    TITAN_RETURN_IF_ERROR(model->SaveParameters(model_path));
    if (!saved.ok()) {
      spdlog::error("[train] stopped after step {}: {}; the weights of step {} are in {}", trained,
                    std::string(saved.message()), trained, model_path);
      return saved;
    }
    spdlog::info("[train] model saved to {}; metrics in {}", model_path, log->path());
  }
  if (!saved.ok()) return saved;
  if (stopped_after > 0) {
    return stop_after_save(absl::StrCat("; the model is saved to ", model_path,
                                        " (checkpoint.enable is off: no resuming)"));
  }
  if (!lead) return absl::OkStatus();

  const ConfigView& sample = recipe.section("generate");
  TITAN_ASSIGN_OR_RETURN(int64_t max_new_tokens, sample.GetInt("max_new_tokens"));
  if (max_new_tokens > 0) {
    SamplingOptions options;
    TITAN_ASSIGN_OR_RETURN(std::string prompt, sample.GetString("prompt"));
    TITAN_ASSIGN_OR_RETURN(options.temperature, sample.GetFloat("temperature"));
    TITAN_ASSIGN_OR_RETURN(options.top_k, sample.GetInt("top_k"));
    TITAN_ASSIGN_OR_RETURN(options.top_p, sample.GetFloat("top_p"));
    std::vector<int32_t> text = {tokenizer->bos_id()};
    std::vector<int32_t> encoded = tokenizer->Encode(prompt);
    text.insert(text.end(), encoded.begin(), encoded.end());
    TITAN_RETURN_IF_ERROR(Generate(*model, text, max_new_tokens, seq_len, tokenizer->eos_id(),
                                   options, static_cast<uint64_t>(seed)));
    spdlog::info("[generate] sample:\n{}",
                 tokenizer->Decode(std::span<const int32_t>(text).subspan(1)));
  }
  return absl::OkStatus();
}

}  // namespace titan
