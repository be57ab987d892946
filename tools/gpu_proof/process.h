// Runs one command of the proof: in its own process group, with a time limit, its output
// (stdout and stderr together) kept and appended to the log as it comes. On the time limit the
// group and every process below the command (a launcher's ranks sit in groups of their own) get
// SIGTERM, then SIGKILL, so nothing of it is left on the GPU.
#ifndef TITAN_TOOLS_GPU_PROOF_PROCESS_H_
#define TITAN_TOOLS_GPU_PROOF_PROCESS_H_

#include <string>
#include <utility>
#include <vector>

namespace titan::gpu_proof {

struct Command {
  std::vector<std::string> argv;
  // Set in the child's environment (replacing a value there), and removed from it.
  std::vector<std::pair<std::string, std::string>> set_env;
  std::vector<std::string> unset_env;
};

struct RunResult {
  bool started = false;  // false: the program could not be run (see `output`)
  int exit_code = -1;    // when it exited
  int signal = 0;        // when a signal ended it
  bool timed_out = false;
  double seconds = 0;
  std::string output;

  bool ok() const { return started && !timed_out && signal == 0 && exit_code == 0; }
  // "exit 0", "exit 1", "signal 11 (Segmentation fault)", "timed out after 12.0 s", ...
  std::string Describe() const;
};

// Runs `command` for at most `limit_s` seconds; SIGKILL follows SIGTERM after `grace_s`.
// The log gets "$ command", the output, and "$ command (Ns, status S)" at the end.
RunResult RunCommand(const Command& command, const std::string& log_path, double limit_s,
                     double grace_s = 5.0);

// The environment a child gets: `base` ("NAME=value" entries) with `command`'s changes; a name
// set twice in `set_env` gets the later value.
std::vector<std::string> ChildEnvironment(const std::vector<std::string>& base,
                                          const Command& command);

// The command line as one line of text, arguments with spaces or quotes in single quotes.
std::string CommandLine(const std::vector<std::string>& argv);

// The last `lines` lines of `text`.
std::string Tail(const std::string& text, int lines = 30);

// On SIGTERM or SIGINT a running command is stopped as on its time limit, then this process
// ends of the same signal: a proof stopped from outside leaves no ranks behind on the GPU.
void KillChildrenOnTermination();

}  // namespace titan::gpu_proof

#endif  // TITAN_TOOLS_GPU_PROOF_PROCESS_H_
