// How a training run is stopped early and paced across ranks: SIGINT/SIGTERM request a stop that
// every rank agrees on at the same step, and the communicators' timeouts move from start-up's to
// training's once the first step is done.
#ifndef TITAN_CORE_TRAIN_RUN_CONTROL_H_
#define TITAN_CORE_TRAIN_RUN_CONTROL_H_

#include <string>

#include "titan/communicator.h"
#include "titan/status.h"

namespace titan {

// The first SIGINT or SIGTERM asks the run to stop after the step in progress; a second one
// exits the process at once with 128 + the signal's number, saving nothing.
void InstallStopSignalHandlers();

// SIGUSR1 asks for the flight record and never ends the run. Installed first thing, so that a
// request that comes before this rank has joined its job waits for it; a comm plugin may take
// the signal over once joined, to answer from inside a collective (mpi does).
void InstallFlightRecordSignalHandler();

// Writes `world`'s flight record when SIGUSR1 has asked for one since the last call, logging
// where (or why not); `when` says at what point, e.g. "after step 7".
void ServeFlightRecordRequest(Communicator& world, absl::string_view when);

// The signal that asked for a stop, 0 when none has.
int StopSignal();

// "SIGTERM", "SIGINT" or "signal N".
std::string SignalName(int signal);

// Collective over `world`: true on every rank when any rank has been asked to stop, so that
// all stop after the same step (a launcher forwards a signal to the ranks at different times).
absl::StatusOr<bool> AgreeToStop(Communicator& world);

// Collective over `world`, once the first step is done: waits for every rank under the start-up
// timeout, then moves every communicator of the job to the train timeout.
absl::Status UseTrainTimeouts(Communicator& world);

// Test hook: TITAN_TEST_DELAY_BEFORE_TRAINING="<rank>:<seconds>" stalls that rank before its
// first step, as uneven start-up work would. Unset (always, outside tests) it does nothing.
void DelayBeforeTrainingForTest(int rank);

}  // namespace titan

#endif  // TITAN_CORE_TRAIN_RUN_CONTROL_H_
