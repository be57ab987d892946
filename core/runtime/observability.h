// What a run records besides its metrics, from the recipe's [profiling] and [metrics] keys: the
// step profiler's traces, memory snapshots and TensorBoard event files. All off by default; the
// trainer calls BeginProfiledStep / EndProfiledStep around each step, which cost a comparison
// when nothing is on.
#ifndef TITAN_CORE_RUNTIME_OBSERVABILITY_H_
#define TITAN_CORE_RUNTIME_OBSERVABILITY_H_

#include <cstdint>
#include <memory>
#include <string>

#include "core/runtime/tensorboard.h"
#include "titan/communicator.h"
#include "titan/trace.h"

namespace titan {

// [profiling], with its folders under job.dump_folder.
struct ProfilingOptions {
  bool traces = false;            // enable_profiling
  bool memory_snapshots = false;  // enable_memory_snapshot
  int64_t freq = 10;              // profile_freq
  std::string traces_folder;      // <dump_folder>/<save_traces_folder>
  std::string memory_folder;      // <dump_folder>/<save_memory_snapshot_folder>
};

// [metrics]' TensorBoard keys, with the folder under job.dump_folder.
struct TensorBoardOptions {
  bool enable = false;     // enable_tensorboard
  bool all_ranks = false;  // save_for_all_ranks
  std::string folder;      // <dump_folder>/<save_tb_folder>
};

// With `options.traces` makes the step profiler and returns it as the sink a comm plugin reports
// collectives to (null otherwise).
absl::StatusOr<TraceSink*> StartProfiling(const ProfilingOptions& options);
// Once the rank is known: names the trace files and starts tracking memory when
// profiling.enable_memory_snapshot is set.
void SetProfilingRank(int rank);

// Starts recording `step` when it is one to profile (a multiple of profiling.profile_freq).
void BeginProfiledStep(int64_t step);
// After a profiled step: writes its trace, this rank's flight record (where the comm keeps one,
// so the trace's collectives can be checked against it) and its memory snapshot.
absl::Status EndProfiledStep(int64_t step, Communicator& world);

// The TensorBoard writer of this rank: under <options.folder>/<time>/
// on rank 0, or on every rank in rank_<R>/ below it with metrics.save_for_all_ranks; null when
// metrics.enable_tensorboard is off or this rank writes none.
absl::StatusOr<std::unique_ptr<TensorBoardWriter>> OpenTensorBoard(
    const TensorBoardOptions& options, int rank);

// Forgets the profiler and the memory settings (for tests).
void StopProfiling();

}  // namespace titan

#endif  // TITAN_CORE_RUNTIME_OBSERVABILITY_H_
