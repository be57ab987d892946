// Pipeline schedules as data (after torch.distributed.pipelining): a schedule is, for each pp
// rank, the ordered list of actions it runs in one optimizer step. Generators build the
// compute actions of each named schedule; Lower adds the sends and receives between ranks; a
// CSV file can hold any schedule; Check proves a schedule runs (every dependency met, no
// deadlock) before the first step.
#ifndef TITAN_PLUGINS_PARALLEL_PP_SCHEDULE_H_
#define TITAN_PLUGINS_PARALLEL_PP_SCHEDULE_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "titan/status.h"

namespace titan::pp {

enum class ActionType {
  kForward,         // F: the stage's forward of the microbatch
  kBackward,        // B: the whole backward (input and weight gradients)
  kBackwardInput,   // I: the gradient of the stage's input only
  kBackwardWeight,  // W: the weight gradients, after the microbatch's I
  kSendForward,     // SEND_F: the stage's output to the rank of stage + 1
  kRecvForward,     // RECV_F: the stage's input from the rank of stage - 1
  kSendBackward,    // SEND_B: the gradient of the stage's input to the rank of stage - 1
  kRecvBackward,    // RECV_B: the gradient of the stage's output from the rank of stage + 1
};

struct Action {
  ActionType type;
  int stage = 0;
  int microbatch = 0;
  bool operator==(const Action&) const = default;
};

// Whether the action computes (F, B, I, W) rather than communicates.
bool IsCompute(ActionType type);

// "0F3", "1I0", "2SEND_F1", "0RECV_B5": stage, type, microbatch, as PyTorch writes them.
std::string ActionName(const Action& action);
absl::StatusOr<Action> ParseAction(absl::string_view text);
// `text` from a file, as an error message quotes it: at most 40 bytes, C-escaped, so that a
// binary file's bytes never reach the log raw.
std::string Excerpt(absl::string_view text);

// How stages sit on ranks: kLoop puts stage s on rank s % ranks (GPipe, 1F1B, Interleaved1F1B,
// LoopedBFS, InterleavedZeroBubble); kV puts two stages on each rank, rank r holding stages r
// and 2 * ranks - 1 - r (ZBVZeroBubble, DualPipeV), so the first and last stage share rank 0.
enum class StagePlacement { kLoop, kV };

struct Schedule {
  std::string name;
  int ranks = 0;
  int stages = 0;  // ranks x stages per rank
  int microbatches = 0;
  std::vector<int> stage_rank;               // stage -> the rank that runs it
  std::vector<std::vector<Action>> actions;  // one list per rank, in the order it runs them
  bool lowered = false;                      // holds the sends and receives
};

// The schedule names, as TorchTitan spells them (recipe key pipeline_parallel_schedule):
// GPipe, 1F1B, Interleaved1F1B, LoopedBFS, InterleavedZeroBubble, ZBVZeroBubble, DualPipeV.
const std::vector<std::string>& ScheduleNames();
// Whether the named schedule runs several stages per rank (all but GPipe and 1F1B).
absl::StatusOr<bool> IsMultiStage(absl::string_view name);
absl::StatusOr<StagePlacement> PlacementOf(absl::string_view name);

// The compute actions (F, B or I + W) of the named schedule for `ranks` ranks holding
// `stages_per_rank` stages each and `microbatches` microbatches; an error names what does not
// fit (an unknown name with the valid ones, V schedules need stages_per_rank 2, 1F1B-style
// schedules need microbatches >= ranks where TorchTitan requires it, ...).
absl::StatusOr<Schedule> Generate(absl::string_view name, int ranks, int stages_per_rank,
                                  int microbatches);

// Adds SEND_F/RECV_F/SEND_B/RECV_B for every activation and gradient that crosses ranks: a
// receive right before the compute that needs it, a send right after the compute that makes
// it. Stages on the same rank hand over without communication. Idempotent on lowered schedules.
Schedule Lower(const Schedule& compute_only);

// Reads a schedule from CSV: line r lists rank r's actions, comma separated (empty cells
// skipped), as ParseAction reads them; '#' starts a comment line. The CSV may hold compute
// actions only (then it is lowered) or every action. Stages are placed where their compute
// actions appear (each stage on exactly one rank). Errors name the file, line and cell. The
// schedule returned is lowered and has passed Check (whose message follows the file name).
absl::StatusOr<Schedule> ReadCsv(const std::string& path, int ranks, int microbatches);
std::string WriteCsv(const Schedule& schedule);

// Simulates a lowered schedule: sends never block, a receive waits for its send, a compute
// action waits for its inputs (F(s, m) for the output of F(s - 1, m), B/I(s, m) for F(s, m) and
// the gradient from stage s + 1, W(s, m) for I(s, m)). Every (stage, microbatch) must be
// computed exactly once in each direction on the stage's rank (F, and B or I + W), every receive
// must match one send. The error names the first violation: "rank 1, action 4 (1RECV_F2): ..."
// or, on a deadlock, every blocked rank with the action it waits at.
absl::Status Check(const Schedule& lowered);

// The idle fraction of the ranks' time when F costs 1, B 2, I 1 and W 1 and communication is
// free: 1 - work / (ranks x makespan), from the same simulation as Check.
absl::StatusOr<double> TheoreticalBubble(const Schedule& lowered);

// The most microbatches whose activations `rank` holds at once: forwards run whose backward has
// not (a split backward holds them until its W), over all the rank's stages. Sizes activation
// memory: 1F1B holds ranks - rank, GPipe every microbatch.
int PeakInFlight(const Schedule& schedule, int rank);

}  // namespace titan::pp

#endif  // TITAN_PLUGINS_PARALLEL_PP_SCHEDULE_H_
