// The exit status of titan's programs, by kind of outcome (docs/reference.md, "Exit status").
#ifndef TITAN_CORE_RUNTIME_EXIT_CODE_H_
#define TITAN_CORE_RUNTIME_EXIT_CODE_H_

#include "absl/status/status.h"

namespace titan {

inline constexpr int kExitOk = 0;
// A failure while working: a collective timeout, a lost rank, I/O, a non-finite loss, a bug.
inline constexpr int kExitFailure = 1;
// A usage, recipe or setup error found before any work: the same command fails the same way.
inline constexpr int kExitUsage = 2;
// Stopped by SIGINT or SIGTERM after a clean save (a second signal exits with 128 + signal).
inline constexpr int kExitStopped = 3;

// The exit status of a program that ended with `status`: 0 when ok, kExitStopped when
// cancelled, kExitUsage for the codes that blame the input (invalid argument, not found, failed
// precondition, unimplemented, out of range, already exists), kExitFailure for the rest.
int ExitCodeOf(const absl::Status& status);

}  // namespace titan

#endif  // TITAN_CORE_RUNTIME_EXIT_CODE_H_
