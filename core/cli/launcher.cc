#include "core/cli/launcher.h"

#include <limits>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace titan {
namespace {

constexpr int kNoLimit = std::numeric_limits<int>::max();

struct LauncherVariables {
  const char* launcher;
  const char* needs;  // a variable that must be set as well, or nullptr
  const char* world_size;
  const char* rank;
  std::vector<const char*> local_rank;  // the first one set counts
};

const std::vector<LauncherVariables>& Launchers() {
  static const std::vector<LauncherVariables> launchers = {
      {"mpirun",
       nullptr,
       "OMPI_COMM_WORLD_SIZE",
       "OMPI_COMM_WORLD_RANK",
       {"OMPI_COMM_WORLD_LOCAL_RANK"}},
      {"srun", "SLURM_STEP_ID", "SLURM_NTASKS", "SLURM_PROCID", {"SLURM_LOCALID"}},
      {"PMI", nullptr, "PMI_SIZE", "PMI_RANK", {"MPI_LOCALRANKID", "PMI_LOCAL_RANK"}},
      {"PMIx", nullptr, "PMIX_SIZE", "PMIX_RANK", {"MPI_LOCALRANKID", "PMI_LOCAL_RANK"}},
  };
  return launchers;
}

// The value of `name` as a whole number in [least, limit), or an error naming the variable.
absl::StatusOr<int> ReadNumber(const EnvironmentLookup& env, const char* name, int least, int limit,
                               const std::string& launcher, const char* what) {
  const char* value = env(name);
  int number = 0;
  if (!absl::SimpleAtoi(value, &number) || number < least || number >= limit) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " = \"", value, "\": expected ", what, ", a whole number from ", least,
                     limit == kNoLimit ? "" : absl::StrCat(" to ", limit - 1), " (set by ",
                     launcher, ", which started this titan-run)"));
  }
  return number;
}

}  // namespace

absl::StatusOr<std::optional<LaunchPlacement>> ReadLaunchPlacement(const EnvironmentLookup& env) {
  for (const LauncherVariables& vars : Launchers()) {
    if (env(vars.world_size) == nullptr || (vars.needs && env(vars.needs) == nullptr)) continue;
    LaunchPlacement placement;
    placement.launcher = vars.launcher;
    std::vector<std::string> names = {vars.world_size};
    TITAN_ASSIGN_OR_RETURN(placement.world_size, ReadNumber(env, vars.world_size, 1, kNoLimit,
                                                            vars.launcher, "the number of ranks"));
    if (env(vars.rank) != nullptr) {
      names.push_back(vars.rank);
      TITAN_ASSIGN_OR_RETURN(placement.rank, ReadNumber(env, vars.rank, 0, placement.world_size,
                                                        vars.launcher, "this process's rank"));
    }
    for (const char* local : vars.local_rank) {
      if (env(local) == nullptr) continue;
      names.push_back(local);
      TITAN_ASSIGN_OR_RETURN(placement.local_rank,
                             ReadNumber(env, local, 0, placement.world_size, vars.launcher,
                                        "this process's rank on its machine"));
      break;
    }
    placement.variables = absl::StrJoin(names, ", ");
    return placement;
  }
  return std::nullopt;
}

absl::StatusOr<int> DeviceOfLocalRank(int local_rank, int device_count, bool may_share,
                                      const std::string& device_name,
                                      const std::string& comm_backend) {
  if (device_count == 0 || (local_rank >= device_count && !may_share)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job.device = \"", device_name, "\": local rank ", local_rank, " needs device ", local_rank,
        ", but this machine has ", device_count, " ", device_name, " device(s)",
        device_count == 0 ? ""
                          : absl::StrCat("; launch at most ", device_count,
                                         " ranks per machine with comm.backend = \"", comm_backend,
                                         "\", or use comm.backend = \"mpi\"")));
  }
  return local_rank % device_count;
}

}  // namespace titan
