// The `pp` parallel plugin (dimension pp): pipeline parallelism. PlanPipeline splits the
// model's blocks into stages and places them on the pp ranks as the schedule wants; the core
// builds each rank's model of just its stages. RunSchedule then replaces the step's
// forward/backward loop: it runs this rank's actions of the schedule (schedule.h) in order,
// each run of consecutive sends and receives as one grouped exchange (exchanges.h) that
// returns once its receives are in, the sends going on until the step's end.
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "plugins/parallel/pp/exchanges.h"
#include "plugins/parallel/pp/schedule.h"
#include "plugins/parallel/pp/stage_split.h"
#include "titan/parallel.h"

namespace titan::pp {
namespace {

using Clock = std::chrono::steady_clock;

class Pipeline : public ParallelPlugin, public PipelineRole {
 public:
  MeshDim dimension() const override { return MeshDim::kPp; }

  absl::Status Configure(const ConfigView& config) override {
    TITAN_ASSIGN_OR_RETURN(schedule_name_, config.GetString("pipeline_parallel_schedule"));
    TITAN_ASSIGN_OR_RETURN(csv_, config.GetString("pipeline_parallel_schedule_csv"));
    TITAN_ASSIGN_OR_RETURN(int64_t per_stage, config.GetInt("pipeline_parallel_layers_per_stage"));
    TITAN_ASSIGN_OR_RETURN(int64_t first,
                           config.GetInt("pipeline_parallel_first_stage_less_layers"));
    TITAN_ASSIGN_OR_RETURN(int64_t last, config.GetInt("pipeline_parallel_last_stage_less_layers"));
    layers_per_stage_ = static_cast<int>(per_stage);
    first_less_ = static_cast<int>(first);
    last_less_ = static_cast<int>(last);
    if (csv_.empty()) {
      absl::Status known = IsMultiStage(schedule_name_).status();
      if (!known.ok()) return config.Error("pipeline_parallel_schedule", known.message());
    }
    return absl::OkStatus();
  }

  PipelineRole* pipeline() override { return this; }

  absl::StatusOr<PipelinePlan> PlanPipeline(int n_layers, int microbatches,
                                            DeviceMesh& mesh) override {
    const int ranks = mesh.shape().degree(MeshDim::kPp), rank = mesh.coordinate(MeshDim::kPp);
    if (csv_.empty()) {
      TITAN_ASSIGN_OR_RETURN(bool multi, IsMultiStage(schedule_name_));
      int per_rank = multi ? 2 : 1;
      if (layers_per_stage_ > 0) {
        const int stages = StagesFor(n_layers, layers_per_stage_, first_less_, last_less_);
        if (stages % ranks != 0 || (!multi && stages != ranks)) {
          return absl::InvalidArgumentError(absl::StrCat(
              "parallelism.pipeline_parallel_layers_per_stage = ", layers_per_stage_, " makes ",
              stages, " stages of ", n_layers, " layers (+ ", first_less_, " + ", last_less_,
              " for the embedding and output), which ", ranks, " pp ranks cannot share ",
              multi ? "evenly" : "one each (the schedule runs one stage per rank)"));
        }
        per_rank = stages / ranks;
      }
      TITAN_ASSIGN_OR_RETURN(Schedule compute,
                             Generate(schedule_name_, ranks, per_rank, microbatches));
      schedule_ = Lower(compute);
    } else {
      TITAN_ASSIGN_OR_RETURN(schedule_, ReadCsv(csv_, ranks, microbatches));
      schedule_name_ = absl::StrCat("csv:", csv_);
    }
    if (schedule_.ranks != ranks || schedule_.microbatches != microbatches) {
      return absl::InvalidArgumentError(absl::StrCat(
          "pipeline schedule ", schedule_name_, ": made for ", schedule_.ranks, " ranks and ",
          schedule_.microbatches, " microbatches, the job has ", ranks, " and ", microbatches));
    }
    absl::Status valid = Check(schedule_);
    if (!valid.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("pipeline schedule ", schedule_name_, " cannot run: ", valid.message()));
    }
    absl::Status tags = CheckMessageTags(schedule_.stages, schedule_.microbatches);
    if (!tags.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("pipeline schedule ", schedule_name_, ": ", tags.message()));
    }
    TITAN_ASSIGN_OR_RETURN(theoretical_bubble_, TheoreticalBubble(schedule_));
    TITAN_ASSIGN_OR_RETURN(std::vector<PipelineStage> all,
                           SplitLayers(n_layers, schedule_.stages, first_less_, last_less_));
    if (mesh.group(MeshDim::kPp).ordered_point_to_point()) {
      absl::Status grouped = CheckExchanges(schedule_);
      if (!grouped.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "pipeline schedule ", schedule_name_,
            " cannot run over this communicator, whose sends and receives run in the order "
            "issued (nccl): ",
            grouped.message(), ". GPipe and 1F1B can; or use comm.backend = \"mpi\""));
      }
    }
    PipelinePlan plan;
    plan.num_stages = schedule_.stages;
    for (const PipelineStage& stage : all) {
      if (schedule_.stage_rank[stage.stage] == rank) plan.local.push_back(stage);
    }
    rank_ = rank;
    return plan;
  }

  absl::Status Apply(Module& model, DeviceMesh& mesh) override {
    if (group_ != nullptr) return absl::FailedPreconditionError("pp: applied twice");
    if (schedule_.ranks == 0) {
      return absl::FailedPreconditionError("pp: Apply before PlanPipeline");
    }
    target_ = model.pipeline_stage_target();
    if (target_ == nullptr) {
      return absl::FailedPreconditionError(
          "pp: the model offers no PipelineStageTarget, so it cannot run pipeline stages");
    }
    group_ = &mesh.group(MeshDim::kPp);
    return absl::OkStatus();
  }

  absl::StatusOr<PipelineStepStats> RunSchedule(const PipelineStepOptions& options) override {
    if (target_ == nullptr) return absl::FailedPreconditionError("pp: RunSchedule before Apply");
    if (target_->num_microbatches() != schedule_.microbatches) {
      return absl::InvalidArgumentError(
          absl::StrCat("pp: the schedule runs ", schedule_.microbatches,
                       " microbatches, the model holds ", target_->num_microbatches()));
    }
    PipelineStepStats stats;
    stats.theoretical_bubble = theoretical_bubble_;
    const auto start = Clock::now();
    sends_.clear();
    std::vector<Action> actions;
    for (const Action& action : schedule_.actions[rank_]) {
      if (options.forward_only && action.type != ActionType::kForward &&
          action.type != ActionType::kSendForward && action.type != ActionType::kRecvForward) {
        continue;
      }
      actions.push_back(action);
    }
    for (const ExchangeStep& step : GroupExchanges(actions)) {
      const auto step_start = Clock::now();
      absl::Status done = step.exchange ? Exchange(actions, step.actions)
                                        : Run(actions[step.actions.front()], options);
      if (!done.ok()) {
        std::vector<std::string> names;
        for (int i : step.actions) names.push_back(ActionName(actions[i]));
        return absl::Status(
            done.code(), absl::StrCat("pp rank ", rank_, ", schedule ", schedule_name_, ", action ",
                                      absl::StrJoin(names, " "), ": ", done.message()));
      }
      if (!step.exchange) {
        stats.compute_seconds += std::chrono::duration<double>(Clock::now() - step_start).count();
      }
    }
    for (auto& send : sends_) TITAN_RETURN_IF_ERROR(send->Wait());
    sends_.clear();
    stats.step_seconds = std::chrono::duration<double>(Clock::now() - start).count();
    return stats;
  }

 private:
  int Tag(int stage, int microbatch, bool gradient) const {
    return MessageTag(stage, microbatch, schedule_.microbatches, gradient);
  }

  // The sends and receives actions[indices] as one exchange; its sends go on in sends_.
  absl::Status Exchange(const std::vector<Action>& actions, const std::vector<int>& indices) {
    std::vector<PeerMessage> messages;
    for (int i : indices) {
      TITAN_ASSIGN_OR_RETURN(PeerMessage message, Message(actions[i]));
      messages.push_back(message);
    }
    TITAN_ASSIGN_OR_RETURN(std::unique_ptr<Communicator::Transfer> sends,
                           group_->Exchange(messages));
    sends_.push_back(std::move(sends));
    return absl::OkStatus();
  }

  absl::StatusOr<PeerMessage> Message(const Action& a) {
    const int s = a.stage, m = a.microbatch;
    using Kind = PeerMessage::Kind;
    switch (a.type) {
      case ActionType::kSendForward: {
        TITAN_ASSIGN_OR_RETURN(TensorView out, target_->StageOutput(s, m));
        return PeerMessage{Kind::kSend, out, schedule_.stage_rank[s + 1], Tag(s + 1, m, false)};
      }
      case ActionType::kRecvForward: {
        TITAN_ASSIGN_OR_RETURN(TensorView in, target_->StageInput(s, m));
        return PeerMessage{Kind::kRecv, in, schedule_.stage_rank[s - 1], Tag(s, m, false)};
      }
      case ActionType::kSendBackward: {
        TITAN_ASSIGN_OR_RETURN(TensorView grad, target_->InputGrad(s, m));
        return PeerMessage{Kind::kSend, grad, schedule_.stage_rank[s - 1], Tag(s, m, true)};
      }
      case ActionType::kRecvBackward: {
        TITAN_ASSIGN_OR_RETURN(TensorView grad, target_->OutputGrad(s, m));
        return PeerMessage{Kind::kRecv, grad, schedule_.stage_rank[s + 1], Tag(s + 1, m, true)};
      }
      default:
        break;
    }
    return absl::InternalError(absl::StrCat("pp: ", ActionName(a), " is not a send or receive"));
  }

  absl::Status Run(const Action& a, const PipelineStepOptions& options) {
    const int s = a.stage, m = a.microbatch;
    if (options.data_parallel != nullptr &&
        (a.type == ActionType::kBackward || a.type == ActionType::kBackwardWeight)) {
      options.data_parallel->set_requires_gradient_sync(options.sync_gradients &&
                                                        m + 1 == schedule_.microbatches);
    }
    switch (a.type) {
      case ActionType::kForward:
        return target_->Forward(s, m);
      case ActionType::kBackward:
        return target_->Backward(s, m);
      case ActionType::kBackwardInput:
        return target_->BackwardInput(s, m);
      case ActionType::kBackwardWeight:
        return target_->BackwardWeight(s, m);
      default:  // sends and receives run as exchanges
        break;
    }
    return absl::InternalError(absl::StrCat("pp: ", ActionName(a), " is no compute action"));
  }

  std::string schedule_name_ = "1F1B", csv_;
  int layers_per_stage_ = -1, first_less_ = 1, last_less_ = 1;
  Schedule schedule_;
  double theoretical_bubble_ = 0;
  int rank_ = 0;
  Communicator* group_ = nullptr;
  PipelineStageTarget* target_ = nullptr;
  std::vector<std::unique_ptr<Communicator::Transfer>> sends_;
};

}  // namespace
}  // namespace titan::pp

TITAN_PLUGIN(titan::ParallelPlugin, titan::pp::Pipeline, "pp", "1.0.0",
             "pipeline parallel: stages on the pp ranks, schedules as data (GPipe, 1F1B, "
             "interleaved, zero-bubble)")
