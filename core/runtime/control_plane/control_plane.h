// The control plane of devolved controllers (docs/lbdc.md, docs/control-plane.md): a few
// controller ranks watch the others. After each step a rank hands its report (step, loss, busy
// time) to its control thread, which sends it to the rank's controller on a communicator of its
// own, so reporting never blocks a training collective. Controllers name workers whose reports
// are late (heartbeats) and stragglers; the `control_plane.policy` balance plugin assigns
// workers by their measured reporting load and re-balances when loads drift or a controller is
// lost. Rank 0 writes the events to <job.dump_folder>/control_plane.jsonl.
#ifndef TITAN_CORE_RUNTIME_CONTROL_PLANE_CONTROL_PLANE_H_
#define TITAN_CORE_RUNTIME_CONTROL_PLANE_CONTROL_PLANE_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include "core/runtime/control_plane/control_round.h"
#include "titan/device_mesh.h"

namespace titan {

// [control_plane], read by the job plan.
struct ControlPlaneOptions {
  bool enable = false;
  ControlPlacement placement;
  // The balance plugin, the thresholds, the debug controller loss and where rank 0 writes the
  // events (<job.dump_folder>/control_plane.jsonl); lose_controller is checked against the
  // controllers once they are placed.
  ControlSettings settings;
  int64_t debug_slow_rank = -1;  // this rank sleeps debug_slow_seconds after each step
  double debug_slow_seconds = 0;
};

// What can be checked before the job starts (titan-run --validate too): the debug ranks
// against `world`, and a topology file that places every rank by name (one that places ranks by
// host waits for the hostnames, at the start).
absl::Status CheckControlPlane(const ControlPlaneOptions& options, int world);

class ControlPlane {
 public:
  // Null when options.enable is false. Collective over mesh.world(): every rank calls it.
  static absl::StatusOr<std::unique_ptr<ControlPlane>> Start(const ControlPlaneOptions& options,
                                                             DeviceMesh& mesh);
  ControlPlane(std::unique_ptr<ControlRounds> rounds, const CommunicationClock* clock,
               double slow_seconds);
  // Finishes the rounds of the steps handed over, then stops the control thread.
  ~ControlPlane();

  // Called by the training thread after each step; returns at once (after the debug delay on
  // the rank control_plane.debug_slow_rank names).
  void AfterStep(int64_t step, double loss);

 private:
  void Run();

  std::unique_ptr<ControlRounds> rounds_;
  const CommunicationClock* clock_;  // null: the step's waits are not known
  double slow_seconds_ = 0;
  std::chrono::steady_clock::time_point last_step_end_;
  double last_communication_s_ = 0;
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<StepReport> queue_;
  bool finishing_ = false;
  std::thread thread_;
};

}  // namespace titan

#endif  // TITAN_CORE_RUNTIME_CONTROL_PLANE_CONTROL_PLANE_H_
