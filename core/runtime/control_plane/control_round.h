// One reporting round of the control plane per training step, run by each rank's control thread
// in the same order on every rank: the rank's report to its controller (point-to-point), each
// live controller collecting its workers' reports, then one all-gather of a small record per
// rank from which every rank takes the same decisions (lost controllers, re-balancing); the
// assignment the policy computes on the lowest live controller is broadcast.
#ifndef TITAN_CORE_RUNTIME_CONTROL_PLANE_CONTROL_ROUND_H_
#define TITAN_CORE_RUNTIME_CONTROL_PLANE_CONTROL_ROUND_H_

#include <array>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/runtime/control_plane/rank_topology.h"
#include "core/runtime/control_plane/timed_communicator.h"
#include "titan/balance.h"
#include "titan/communicator.h"

namespace titan {

struct StepReport {
  int64_t step = 0;
  double loss = 0;
  double busy_s = 0;       // the step's time less the training thread's waits in communication
  double iteration_s = 0;  // the step's wall time
};

struct ControlSettings {
  BalancePlugin* policy = nullptr;
  std::string policy_name;
  double rebalance_threshold = 0.2;
  double heartbeat_timeout_s = 10;
  double straggler_factor = 3;
  int lose_controller = -1;  // debug: this controller rank stops controlling at lose_at_step
  int64_t lose_at_step = 1;
  int64_t log_freq = 10;
  std::string jsonl_path;  // written by rank 0
};

class ControlRounds {
 public:
  ControlRounds(std::unique_ptr<Communicator> control, ControlInstance instance,
                ControlSettings settings);
  ~ControlRounds();

  absl::Status Round(const StepReport& report);

 private:
  // What each rank contributes to a round's all-gather.
  enum Field {
    kLoad,       // bytes of reports per second, measured over the last round
    kProgress,   // the round this rank completed as a live controller, else -1
    kClock,      // seconds since the control plane started
    kReports,    // reports collected as a controller
    kMeanBusy,   // the group's mean busy seconds
    kMaxBusy,    // the group's largest busy seconds
    kReceived,   // report bytes received per second
    kStraggler,  // the worker named a straggler, else -1
    kStragglerBusy,
    kOthersMedian,  // the median busy seconds of the straggler's group's others
    kLate,          // a worker whose report came later than the heartbeat timeout, else -1
    kLateSeconds,
    kFields
  };
  using Record = std::array<double, kFields>;

  absl::Status Collect(int64_t step, int controller, const std::array<double, 4>& own,
                       Record& mine);
  absl::Status Decide(int64_t step, const std::vector<double>& all);
  void LogAssignment(int64_t step, const std::string& why, double lower_bound, bool policy_bound,
                     const std::vector<int32_t>& previous);
  void LogGroups(int64_t step, const std::vector<double>& all);
  void Write(const std::string& line);
  void Watch();

  std::unique_ptr<Communicator> control_;
  ControlInstance instance_;
  ControlSettings settings_;
  int rank_ = 0, size_ = 1;
  int controller_ = -1;  // this rank's controller index
  std::chrono::steady_clock::time_point start_;
  double last_report_clock_ = 0;
  std::vector<int32_t> owner_;          // controller index per rank
  bool assigned_ = false;               // by the policy (before: the nearest potential controller)
  std::vector<double> reference_load_;  // at the last assignment
  std::vector<bool> lost_;
  std::vector<double> last_progress_;  // agreed clock of each controller's last round
  std::ofstream jsonl_;

  // The heartbeat watchdog: names the worker a controller waits for once the timeout passes.
  std::mutex watch_mutex_;
  std::condition_variable watch_cv_;
  int waiting_for_ = -1;
  int64_t waiting_step_ = 0;
  std::chrono::steady_clock::time_point waiting_since_;
  bool named_ = false, stop_watch_ = false;
  std::thread watchdog_;
};

}  // namespace titan

#endif  // TITAN_CORE_RUNTIME_CONTROL_PLANE_CONTROL_ROUND_H_
