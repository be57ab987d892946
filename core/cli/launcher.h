// Where a launcher placed this process: its rank, the number of ranks and its rank among those
// on its machine, read from the variables mpirun (OpenMPI), Slurm's srun or a PMI launcher set,
// and the device index a local rank takes.
#ifndef TITAN_CORE_CLI_LAUNCHER_H_
#define TITAN_CORE_CLI_LAUNCHER_H_

#include <functional>
#include <optional>
#include <string>

#include "titan/status.h"

namespace titan {

struct LaunchPlacement {
  std::string launcher;     // "mpirun", "srun", "PMI" or "PMIx": which variables were read
  std::string variables;    // their names, world size first, for messages
  std::optional<int> rank;  // absent where the launcher sets no rank variable
  int world_size = 1;
  int local_rank = 0;  // 0 where the launcher sets no local-rank variable
};

// Reads an environment variable; nullptr when unset (std::getenv in titan-run, a map in tests).
using EnvironmentLookup = std::function<const char*(const char*)>;

// The placement of the first launcher whose world-size variable is set, in the order mpirun,
// srun, PMI, PMIx: mpirun's ranks keep the Slurm variables of the step that started mpirun's
// daemons, so OpenMPI's own come first. srun counts only inside a job step (SLURM_STEP_ID set):
// a batch script has SLURM_NTASKS and SLURM_PROCID too, but is one process. nullopt when no
// launcher started this process; an error naming the variable when one is not a whole number in
// range (a rank or local rank below 0 or past the world).
absl::StatusOr<std::optional<LaunchPlacement>> ReadLaunchPlacement(const EnvironmentLookup& env);

// The device a local rank computes on, of `device_count` devices of `device_name`: its own
// (the local rank's index), or, when `may_share` (the comm plugin stages device buffers through
// the host), local rank modulo the count. An error naming `job.device`, the local rank and the
// count when the machine has too few.
absl::StatusOr<int> DeviceOfLocalRank(int local_rank, int device_count, bool may_share,
                                      const std::string& device_name,
                                      const std::string& comm_backend);

}  // namespace titan

#endif  // TITAN_CORE_CLI_LAUNCHER_H_
