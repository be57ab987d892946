#include "core/runtime/control_plane/control_round.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/runtime/control_plane/balancer.h"

namespace titan {
namespace {

constexpr int kReportTag = 7301;
using Clock = std::chrono::steady_clock;

double Since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Doubles travel as 8-byte integers: the communicators move bytes, and reduce only f32.
TensorView Doubles(double* data, int64_t count) {
  return TensorView{data, DType::kI64, Device{}, {count}, {}};
}

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

}  // namespace

ControlRounds::ControlRounds(std::unique_ptr<Communicator> control, ControlInstance instance,
                             ControlSettings settings)
    : control_(std::move(control)),
      instance_(std::move(instance)),
      settings_(std::move(settings)),
      rank_(control_->rank()),
      size_(control_->size()),
      start_(Clock::now()) {
  const int controllers = static_cast<int>(instance_.controller_rank.size());
  for (int c = 0; c < controllers; ++c) {
    if (instance_.controller_rank[c] == rank_) controller_ = c;
  }
  // Until the first loads are measured each rank reports to its nearest potential controller.
  for (int r = 0; r < size_; ++r) owner_.push_back(instance_.problem.potential[r].front());
  lost_.assign(controllers, false);
  last_progress_.assign(controllers, 0.0);
  if (rank_ == 0) jsonl_.open(settings_.jsonl_path, std::ios::trunc);
  if (controller_ >= 0) watchdog_ = std::thread([this] { Watch(); });
}

ControlRounds::~ControlRounds() {
  {
    std::lock_guard<std::mutex> lock(watch_mutex_);
    stop_watch_ = true;
  }
  watch_cv_.notify_all();
  if (watchdog_.joinable()) watchdog_.join();
}

void ControlRounds::Watch() {
  std::unique_lock<std::mutex> lock(watch_mutex_);
  const auto timeout = std::chrono::duration<double>(settings_.heartbeat_timeout_s);
  while (!stop_watch_) {
    if (waiting_for_ < 0 || named_) {
      watch_cv_.wait(lock);
      continue;
    }
    const auto deadline = waiting_since_ + std::chrono::duration_cast<Clock::duration>(timeout);
    if (watch_cv_.wait_until(lock, deadline) == std::cv_status::timeout && waiting_for_ >= 0 &&
        !named_ && Clock::now() >= deadline) {
      named_ = true;
      spdlog::warn(
          "[control] controller rank {}: worker rank {} sent no heartbeat for {:.1f} s "
          "(control_plane.heartbeat_timeout_seconds = {}); waiting for its report of step {}",
          rank_, waiting_for_, Since(waiting_since_), settings_.heartbeat_timeout_s, waiting_step_);
    }
  }
}

absl::Status ControlRounds::Collect(int64_t step, int controller, const std::array<double, 4>& own,
                                    Record& mine) {
  std::vector<int> workers;
  std::vector<double> busy;
  double bytes = 0;
  for (int w = 0; w < size_; ++w) {
    if (owner_[w] != controller) continue;
    std::array<double, 4> report = own;
    if (w != rank_) {
      {
        std::lock_guard<std::mutex> lock(watch_mutex_);
        waiting_for_ = w, waiting_step_ = step, waiting_since_ = Clock::now(), named_ = false;
      }
      watch_cv_.notify_all();
      absl::Status received = control_->Recv(Doubles(report.data(), 4), w, kReportTag);
      std::lock_guard<std::mutex> lock(watch_mutex_);
      const double waited = Since(waiting_since_);
      if (named_ && waited > mine[kLateSeconds]) mine[kLate] = w, mine[kLateSeconds] = waited;
      waiting_for_ = -1;
      TITAN_RETURN_IF_ERROR(received);
    }
    if (report[0] != static_cast<double>(step)) {
      return absl::InternalError(absl::StrCat("controller rank ", rank_, ": worker rank ", w,
                                              " reported step ", report[0], ", expected ", step));
    }
    workers.push_back(w);
    busy.push_back(report[2]);
    bytes += static_cast<double>(sizeof(report));
  }
  mine[kReports] = static_cast<double>(workers.size());
  double sum = 0, most = 0;
  for (double b : busy) sum += b, most = std::max(most, b);
  mine[kMeanBusy] = workers.empty() ? 0 : sum / static_cast<double>(workers.size());
  mine[kMaxBusy] = most;
  mine[kReceived] = bytes / std::max(own[3], 1e-9);
  // A straggler: busy far above the median of the rest of its group (so one of two counts).
  double worst = 0;
  for (size_t i = 0; i < workers.size() && workers.size() >= 2; ++i) {
    std::vector<double> others = busy;
    others.erase(others.begin() + static_cast<std::ptrdiff_t>(i));
    const double median = Median(others);
    const double ratio = busy[i] / std::max(median, 1e-9);
    if (ratio > settings_.straggler_factor && ratio > worst) {
      worst = ratio;
      mine[kStraggler] = workers[i], mine[kStragglerBusy] = busy[i], mine[kOthersMedian] = median;
    }
  }
  if (mine[kStraggler] >= 0) {
    spdlog::warn(
        "[control] controller rank {}: worker rank {} is a straggler at step {}: busy {:.3f} s, "
        "{:.1f}x the median {:.3f} s of its group's others (control_plane.straggler_factor = {})",
        rank_, mine[kStraggler], step, mine[kStragglerBusy], worst, mine[kOthersMedian],
        settings_.straggler_factor);
  }
  return absl::OkStatus();
}

absl::Status ControlRounds::Round(const StepReport& report) {
  const double clock = Since(start_);
  const double elapsed = std::max(clock - last_report_clock_, 1e-9);
  last_report_clock_ = clock;
  std::array<double, 4> own = {static_cast<double>(report.step), report.loss, report.busy_s,
                               elapsed};
  Record mine;
  mine.fill(-1);
  mine[kLateSeconds] = 0;
  // Measured, in whole bytes per second so that loads add exactly.
  mine[kLoad] = std::round(static_cast<double>(sizeof(own)) / elapsed);
  mine[kClock] = clock;
  const int owner = instance_.controller_rank[owner_[rank_]];
  if (owner != rank_) {
    TITAN_RETURN_IF_ERROR(control_->Send(Doubles(own.data(), 4), owner, kReportTag));
  }
  const bool controlling =
      controller_ >= 0 && !lost_[controller_] &&
      !(rank_ == settings_.lose_controller && report.step >= settings_.lose_at_step);
  if (controlling) {
    TITAN_RETURN_IF_ERROR(Collect(report.step, controller_, own, mine));
    mine[kProgress] = static_cast<double>(report.step);
  }
  std::vector<double> all(static_cast<size_t>(size_) * kFields);
  TITAN_RETURN_IF_ERROR(control_->AllGather(Doubles(mine.data(), kFields),
                                            Doubles(all.data(), static_cast<int64_t>(all.size()))));
  return Decide(report.step, all);
}

absl::Status ControlRounds::Decide(int64_t step, const std::vector<double>& all) {
  auto field = [&](int r, Field f) { return all[static_cast<size_t>(r) * kFields + f]; };
  BalanceProblem& problem = instance_.problem;
  double agreed = 0;  // the same on every rank, so every rank decides alike
  for (int r = 0; r < size_; ++r) {
    agreed = std::max(agreed, field(r, kClock));
    problem.switch_load[r] = field(r, kLoad);
  }
  const int controllers = static_cast<int>(lost_.size());
  std::string why;
  int decider = -1;  // the lowest controller rank that completed this round
  for (int c = 0; c < controllers; ++c) {
    if (lost_[c]) continue;
    const int rank = instance_.controller_rank[c];
    if (field(rank, kProgress) == static_cast<double>(step)) {
      last_progress_[c] = agreed;
      if (decider < 0 || rank < decider) decider = rank;
    } else if (agreed - last_progress_[c] > settings_.heartbeat_timeout_s) {
      lost_[c] = true;
      const std::string lost =
          absl::StrCat("controller rank ", rank, " lost: no round completed for ",
                       absl::StrFormat("%.1f", agreed - last_progress_[c]), " s");
      if (rank_ == 0) {
        spdlog::warn("[control] {} (control_plane.heartbeat_timeout_seconds = {})", lost,
                     settings_.heartbeat_timeout_s);
        Write(nlohmann::json{{"event", "controller_lost"},
                             {"step", step},
                             {"controller", rank},
                             {"silent_s", agreed - last_progress_[c]}}
                  .dump());
      }
      why = lost;
    }
  }
  if (rank_ == 0) LogGroups(step, all);
  if (!assigned_) {
    why = "start";
  } else if (why.empty()) {
    double drift = 0;
    int drifted = -1;
    for (int r = 0; r < size_; ++r) {
      const double change =
          std::abs(problem.switch_load[r] / std::max(reference_load_[r], 1.0) - 1);
      if (change > drift) drift = change, drifted = r;
    }
    if (drift > settings_.rebalance_threshold) {
      why = absl::StrFormat("loads drifted: rank %d's by %.0f%% since the last assignment", drifted,
                            100 * drift);
    }
  }
  if (why.empty()) return absl::OkStatus();
  if (decider < 0) {
    if (rank_ == 0) spdlog::error("[control] step {}: no controller is live; {}", step, why);
    return absl::OkStatus();
  }
  // The decider runs the policy; the others take its answer: owners, then the lower bound.
  std::vector<double> answer(static_cast<size_t>(size_) + 2, -1.0);
  if (rank_ == decider) {
    absl::StatusOr<Balanced> balanced =
        assigned_ ? RebalanceControllers(*settings_.policy, problem, owner_, lost_)
                  : AssignControllers(*settings_.policy, problem, lost_);
    if (balanced.ok()) {
      for (int r = 0; r < size_; ++r) answer[r] = balanced->controller_of[r];
      answer[size_] = balanced->lower_bound;
      answer[size_ + 1] = balanced->policy_bound ? 1 : 0;
    } else {
      spdlog::error("[control] step {}: control_plane.policy = \"{}\" failed ({}): {}", step,
                    settings_.policy_name, why, std::string(balanced.status().message()));
    }
  }
  TITAN_RETURN_IF_ERROR(
      control_->Broadcast(Doubles(answer.data(), static_cast<int64_t>(answer.size())), decider));
  if (answer[0] < 0) return absl::OkStatus();
  std::vector<int32_t> previous = owner_;
  for (int r = 0; r < size_; ++r) owner_[r] = static_cast<int32_t>(answer[r]);
  if (rank_ == 0) LogAssignment(step, why, answer[size_], answer[size_ + 1] > 0, previous);
  assigned_ = true;
  reference_load_ = problem.switch_load;
  return absl::OkStatus();
}

void ControlRounds::LogAssignment(int64_t step, const std::string& why, double lower_bound,
                                  bool policy_bound, const std::vector<int32_t>& previous) {
  const BalanceProblem& problem = instance_.problem;
  const std::vector<double> loads = ControllerLoads(problem, owner_);
  std::vector<int> controller_of, controllers;
  for (int r = 0; r < size_; ++r) controller_of.push_back(instance_.controller_rank[owner_[r]]);
  for (size_t c = 0; c < loads.size(); ++c) {
    if (!lost_[c]) controllers.push_back(instance_.controller_rank[c]);
  }
  const double max_load = *std::max_element(loads.begin(), loads.end());
  spdlog::info(
      "[control] step {}: assignment by {} ({}): controller of each rank [{}]; max load {} B/s, "
      "lower bound {} B/s{}",
      step, settings_.policy_name, why, absl::StrJoin(controller_of, " "), max_load, lower_bound,
      policy_bound ? "" : " (trivial)");
  nlohmann::json record = {{"event", "assignment"},
                           {"step", step},
                           {"why", why},
                           {"policy", settings_.policy_name},
                           {"controllers", controllers},
                           {"controller_of", controller_of},
                           {"loads", problem.switch_load},
                           {"controller_loads", loads},
                           {"max_load", max_load},
                           {"lower_bound", lower_bound},
                           {"bound", policy_bound ? "policy" : "trivial"}};
  nlohmann::json potential = nlohmann::json::array();
  for (int r = 0; r < size_; ++r) {
    std::vector<int> ranks;
    for (int32_t c : problem.potential[r]) ranks.push_back(instance_.controller_rank[c]);
    potential.push_back(ranks);
  }
  record["potential"] = potential;
  Write(record.dump());
  if (!assigned_) return;
  for (int r = 0; r < size_; ++r) {
    if (previous[r] == owner_[r]) continue;
    const int from = instance_.controller_rank[previous[r]], to = controller_of[r];
    // Moves off a live controller are the policy's re-balancing around the lost one.
    const std::string reason = lost_[previous[r]] || why.find(" lost") == std::string::npos
                                   ? why
                                   : "re-balance after " + why;
    spdlog::info("[control] step {}: migration of rank {} from controller rank {} to {} ({})", step,
                 r, from, to, why);
    Write(nlohmann::json{
        {"event", "migration"},
        {"step", step},
        {"worker", r},
        {"from", from},
        {"to", to},
        {"why",
         why}}.dump());
  }
}

void ControlRounds::LogGroups(int64_t step, const std::vector<double>& all) {
  auto field = [&](int r, Field f) { return all[static_cast<size_t>(r) * kFields + f]; };
  const bool periodic = step == 1 || step % settings_.log_freq == 0;
  for (size_t c = 0; c < lost_.size(); ++c) {
    const int rank = instance_.controller_rank[c];
    if (field(rank, kProgress) != static_cast<double>(step)) continue;
    if (field(rank, kStraggler) >= 0) {
      Write(nlohmann::json{{"event", "straggler"},
                           {"step", step},
                           {"controller", rank},
                           {"worker", static_cast<int>(field(rank, kStraggler))},
                           {"busy_s", field(rank, kStragglerBusy)},
                           {"others_median_s", field(rank, kOthersMedian)}}
                .dump());
    }
    if (field(rank, kLate) >= 0) {
      Write(nlohmann::json{{"event", "heartbeat_missed"},
                           {"step", step},
                           {"controller", rank},
                           {"worker", static_cast<int>(field(rank, kLate))},
                           {"silent_s", field(rank, kLateSeconds)}}
                .dump());
    }
    if (!periodic) continue;
    std::vector<int> workers;
    for (int r = 0; r < size_; ++r) {
      if (owner_[r] == static_cast<int32_t>(c)) workers.push_back(r);
    }
    Write(nlohmann::json{{"event", "controller"},
                         {"step", step},
                         {"controller", rank},
                         {"workers", workers},
                         {"reports", field(rank, kReports)},
                         {"received_bytes_per_s", field(rank, kReceived)},
                         {"mean_busy_s", field(rank, kMeanBusy)},
                         {"max_busy_s", field(rank, kMaxBusy)}}
              .dump());
  }
}

void ControlRounds::Write(const std::string& line) {
  if (!jsonl_.is_open()) return;
  jsonl_ << line << '\n';
  jsonl_.flush();
}

}  // namespace titan
