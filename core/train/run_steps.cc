// The RunSteps phase: the step loop with its metrics, validation, checkpoints, control plane and
// stop signals.
#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "core/runtime/control_plane/control_plane.h"
#include "core/runtime/logging.h"
#include "core/runtime/observability.h"
#include "core/runtime/plugin_registry.h"
#include "core/runtime/profiler.h"
#include "core/tensor/matmul.h"
#include "core/train/lr_schedule.h"
#include "core/train/metrics.h"
#include "core/train/run_control.h"
#include "core/train/training_job.h"

namespace titan {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

// The mean validation loss over `batches` global batches, averaged across the data-parallel
// ranks (each evaluates its own part). Under pipeline parallelism each batch runs the
// schedule's forwards only and the last stage's rank shares the losses with the others.
absl::StatusOr<double> EvalLoss(TrainingJob& job, int64_t batches) {
  DecoderModel& model = *job.model;
  PackedLoader& loader = *job.data->eval;
  const int64_t batch = job.plan.training.local_batch_size, seq_len = job.plan.training.seq_len;
  PipelineRole* pipeline = job.plan.parallelism.pipeline();
  const int64_t microbatches = job.plan.parallelism.pipeline_microbatches;
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
    TITAN_RETURN_IF_ERROR(CallPluginOf(*pipeline, "RunSchedule", [&] {
                            return pipeline->RunSchedule(forward_only);
                          }).status());
    if (!model.holds_last_stage()) continue;
    for (float loss : model.microbatch_losses()) total += loss / static_cast<double>(microbatches);
  }
  float mean = static_cast<float>(total / static_cast<double>(batches));
  if (pipeline != nullptr) {
    TITAN_RETURN_IF_ERROR(
        job.mesh.group(MeshDim::kPp).AllReduce(FlatF32(&mean, 1), ReduceOp::kSum));
  }
  TITAN_RETURN_IF_ERROR(job.mesh.world().AllReduce(FlatF32(&mean, 1), ReduceOp::kAvg));
  return mean;
}

// Rank 0's metrics.jsonl, and TensorBoard files where this rank writes them; empty when it
// writes neither.
absl::StatusOr<std::optional<MetricsLog>> OpenMetrics(const TrainingJob& job) {
  const MetricsSettings& metrics = job.plan.metrics;
  TITAN_ASSIGN_OR_RETURN(std::unique_ptr<TensorBoardWriter> tensorboard,
                         OpenTensorBoard(metrics.tensorboard, job.mesh.world().rank()));
  if (!job.lead() && tensorboard == nullptr) return std::nullopt;
  TITAN_ASSIGN_OR_RETURN(PeakFlops peak,
                         RankPeak(metrics.peak_tflops, job.where.device, job.where.matmul_dtype));
  spdlog::info("[metrics] peak {:.3f} TFLOP/s per rank, for MFU: {}", peak.tflops, peak.source);
  TITAN_ASSIGN_OR_RETURN(
      MetricsLog log, MetricsLog::Open(job.plan.job.dump_folder, std::move(peak), job.resume.step,
                                       std::move(tensorboard),
                                       /*jsonl=*/job.lead(), job.resume.metrics_row));
  return std::optional<MetricsLog>(std::move(log));
}

}  // namespace

absl::StatusOr<StepsOutcome> RunSteps(TrainingJob& job) {
  const TrainingSettings& training = job.plan.training;
  const ParallelismPlan& parallel = job.plan.parallelism;
  DeviceMesh& mesh = job.mesh;
  const MeshShape& shape = parallel.shape;
  const int64_t steps = training.steps, batch = training.local_batch_size;
  const int64_t seq_len = training.seq_len, accumulation = parallel.accumulation;
  const bool pipelined = parallel.pipeline() != nullptr;
  const LrSchedule schedule(steps, training.warmup_steps, training.decay_ratio, training.decay_type,
                            training.min_lr_factor);
  if (!BlasSharesOpenMpThreads()) {
    spdlog::warn(
        "[device] OpenBLAS runs its own threads beside titan's OpenMP ones, which slows training "
        "on a CPU: build against OpenBLAS's OpenMP build (Debian: libopenblas-openmp-dev)");
  }
  TITAN_ASSIGN_OR_RETURN(job.metrics, OpenMetrics(job));
  std::optional<MetricsLog>& log = job.metrics;
  const double flop_per_token = FlopPerToken(job.plan.model.config, seq_len);
  const int non_data_parallel =
      shape.degree(MeshDim::kPp) * shape.degree(MeshDim::kCp) * shape.degree(MeshDim::kTp);

  spdlog::info(
      "[train] {} steps of {} x {} tokens ({} microbatch(es) of {} on each of {} data-parallel "
      "rank(s){}){}",
      steps, training.global_batch_size, seq_len, accumulation, batch,
      parallel.data_parallel_degree,
      pipelined ? absl::StrCat(", each split into ", parallel.pipeline_microbatches,
                               " pipeline microbatches")
                : "",
      log ? ", logging to " + log->path() : "");
  TITAN_ASSIGN_OR_RETURN(std::unique_ptr<ControlPlane> control,
                         ControlPlane::Start(job.plan.control_plane, mesh));
  DelayBeforeTrainingForTest(mesh.world().rank());
  const TrainState train_state = TrainStateOf(job);
  const ResumePoint& resume = job.resume;
  PackedLoader& loader = job.data->train;
  StepsOutcome outcome;
  outcome.start = Clock::now();
  outcome.trained = resume.step;
  auto window_start = Clock::now();
  int64_t window_steps = 0;  // since the last logged step (or the start, resumed or not)
  double data_s = 0;
  double pipeline_compute_s = 0, pipeline_step_s = 0;  // over the pp ranks, since the last log
  // Tensor parallelism's sequence-parallel communication on this rank since the last log, hidden
  // by async tp's rings and exposed, when profiling.
  const bool tp_overlap = job.plan.profiling.traces && job.model->tensor_parallel_degree() > 1;
  double tp_hidden_s = 0, tp_exposed_s = 0;
  for (int64_t step = resume.step + 1; step <= steps; ++step) {
    SetLogStep(step);
    BeginProfiledStep(step);
    const double lr = training.peak_lr * schedule.Factor(step - resume.lr_offset);
    if (job.replica_groups != nullptr) {
      // Groups admitted by the last step take the state it left (that step is then theirs).
      TITAN_RETURN_IF_ERROR(
          job.replica_groups->ServeJoiners([&](const ReplicaGroups::Broadcast& broadcast) {
            return ShareTrainState(train_state, true, ResumePoint{step - 1, resume.lr_offset, ""},
                                   broadcast)
                .status();
          }));
    }
    TITAN_ASSIGN_OR_RETURN(StepResult result,
                           job.train_step->Run(step, lr, [&](int32_t* tokens, int32_t* targets) {
                             ScopedSpan span("data", "data_loading");
                             auto data_start = Clock::now();
                             loader.Next(tokens, targets);
                             data_s += Seconds(data_start);
                           }));
    TITAN_RETURN_IF_ERROR(EndProfiledStep(step, mesh.world()));
    outcome.trained = step;
    for (const OverlapTime& t : job.model->TakeTensorParallelOverlap()) {
      tp_hidden_s += t.hidden, tp_exposed_s += t.exposed;
    }
    if (pipelined) {
      // Summed over the pp ranks, whose idle time is the bubble.
      float times[2] = {static_cast<float>(result.pipeline.compute_seconds),
                        static_cast<float>(result.pipeline.step_seconds)};
      TITAN_RETURN_IF_ERROR(mesh.group(MeshDim::kPp).AllReduce(FlatF32(times, 2), ReduceOp::kSum));
      pipeline_compute_s += times[0];
      pipeline_step_s += times[1];
    }
    if (control) control->AfterStep(step, result.loss);

    ++window_steps;
    if (log && (step % job.plan.metrics.log_freq == 0 || step == steps || step == 1)) {
      const Throughput rate =
          RankThroughput(window_steps * batch * accumulation * seq_len, Seconds(window_start),
                         non_data_parallel, flop_per_token, log->peak().tflops);
      StepMetrics m;
      m.step = step, m.loss = result.loss, m.grad_norm = result.grad_norm, m.lr = lr;
      m.expert_tokens = result.expert_tokens, m.expert_imbalance = result.expert_imbalance;
      m.aux_loss = result.aux_loss;
      m.tps = rate.tps, m.tflops = rate.tflops, m.mfu = rate.mfu;
      SetPeakMemory(mesh.device(), m);
      m.data_s = data_s / static_cast<double>(window_steps);
      if (pipelined) {
        m.pipeline = true;
        m.bubble = pipeline_step_s > 0 ? 1 - pipeline_compute_s / pipeline_step_s : 0;
        m.bubble_theory = result.pipeline.theoretical_bubble;
      }
      if (tp_overlap) {
        m.tp_overlap = true;
        m.tp_hidden_s = tp_hidden_s / static_cast<double>(window_steps);
        m.tp_exposed_s = tp_exposed_s / static_cast<double>(window_steps);
      }
      log->Log(m);
      window_start = Clock::now();
      window_steps = 0;
      data_s = 0;
      pipeline_compute_s = pipeline_step_s = 0;
      tp_hidden_s = tp_exposed_s = 0;
    }
    if (job.data->eval && step % job.plan.validation.freq == 0) {
      // Each validation step covers a global batch, as a training step does.
      const int64_t batches =
          std::min(job.plan.validation.steps * accumulation,
                   job.data->eval->num_windows() / (batch * parallel.data_parallel_degree));
      TITAN_ASSIGN_OR_RETURN(double eval_loss, EvalLoss(job, batches));
      if (log) log->LogEval(step, eval_loss);
    }
    ServeFlightRecordRequest(mesh.world(), absl::StrCat("after step ", step));
    bool stop = false;  // asked on every rank every step, so that all stop after the same one
    if (step < steps) {
      TITAN_ASSIGN_OR_RETURN(stop, AgreeToStop(mesh.world()));
    }
    if (job.checkpointer != nullptr) {
      outcome.saved = job.checkpointer->MaybeSave(step, steps, resume, train_state, stop,
                                                  log ? log->TrainingRow(step) : "");
      if (!outcome.saved.ok()) break;  // the weights trained so far still go to model.arena
    }
    if (step == resume.step + 1) TITAN_RETURN_IF_ERROR(UseTrainTimeouts(mesh.world()));
    if (log) log->Progress(step, steps, Seconds(outcome.start));
    if (stop) {
      outcome.stopped_after = step;
      break;
    }
  }
  control.reset();  // finishes the control plane's rounds of the steps trained
  if (job.checkpointer != nullptr && outcome.saved.ok()) outcome.saved = job.checkpointer->Wait();
  return outcome;
}

}  // namespace titan
