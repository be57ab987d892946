#include "core/runtime/control_plane/control_plane.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <filesystem>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace titan {
namespace {

constexpr int kHostBytes = 256;

// Every rank's hostname, gathered over `control`.
absl::StatusOr<std::vector<std::string>> Hostnames(Communicator& control) {
  std::vector<char> mine(kHostBytes, '\0'), all(static_cast<size_t>(kHostBytes) * control.size());
  gethostname(mine.data(), kHostBytes - 1);
  // Bytes travel as 8-byte integers: no dtype of the communicators is one byte wide.
  auto bytes = [](std::vector<char>& buffer) {
    return TensorView{
        buffer.data(), DType::kI64, {}, {static_cast<int64_t>(buffer.size() / 8)}, {}};
  };
  TITAN_RETURN_IF_ERROR(control.AllGather(bytes(mine), bytes(all)));
  std::vector<std::string> names;
  for (int r = 0; r < control.size(); ++r) names.emplace_back(all.data() + r * kHostBytes);
  return names;
}

absl::Status CheckDebugRank(const char* key, int64_t rank, int world) {
  if (rank < world) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("control_plane.", key, " = ", rank,
                                                 ": expected -1 (none) or a rank below ", world));
}

}  // namespace

absl::Status CheckControlPlane(const ControlPlaneOptions& options, int world) {
  if (!options.enable) return absl::OkStatus();
  TITAN_RETURN_IF_ERROR(CheckDebugRank("debug_slow_rank", options.debug_slow_rank, world));
  TITAN_RETURN_IF_ERROR(
      CheckDebugRank("debug_lose_controller", options.settings.lose_controller, world));
  // The hosts are not known yet: ranks a file places by host (or no file) wait for the start.
  const std::vector<std::string> unknown_hosts(static_cast<size_t>(world));
  absl::StatusOr<ControlInstance> instance = BuildControlInstance(unknown_hosts, options.placement);
  return instance.ok() || absl::IsUnavailable(instance.status()) ? absl::OkStatus()
                                                                 : instance.status();
}

absl::StatusOr<std::unique_ptr<ControlPlane>> ControlPlane::Start(
    const ControlPlaneOptions& options, DeviceMesh& mesh) {
  if (!options.enable) return std::unique_ptr<ControlPlane>();
  ControlSettings settings = options.settings;
  if (settings.policy == nullptr) return absl::InternalError("control_plane.policy selected none");
  const ControlPlacement& placement = options.placement;
  const int64_t lose = settings.lose_controller;
  const int world = mesh.world().size();
  TITAN_RETURN_IF_ERROR(CheckDebugRank("debug_slow_rank", options.debug_slow_rank, world));
  TITAN_RETURN_IF_ERROR(CheckDebugRank("debug_lose_controller", lose, world));

  // Reports travel on a communicator of their own, so they never queue behind training.
  TITAN_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> control,
                         mesh.world().Split(0, mesh.world().rank()));
  TITAN_ASSIGN_OR_RETURN(std::vector<std::string> hosts, Hostnames(*control));
  TITAN_ASSIGN_OR_RETURN(ControlInstance instance, BuildControlInstance(hosts, placement));
  if (lose >= 0 && std::find(instance.controller_rank.begin(), instance.controller_rank.end(),
                             lose) == instance.controller_rank.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("control_plane.debug_lose_controller = ", lose, ": rank ", lose,
                     " is not a controller; the controllers are ranks ",
                     absl::StrJoin(instance.controller_rank, ", ")));
  }
  if (mesh.world().rank() == 0) {
    spdlog::info(
        "[control] {} controller(s) at rank(s) {} watch {} rank(s) within {} hops ({}); policy "
        "{}; events in {}",
        instance.controller_rank.size(), absl::StrJoin(instance.controller_rank, ", "), world,
        placement.hops,
        placement.topology_file.empty() ? "topology from hostnames" : placement.topology_file,
        settings.policy_name, settings.jsonl_path);
  }
  auto rounds =
      std::make_unique<ControlRounds>(std::move(control), std::move(instance), std::move(settings));
  return std::make_unique<ControlPlane>(
      std::move(rounds), CommunicationClockOf(mesh.world()),
      options.debug_slow_rank == mesh.world().rank() ? options.debug_slow_seconds : 0.0);
}

ControlPlane::ControlPlane(std::unique_ptr<ControlRounds> rounds, const CommunicationClock* clock,
                           double slow_seconds)
    : rounds_(std::move(rounds)),
      clock_(clock),
      slow_seconds_(slow_seconds),
      last_step_end_(std::chrono::steady_clock::now()),
      last_communication_s_(clock != nullptr ? clock->seconds() : 0.0),
      thread_([this] { Run(); }) {}

ControlPlane::~ControlPlane() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    finishing_ = true;
  }
  ready_.notify_all();
  thread_.join();
}

void ControlPlane::AfterStep(int64_t step, double loss) {
  if (slow_seconds_ > 0) {
    std::this_thread::sleep_for(std::chrono::duration<double>(slow_seconds_));
  }
  const auto now = std::chrono::steady_clock::now();
  StepReport report;
  report.step = step;
  report.loss = loss;
  report.iteration_s = std::chrono::duration<double>(now - last_step_end_).count();
  const double communication = clock_ != nullptr ? clock_->seconds() : last_communication_s_;
  report.busy_s = std::max(0.0, report.iteration_s - (communication - last_communication_s_));
  last_step_end_ = now;
  last_communication_s_ = communication;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(report);
  }
  ready_.notify_all();
}

void ControlPlane::Run() {
  while (true) {
    StepReport report;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      ready_.wait(lock, [&] { return finishing_ || !queue_.empty(); });
      if (queue_.empty()) return;
      report = queue_.front();
      queue_.pop_front();
    }
    absl::Status round = rounds_->Round(report);
    if (!round.ok()) {
      spdlog::error("[control] the control plane stopped at step {}: {}", report.step,
                    std::string(round.message()));
      return;
    }
  }
}

}  // namespace titan
