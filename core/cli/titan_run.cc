// titan-run: parses flags, loads the recipe and its plugins, builds the job and runs it.
#include <omp.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <boost/dll/runtime_symbol_info.hpp>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/cli/launcher.h"
#include "core/cli/options.h"
#include "core/cli/wait_policy.h"
#include "core/runtime/control_plane/timed_communicator.h"
#include "core/runtime/device_mesh.h"
#include "core/runtime/dump_folder_lock.h"
#include "core/runtime/exit_code.h"
#include "core/runtime/guarded_communicator.h"
#include "core/runtime/logging.h"
#include "core/runtime/mesh_shape.h"
#include "core/runtime/observability.h"
#include "core/runtime/plugin_registry.h"
#include "core/runtime/recipe.h"
#include "core/runtime/recipe_reference.h"
#include "core/runtime/single_process_comm.h"
#include "core/runtime/writable_folder.h"
#include "core/tensor/bf16_gemm.h"
#include "core/train/job_plan.h"
#include "core/train/run_control.h"
#include "core/train/trainer.h"
#include "titan/comm.h"
#include "titan/device.h"
#include "titan/optimizer.h"

namespace titan {
namespace {

void PrintPlugins(const std::vector<PluginInfo>& plugins) {
  std::cout << absl::StrFormat("%-10s %-14s %-8s %-4s %s\n", "KIND", "NAME", "VERSION", "ABI",
                               "PATH / SUMMARY");
  for (const PluginInfo& info : plugins) {
    const PluginDescriptor& d = *info.descriptor;
    std::cout << absl::StrFormat("%-10s %-14s %-8s %-4d %s\n%34s%s\n", d.kind, d.name, d.version,
                                 d.abi_version, info.location(), "", d.summary);
  }
}

// Where the launcher placed this process (mpirun, srun, PMI), or nullopt when started directly.
std::optional<LaunchPlacement> Placement() {
  static const absl::StatusOr<std::optional<LaunchPlacement>> placement =
      ReadLaunchPlacement([](const char* name) { return std::getenv(name); });
  return placement.ok() ? *placement : std::nullopt;
}

// The number of ranks the launcher started; nullopt when started directly.
std::optional<int> LaunchedWorldSize() {
  if (std::optional<LaunchPlacement> placement = Placement()) return placement->world_size;
  return std::nullopt;
}

// The world --validate checks the recipe for: the launched one, else the product of the
// degrees (a data_parallel_shard_degree of -1 counted as 1), which the log states.
absl::StatusOr<int> ValidationWorldSize(const Recipe& recipe) {
  if (std::optional<int> launched = LaunchedWorldSize()) return *launched;
  TITAN_ASSIGN_OR_RETURN(int world, RanksOfDegrees(recipe.section("parallelism")));
  spdlog::info(
      "not started by a launcher: checking the recipe for {} rank(s), the product of "
      "the [parallelism] degrees",
      world);
  return world;
}

// The rank's index among the ranks on its machine, from the launcher's variables; 0 alone.
int LocalRank() {
  std::optional<LaunchPlacement> placement = Placement();
  return placement ? placement->local_rank : 0;
}

// The plan's device plugin (job.device), with this rank's device selected: the CPU is one
// device all local ranks share; an accelerator is chosen by local rank, one each unless the comm
// plugin stages device buffers through the host.
absl::StatusOr<DevicePlugin*> SelectDevice(const JobPlan& plan) {
  DevicePlugin* device = plan.job.device;
  const std::string& name = plan.job.device_name;
  if (device->compute() == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job.device = \"", name, "\": the ", name,
        " device plugin allocates and copies memory but implements no compute kernels yet, so "
        "titan cannot train on it; use job.device = \"cpu\""));
  }
  const int count = device->DeviceCount(), local_rank = LocalRank();
  if (device->type() == DeviceType::kCpu) return device;
  const std::string& backend = plan.comm.backend;
  // A communicator that stages device buffers through host memory lets ranks share a device
  // (round robin); NCCL refuses two ranks of one communicator on one device.
  const bool shared = plan.comm.plugin == nullptr || plan.comm.plugin->traits().stages_through_host;
  TITAN_ASSIGN_OR_RETURN(const int index,
                         DeviceOfLocalRank(local_rank, count, shared, name, backend));
  if (index != local_rank) {
    spdlog::info("[job] local rank {} shares {} device {} (comm.backend = \"{}\")", local_rank,
                 name, index, backend);
  }
  TITAN_RETURN_IF_ERROR(device->Select(index));
  return device;
}

// The comm plugin's world must be the one the launcher started: under srun without a PMI that
// MPI speaks, every process is a world of its own.
absl::Status CheckPlacement(const Communicator& world) {
  std::optional<LaunchPlacement> placement = Placement();
  if (!placement) return absl::OkStatus();
  if (world.size() == placement->world_size &&
      (!placement->rank || world.rank() == *placement->rank)) {
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(absl::StrCat(
      placement->launcher, " started ", placement->world_size, " ranks",
      placement->rank ? absl::StrCat(", this process as rank ", *placement->rank) : "", " (",
      placement->variables, "), but the comm plugin's world holds ", world.size(),
      " rank(s), this process being rank ", world.rank(),
      placement->launcher == "srun"
          ? ": MPI was not started through a PMI that srun provides; launch with "
            "`srun --mpi=pmix` (`srun --mpi=list` lists the cluster's), or with mpirun inside "
            "the allocation"
          : ""));
}

// Connects this rank to the job through the plan's comm plugin (the recipe's, or the one
// "auto" stands for) and builds the mesh.
absl::StatusOr<std::unique_ptr<DeviceMesh>> JoinJob(const JobPlan& plan, DevicePlugin& device,
                                                    TraceSink* trace) {
  if (plan.comm.plugin == nullptr) {
    return absl::InternalError("the job plan chose no comm plugin for a job of several ranks");
  }
  TITAN_ASSIGN_OR_RETURN(
      std::unique_ptr<Communicator> world, CallPluginOf(*plan.comm.plugin, "ConnectWorld", [&] {
        return plan.comm.plugin->ConnectWorld(JoinOptions{plan.job.dump_folder, trace, &device});
      }));
  // An exception escaping a communicator's call names the comm plugin, as its own calls do.
  world = GuardCommunication(std::move(world), dynamic_cast<const void*>(plan.comm.plugin));
  TITAN_RETURN_IF_ERROR(CheckPlacement(*world));
  // The control plane tells a rank's own work from its waits for the others.
  if (plan.control_plane.enable) world = TimeCommunication(std::move(world));
  return BuildDeviceMesh(std::move(world), plan.parallelism.shape, &device);
}

// The folders the run will write to later (checkpoints, profiles, TensorBoard), checked now.
absl::Status CheckOutputFolders(const JobPlan& plan) {
  if (plan.checkpoint.plugin != nullptr) {
    TITAN_RETURN_IF_ERROR(CheckWritableFolder(plan.checkpoint.root, "checkpoint.folder"));
  }
  if (plan.profiling.traces) {
    TITAN_RETURN_IF_ERROR(
        CheckWritableFolder(plan.profiling.traces_folder, "profiling.save_traces_folder"));
  }
  if (plan.profiling.memory_snapshots) {
    TITAN_RETURN_IF_ERROR(
        CheckWritableFolder(plan.profiling.memory_folder, "profiling.save_memory_snapshot_folder"));
  }
  if (plan.metrics.tensorboard.enable) {
    TITAN_RETURN_IF_ERROR(
        CheckWritableFolder(plan.metrics.tensorboard.folder, "metrics.save_tb_folder"));
  }
  return absl::OkStatus();
}

// Ends a rank of a job of several after a fatal error at once, without MPI_Finalize: under Open
// MPI that waits in a fence for every rank, while the others wait in a collective for this one
// until comm.train_timeout_seconds. A rank that exits unfinalized with a failing status makes
// mpirun (and `srun --kill-on-bad-exit=1`) stop the others at once.
[[noreturn]] void EndFailedRank(int exit_code) {
  spdlog::error("ending this rank now (exit status {}) so that the launcher stops the others",
                exit_code);
  spdlog::shutdown();
  std::cout.flush();
  std::fflush(nullptr);
  std::_Exit(exit_code);
}

int Run(const std::vector<std::string>& args) {
  absl::StatusOr<std::optional<LaunchPlacement>> placement =
      ReadLaunchPlacement([](const char* name) { return std::getenv(name); });
  // Every line names its rank from the start, a usage error's too, not only once the
  // communicator exists.
  if (placement.ok() && *placement && (*placement)->rank) SetLogRank(*(*placement)->rank);
  absl::StatusOr<Options> options = ParseOptions(args);
  if (!options.ok()) {
    InitLogging(spdlog::level::info);
    spdlog::error("{}", std::string(options.status().message()));
    return kExitUsage;
  }
  absl::StatusOr<spdlog::level::level_enum> level = ParseLogLevel(options->log_level);
  InitLogging(level.ok() ? *level : spdlog::level::info);
  if (!level.ok()) {
    spdlog::error("{}", std::string(level.status().message()));
    return kExitUsage;
  }
  if (options->help) {
    std::cout << kUsage;
    return kExitOk;
  }
  if (options->version) {
    std::cout << "titan " << TITAN_VERSION << " (plugin ABI " << TITAN_ABI_VERSION << ")\n";
    return kExitOk;
  }
  // A misspelt setting must not silently choose the other GEMM path.
  if (absl::Status bf16_gemm = CheckBf16GemmSetting(); !bf16_gemm.ok()) {
    spdlog::error("{}", std::string(bf16_gemm.message()));
    return kExitUsage;
  }
  if (!options->list_plugins && !options->recipe_reference && options->recipe.empty()) {
    spdlog::error(
        "nothing to do: give --recipe FILE, --list-plugins or --recipe-reference "
        "(see --help)");
    return kExitUsage;
  }
  if (!placement.ok()) {
    spdlog::error("{}", std::string(placement.status().message()));
    return kExitUsage;
  }
  if (*placement && (*placement)->rank) {
    spdlog::info("[job] started by {} as rank {} of {}, local rank {} ({})", (*placement)->launcher,
                 *(*placement)->rank, (*placement)->world_size, (*placement)->local_rank,
                 (*placement)->variables);
  }

  const char* env_path = std::getenv("TITAN_PLUGIN_PATH");
  std::filesystem::path executable = boost::dll::program_location().string();
  auto dirs = PluginSearchDirs(options->plugin_dirs, env_path ? env_path : "", executable);
  if (!dirs.ok()) {
    spdlog::error("{}", std::string(dirs.status().message()));
    return kExitUsage;
  }
  for (const auto& dir : *dirs) spdlog::debug("plugin directory {}", dir.string());
  auto registry = PluginRegistry::Discover(*dirs);
  if (!registry.ok()) {
    spdlog::error("{}", std::string(registry.status().message()));
    return kExitFailure;
  }
  for (const RejectedPlugin& rejected : (*registry)->rejected()) {
    spdlog::warn("skipping plugin file {}", rejected.reason);
  }
  if (options->recipe_reference) {
    std::cout << RecipeReference(**registry);
    return kExitOk;
  }
  if (options->list_plugins) {
    PrintPlugins((*registry)->plugins());
    if (options->recipe.empty()) return kExitOk;
  }

  absl::StatusOr<RawRecipe> raw = ParseRecipeFile(options->recipe);
  if (!raw.ok()) {
    spdlog::error("{}", std::string(raw.status().message()));
    return kExitUsage;
  }
  for (const std::string& assignment : options->overrides) {
    absl::Status status = ApplyOverride(*raw, assignment);
    if (!status.ok()) {
      spdlog::error("{}", std::string(status.message()));
      return kExitUsage;
    }
  }
  absl::StatusOr<Recipe> recipe = ValidateRecipe(*raw, **registry);
  if (!recipe.ok()) {
    spdlog::error("{}", std::string(recipe.status().message()));
    return kExitUsage;
  }
  if (options->print_recipe) {
    std::cout << recipe->ToToml();
    return kExitOk;
  }
  for (const Recipe::SelectedPlugin& plugin : recipe->plugins()) {
    const PluginDescriptor& d = *plugin.info->descriptor;
    spdlog::info("[{}] uses {} plugin '{}' {} ({})", plugin.section, d.kind, d.name, d.version,
                 plugin.info->location());
  }
  absl::StatusOr<int> world =
      options->validate ? ValidationWorldSize(*recipe) : LaunchedWorldSize().value_or(1);
  absl::StatusOr<MeshShape> mesh =
      world.ok() ? InferMeshShape(recipe->section("parallelism"), *world) : world.status();
  if (!mesh.ok()) {
    spdlog::error("{}: {}", options->recipe, std::string(mesh.status().message()));
    return kExitUsage;
  }
  const int world_size = *world;
  // Every check the run makes before it starts is made here, with --validate or without.
  PlanOptions plan_options;
  plan_options.read_data = options->validate;
  plan_options.launched_world = LaunchedWorldSize().has_value() || !options->validate;
  absl::StatusOr<JobPlan> plan = BuildJobPlan(*recipe, **registry, *mesh, plan_options);
  if (!plan.ok()) {
    spdlog::error("{}", std::string(plan.status().message()));
    return ExitCodeOf(plan.status());
  }
  absl::StatusOr<DevicePlugin*> device = SelectDevice(*plan);
  if (!device.ok()) {
    spdlog::error("{}: {}", options->recipe, std::string(device.status().message()));
    return kExitUsage;
  }
  spdlog::info("[job] \"{}\" on dataset \"{}\"", plan->job.description, plan->training.dataset);
  for (const std::string& warning : plan->warnings) spdlog::warn("{}", warning);
  if (options->validate) {
    for (const std::string& note : plan->unchecked) spdlog::info("not checked yet: {}", note);
    spdlog::info("{}: recipe is valid for {} rank(s)", options->recipe, world_size);
    return kExitOk;
  }
  spdlog::info("{}: recipe is valid; mesh pp={} dp_replicate={} dp_shard={} cp={} tp={}",
               options->recipe, mesh->degree(MeshDim::kPp), mesh->degree(MeshDim::kDpReplicate),
               mesh->degree(MeshDim::kDpShard), mesh->degree(MeshDim::kCp),
               mesh->degree(MeshDim::kTp));
  spdlog::info("[threads] {} OpenMP thread(s); idle ones wait by {}", omp_get_max_threads(),
               WaitPolicyDescription());
  // From here a signal stops the run after a clean save instead of losing its steps.
  InstallStopSignalHandlers();
  std::unique_ptr<DeviceMesh> device_mesh;
  absl::StatusOr<TraceSink*> trace = StartProfiling(plan->profiling);
  if (!trace.ok()) {
    spdlog::error("{}: {}", options->recipe, std::string(trace.status().message()));
    return kExitUsage;
  }
  if (world_size == 1) {
    absl::StatusOr<std::unique_ptr<DeviceMesh>> single =
        BuildDeviceMesh(std::make_unique<SingleProcessCommunicator>(
                            false, FlightRecordFolder(plan->job.dump_folder)),
                        *mesh, *device);
    if (!single.ok()) {
      spdlog::error("{}", std::string(single.status().message()));
      return kExitFailure;
    }
    device_mesh = std::move(*single);
  } else {
    absl::StatusOr<std::unique_ptr<DeviceMesh>> joined = JoinJob(*plan, **device, *trace);
    if (!joined.ok()) {
      spdlog::error("{} ranks were launched: {}", world_size,
                    std::string(joined.status().message()));
      return kExitFailure;
    }
    device_mesh = std::move(*joined);
    SetLogRank(device_mesh->world().rank());
    spdlog::info(
        "[comm] rank {} of {}: mesh coordinates pp={} dp_replicate={} dp_shard={} cp={} "
        "tp={}",
        device_mesh->world().rank(), device_mesh->world().size(),
        device_mesh->coordinate(MeshDim::kPp), device_mesh->coordinate(MeshDim::kDpReplicate),
        device_mesh->coordinate(MeshDim::kDpShard), device_mesh->coordinate(MeshDim::kCp),
        device_mesh->coordinate(MeshDim::kTp));
  }
  SetProfilingRank(device_mesh->world().rank());
  // Held until the run returns; the kernel releases it however the process ends.
  absl::StatusOr<std::optional<DumpFolderLock>> lock =
      LockDumpFolderForJob(plan->job.dump_folder, device_mesh->world());
  if (!lock.ok()) {
    spdlog::error("{}: {}", options->recipe, std::string(lock.status().message()));
    return ExitCodeOf(lock.status());
  }
  if (absl::Status writable = CheckOutputFolders(*plan); !writable.ok()) {
    spdlog::error("{}: {}", options->recipe, std::string(writable.message()));
    return ExitCodeOf(writable);
  }
  ServeFlightRecordRequest(device_mesh->world(), "asked before this rank joined the job");
  absl::Status trained = Train(*plan, *device_mesh);
  if (absl::IsCancelled(trained)) {
    spdlog::warn("{}: {}", options->recipe, std::string(trained.message()));
    return kExitStopped;
  }
  if (!trained.ok()) {
    spdlog::error("{}: {}", options->recipe, std::string(trained.message()));
    if (device_mesh->world().size() > 1) {
      // The collectives up to the failure, for comparing ranks (a timeout has written one).
      absl::StatusOr<std::string> record =
          device_mesh->world().DumpFlightRecord(absl::StrCat("fatal error: ", trained.message()));
      if (record.ok()) spdlog::error("flight record in {}", *record);
      EndFailedRank(ExitCodeOf(trained));
    }
    return ExitCodeOf(trained);
  }
  return kExitOk;
}

}  // namespace
}  // namespace titan

int main(int argc, char** argv) {
  // Before anything: libgomp has read the policy already, so setting it means starting again.
  if (titan::WaitPolicyNeedsDefault()) titan::RunAgainWithDefaultWaitPolicy(argv);
  titan::InstallFlightRecordSignalHandler();  // before anything: SIGUSR1 must never end the run
  try {
    return titan::Run(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const std::exception& e) {
    // Last line of defence: every known failure is a Status; this names an unexpected one.
    std::fprintf(stderr, "titan-run: internal error: %s\n", e.what());
    return titan::kExitFailure;
  } catch (...) {
    std::fprintf(stderr, "titan-run: internal error: an exception of an unknown type\n");
    return titan::kExitFailure;
  }
}
