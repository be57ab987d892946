// Runs a command through the shell for a test, keeping what it printed (stdout and stderr
// together) and how it ended.
#ifndef TITAN_TESTS_SUPPORT_SHELL_H_
#define TITAN_TESTS_SUPPORT_SHELL_H_

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace titan::testing {

struct ShellResult {
  int exit_code = -1;
  bool crashed = false;  // killed by a signal, or a shell's 128 + signal
  std::string output;
};

inline ShellResult RunShell(const std::string& command) {
  ShellResult result;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return result;
  std::array<char, 4096> buffer;
  size_t n;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) {
    result.output.append(buffer.data(), n);
  }
  const int status = pclose(pipe);
  result.crashed = WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) > 128);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

}  // namespace titan::testing

#endif  // TITAN_TESTS_SUPPORT_SHELL_H_
