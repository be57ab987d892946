// How titan's OpenMP threads wait between parallel regions. libgomp reads OMP_WAIT_POLICY once,
// as it loads, before main runs; its default spins first, and on a busy machine a spinning thread
// burns the time slice its descheduled partner needs (a loaded 2-core machine trained 2-2.6x
// slower: docs/benchmarks.md). titan-run's default is "passive" (threads sleep at once), which
// an idle machine trains as fast with; OMP_WAIT_POLICY set by the user is kept.
#ifndef TITAN_CORE_CLI_WAIT_POLICY_H_
#define TITAN_CORE_CLI_WAIT_POLICY_H_

#include <string>

namespace titan {

inline constexpr char kDefaultWaitPolicy[] = "passive";

// Whether this process must set the default and run again: OMP_WAIT_POLICY is unset.
bool WaitPolicyNeedsDefault();

// Sets OMP_WAIT_POLICY to the default and runs this program again with the same arguments
// (execv of /proc/self/exe, same process). Returns only when that failed; the run then goes on
// with libgomp's own policy and the log says so.
void RunAgainWithDefaultWaitPolicy(char** argv);

// For the log: "OMP_WAIT_POLICY=passive (titan's default)", "... (set by the user)", or, when
// running again failed, "libgomp's default (spin, then sleep): ...".
std::string WaitPolicyDescription();

}  // namespace titan

#endif  // TITAN_CORE_CLI_WAIT_POLICY_H_
